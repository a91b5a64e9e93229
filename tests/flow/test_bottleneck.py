"""Naming the bottleneck (flow/bottleneck.py): one case per row of the seed's table (9.3.1), then how
it picks among several candidates and several connections."""
from __future__ import annotations

from flow.bottleneck import Link, find, line


def chain(conn="running", ch="running", q="running", *, conn_on=(), ch_on=(), q_on=()) -> list[Link]:
    """One publisher: connection c1 -> channel c1:1 -> queue orders -> the message store."""
    return [Link("connection", "c1", conn, ("c1:1",), conn_on, 0.6),
            Link("channel", "c1:1", ch, ("orders",), ch_on, 0.5),
            Link("queue", "orders", q, ("msg_store",), q_on, 0.4),
            Link("store", "msg_store")]


def test_nothing_in_flow_is_no_bottleneck():
    assert find(chain()) is None
    assert line(find(chain())) == "bottleneck: none"


def test_a_connection_blocked_by_an_alarm_is_not_in_flow():
    assert find(chain(conn="blocked")) is None


def test_row_1_connection_in_flow_no_channel_in_flow_names_the_channel():
    b = find(chain(conn="flow", conn_on=("c1:1",)))
    assert line(b) == "bottleneck: channel c1:1 (connection c1 in flow, none of its channels in flow)"


def test_row_2_channels_in_flow_no_queue_in_flow_names_the_queue():
    b = find(chain(conn="flow", ch="flow", ch_on=("orders",)))
    assert line(b) == "bottleneck: queue orders (channel c1:1 in flow, none of its queues in flow)"


def test_row_3_queues_in_flow_names_persistence():
    b = find(chain(conn="flow", ch="flow", q="flow", q_on=("msg_store",)))
    assert line(b) == "bottleneck: store msg_store (queue orders in flow, waiting on it)"


def test_row_3_for_a_quorum_queue_names_the_follower_its_leader_waits_on():
    links = [Link("connection", "c1", "flow", ("c1:1",)),
             Link("channel", "c1:1", "flow", ("qq",)),
             Link("queue", "qq", "flow", ("wal@n1", "qq@n2", "qq@n3"), ("qq@n3",)),
             Link("wal", "wal@n1"), Link("follower", "qq@n2"), Link("follower", "qq@n3", "flow")]
    assert line(find(links)) == "bottleneck: follower qq@n3 (queue qq in flow, waiting on it)"


def test_the_channel_the_connection_is_blocked_on_is_named_among_several():
    links = [Link("connection", "c1", "flow", ("c1:1", "c1:2", "c1:3"), ("c1:2",)),
             Link("channel", "c1:1", flow_share=0.9), Link("channel", "c1:2"), Link("channel", "c1:3")]
    assert find(links).name == "c1:2"


def test_without_blocked_on_the_candidate_with_the_most_time_in_flow_then_the_first_by_name():
    links = [Link("connection", "c1", "flow", ("c1:2", "c1:1", "c1:3")),
             Link("channel", "c1:1"), Link("channel", "c1:2"), Link("channel", "c1:3", flow_share=0.3)]
    assert find(links).name == "c1:3"
    links[-1] = Link("channel", "c1:3")
    assert find(links).name == "c1:1"


def test_of_several_connections_the_deepest_verdict_wins():
    """c2's chain ends at the store; c1's points at a channel: the slow disk explains more."""
    links = chain(conn="flow") + [
        Link("connection", "c2", "flow", ("c2:1",), (), 0.2),
        Link("channel", "c2:1", "flow", ("q2",)),
        Link("queue", "q2", "flow", ("msg_store",), ("msg_store",))]
    assert line(find(links)) == "bottleneck: store msg_store (queue q2 in flow, waiting on it)"


def test_a_level_not_in_the_snapshot_is_reported_as_unknown():
    links = [Link("connection", "c1", "flow", ("c1:1",)), Link("channel", "c1:1", "flow", ("gone",))]
    assert line(find(links)) == "bottleneck: queue (unknown) (channel c1:1 in flow, its queue not reported)"


def test_only_actors_of_the_level_count():
    """A channel also sends to the reply-to or direct actors of another kind: they are not queues."""
    links = [Link("connection", "c1", "flow", ("c1:1",)),
             Link("channel", "c1:1", "flow", ("orders", "c1"), ("orders",)),
             Link("queue", "orders")]
    assert find(links).name == "orders"
