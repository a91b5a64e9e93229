"""A cluster of three real nodes under faults (issue 11 §4): kill -9 of a node, of the metadata
leader, of a majority; a paused node; a partition; a node forgotten for good. A short metadata
time-out makes a change without a majority fail quickly, and a node counts as down after 2.5 s of
silence rather than 5 (cluster.node_down_after), which is what most of these tests wait for.

The tests share one cluster (a 3-node start costs seconds): each begins with it whole (every node
running, resumed, unpartitioned and seen up by the others: `cluster` mends what the test before
did to it) and names its queues after itself. Forgetting a node is for good, so that test has a
cluster of its own; so has the one whose node must restart before the others notice its silence
(a minute of it: a restart takes seconds on a loaded machine)."""
from __future__ import annotations

from pathlib import Path

import pika
import pika.exceptions
import pytest

from tests.integration.cluster import Cluster, sees_queue
from tests.integration.nodes import wait_serving
from tests.integration.stream_clients import STREAM, read_first
from tests.waiting import until

pytestmark = pytest.mark.integration

TIMEOUT_MS = 3000
DOWN_AFTER_MS = 2500


def start_cluster(root: Path, down_after_ms: int = DOWN_AFTER_MS) -> Cluster:
    root.mkdir(parents=True, exist_ok=True)
    conf = root / "warren.conf"
    conf.write_text(f"metadata.timeout = {TIMEOUT_MS}\ncluster.node_down_after = {down_after_ms}\n")
    return Cluster(root / "cluster", 3, "--config", str(conf)).start()


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("faults"))
    yield c
    c.stop()


@pytest.fixture
def cluster(shared: Cluster) -> Cluster:
    """The module's cluster, whole again after whatever the test before did to it."""
    mend(shared)
    return shared


@pytest.fixture
def own_cluster(tmp_path):
    """`own_cluster(down_after_ms)`: a cluster of the test's own, stopped after it."""
    made: list[Cluster] = []

    def make(down_after_ms: int = DOWN_AFTER_MS) -> Cluster:
        made.append(start_cluster(tmp_path / f"c{len(made)}", down_after_ms))
        return made[-1]
    yield make
    for c in made:
        c.stop()


def mend(cluster: Cluster) -> None:
    """Resume paused nodes, start killed or stopped ones, heal partitions, and wait until every
    node sees all three up."""
    for name in cluster.names:
        cluster.resume(name)
    dead = [name for name in cluster.names if cluster.nodes[name].proc.poll() is not None]
    for name in dead:
        cluster.restart(name, wait=False)
    for name in dead:
        wait_serving(cluster.nodes[name])
    cluster.heal()
    until(lambda: all(len(running(cluster, n)) == len(cluster.names) for n in cluster.names),
          "every node seeing the others up", timeout_s=60)


def connect(cluster: Cluster, name: str):
    conn = pika.BlockingConnection(pika.URLParameters(cluster.url(name)))
    return conn, conn.channel()


def leader(cluster: Cluster, among: list[str]) -> str:
    """The metadata leader (short name) as the nodes `among` agree on it."""
    def agreed() -> str | None:
        seen = {cluster.cluster_status(n)["metadata_leader"] for n in among}
        node = seen.pop() if len(seen) == 1 else None
        return node.split("@")[0] if node and node.split("@")[0] in among else None
    return until(agreed, f"a metadata leader agreed on by {among}", timeout_s=30)


def running(cluster: Cluster, name: str) -> list[str]:
    return cluster.cluster_status(name)["running"]


def declare_fails_on_timeout(cluster: Cluster, name: str, queue: str) -> pika.exceptions.ConnectionClosedByBroker:
    conn, ch = connect(cluster, name)
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as e:
        ch.queue_declare(queue, durable=True)
    return e.value


def test_a_killed_node_s_queues_are_out_of_reach_until_it_is_back_and_it_catches_up(cluster: Cluster) -> None:
    c3, ch3 = connect(cluster, "n3")
    ch3.queue_declare("home-n3", durable=True)
    ch3.confirm_delivery()
    for i in range(20):
        ch3.basic_publish("", "home-n3", b"%d" % i, pika.BasicProperties(delivery_mode=2))
    c3.close()
    cluster.kill("n3")
    n3 = cluster.node_name("n3")
    until(lambda: n3 not in running(cluster, "n1"), "n1 seeing n3 down")
    c1, ch1 = connect(cluster, "n1")
    ch1.queue_declare("while-n3-was-down", durable=True)  # two of three: metadata still changes
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        ch1.basic_get("home-n3")
    assert (e.value.reply_code, e.value.reply_text) == (
        404, f"NOT_FOUND - home node '{n3}' of durable queue 'home-n3' in vhost '/' is down or inaccessible")
    ch1 = c1.channel()
    ch1.confirm_delivery()
    with pytest.raises(pika.exceptions.NackError):  # what cannot reach its queue is nacked, not held
        ch1.basic_publish("", "home-n3", b"lost", pika.BasicProperties(delivery_mode=2))
    c1.close()
    cluster.restart("n3")
    c3, ch3 = connect(cluster, "n3")
    ch3.queue_declare("while-n3-was-down", passive=True)  # the metadata it missed
    until(lambda: n3 in running(cluster, "n1"), "n1 seeing n3 back")
    c1, ch1 = connect(cluster, "n1")
    got = [ch1.basic_get("home-n3", auto_ack=True)[2] for _ in range(20)]
    assert got == [b"%d" % i for i in range(20)]  # confirmed before the kill, kept on n3's disk
    c1.close(), c3.close()


def test_killing_the_metadata_leader_elects_another_and_changes_go_on(cluster: Cluster) -> None:
    old = leader(cluster, cluster.names)
    cluster.kill(old)
    rest = [n for n in cluster.names if n != old]
    new = leader(cluster, rest)
    assert new != old
    conn, ch = connect(cluster, rest[0])
    ch.exchange_declare("after-failover", "fanout")
    ch.queue_declare("after-failover-q")
    ch.queue_bind("after-failover-q", "after-failover")
    conn.close()
    cluster.restart(old)
    # the queue's home is another node, which the restarted node must have heard from to answer for it
    until(lambda: len(running(cluster, old)) == len(cluster.names), f"{old} seeing the others up")
    conn, ch = connect(cluster, old)
    ch.queue_declare("after-failover-q", passive=True)
    conn.close()


def test_without_a_majority_a_change_times_out_and_publishing_goes_on(cluster: Cluster) -> None:
    c1, ch1 = connect(cluster, "n1")
    ch1.queue_declare("local-n1", durable=True)
    c1.close()
    cluster.kill("n2")
    cluster.kill("n3")
    closed = declare_fails_on_timeout(cluster, "n1", "needs-a-majority")
    assert closed.reply_code == 541
    assert closed.reply_text == (f"INTERNAL_ERROR - Could not declare queue 'needs-a-majority' in vhost '/' on node "
                                 f"'{cluster.node_name('n1')}' because the metadata store operation timed out")
    c1, ch1 = connect(cluster, "n1")  # the node still serves what exists
    ch1.confirm_delivery()
    ch1.basic_publish("", "local-n1", b"still here", pika.BasicProperties(delivery_mode=2))
    assert ch1.basic_get("local-n1", auto_ack=True)[2] == b"still here"
    c1.close()
    cluster.restart("n2", wait=False)
    cluster.restart("n3")
    wait_serving(cluster.nodes["n2"])
    c1, ch1 = connect(cluster, "n1")
    ch1.queue_declare("after-the-majority-is-back", durable=True)
    # the timed-out declare is either done whole (record and queue) or not at all
    try:
        ch1.queue_declare("needs-a-majority", passive=True)
        ch1.basic_publish("", "needs-a-majority", b"x")
        assert ch1.basic_get("needs-a-majority", auto_ack=True)[2] == b"x"
    except pika.exceptions.ChannelClosedByBroker as e:
        assert e.reply_code == 404
    c1.close()


def test_a_paused_node_comes_back_without_help(cluster: Cluster) -> None:
    cluster.pause("n2")
    n2 = cluster.node_name("n2")
    until(lambda: n2 not in running(cluster, "n1"), "n1 seeing n2 down", timeout_s=30)
    conn, ch = connect(cluster, "n1")
    ch.queue_declare("declared-while-n2-slept", durable=True)
    conn.close()
    cluster.resume("n2")
    until(lambda: n2 in running(cluster, "n1") and running(cluster, "n2") == running(cluster, "n1"),
          "n2 back in the cluster", timeout_s=30)
    conn, ch = connect(cluster, "n2")
    until(lambda: ch.queue_declare("declared-while-n2-slept", passive=True), "n2 applying what it missed")
    ch.queue_declare("declared-on-n2-after", durable=True)
    conn.close()


def test_a_partition_leaves_the_majority_changing_and_the_minority_refusing(cluster: Cluster) -> None:
    cluster.partition(["n1", "n2"], ["n3"])
    n3 = cluster.node_name("n3")
    until(lambda: n3 not in running(cluster, "n1"), "n1 seeing n3 gone")
    conn, ch = connect(cluster, "n1")
    ch.queue_declare("majority-side", durable=True)
    conn.close()
    closed = declare_fails_on_timeout(cluster, "n3", "minority-side")
    assert closed.reply_code == 541
    cluster.heal()
    until(lambda: len(running(cluster, "n3")) == 3 and len(running(cluster, "n1")) == 3, "the partition healed")
    conn, ch = connect(cluster, "n3")
    until(lambda: ch.queue_declare("majority-side", passive=True), "n3 applying the majority's change")
    conn.close()
    names = {n: sorted(q["name"] for q in cluster.control(n, "node", "queue_policies", {})) for n in cluster.names}
    assert names["n1"] == names["n2"] == names["n3"]


def quorum_members(cluster: Cluster, name: str, queue: str) -> list[str]:
    rows = cluster.control(name, "node", "queue_policies", {})
    return next(sorted(r["members"]) for r in rows if r["name"] == queue)


def stream_members(cluster: Cluster, name: str, stream: str) -> list[str]:
    rows = cluster.control(name, "node", "stream_status", {"vhost": "/", "name": stream})["rows"]
    return sorted(r["node"] for r in rows)


def publish_confirmed(cluster: Cluster, name: str, queue: str, body: bytes) -> bool:
    conn, ch = connect(cluster, name)
    ch.confirm_delivery()
    try:
        ch.basic_publish("", queue, body)
        return True
    except pika.exceptions.AMQPError:  # no leader among the members left yet
        return False
    finally:
        if conn.is_open:
            conn.close()


def test_a_forgotten_node_leaves_the_cluster_with_its_queues(own_cluster) -> None:
    """Its classic queues go; its member of every quorum queue goes (rabbit_quorum_queue:shrink_all,
    which rabbitmqctl forget_cluster_node runs), so the queues' majorities count without it; so does
    its member of every stream (3.13's rabbit_stream_queue:delete_all_replicas), the stream declared
    on it kept; a queue or stream whose last member it was cannot shrink and the command says so,
    the node forgotten all the same."""
    cluster = own_cluster()  # n3 is gone for good afterwards
    conn, ch = connect(cluster, "n3")
    ch.queue_declare("home-n3", durable=True)
    ch.queue_declare("qq-n3", durable=True, arguments={"x-queue-type": "quorum"})  # led from n3
    ch.queue_declare("qq-only-n3", durable=True, arguments={"x-queue-type": "quorum",
                                                           "x-quorum-initial-group-size": 1})
    ch.queue_declare("st-n3", durable=True, arguments=STREAM)  # led from n3, on every node
    ch.queue_declare("st-only-n3", durable=True, arguments={**STREAM, "x-initial-cluster-size": 1})
    ch.confirm_delivery()
    for i in range(5):
        ch.basic_publish("", "qq-n3", b"%d" % i, pika.BasicProperties(delivery_mode=2))
        ch.basic_publish("", "st-n3", b"%d" % i)
    conn.close()
    refused = cluster.control("n1", "node", "forget_cluster_node", {"node": cluster.node_name("n3")})
    assert "must be stopped" in refused["error"]
    cluster.nodes["n3"].stop()
    n1, n2, n3 = (cluster.node_name(n) for n in ("n1", "n2", "n3"))
    until(lambda: n3 not in running(cluster, "n1"), "n1 seeing n3 stopped")
    assert cluster.control("n1", "node", "forget_cluster_node", {"node": n3}) == {
        "error": f"Failed to shrink some entities on node {n3} : Streams, Quorum queues", "exit": 69}
    for name in ("n1", "n2"):
        until(lambda name=name: n3 not in cluster.cluster_status(name)["members"], f"{name} forgetting n3")
        assert n3 not in cluster.cluster_status(name)["metadata_voters"]
        assert quorum_members(cluster, name, "qq-n3") == [n1, n2]
        assert quorum_members(cluster, name, "qq-only-n3") == [n3]  # its last member: RabbitMQ keeps it too
        assert stream_members(cluster, name, "st-n3") == [n1, n2]
        assert stream_members(cluster, name, "st-only-n3") == [n3]
    conn, ch = connect(cluster, "n2")
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        ch.queue_declare("home-n3", passive=True)
    assert e.value.reply_code == 404
    ch = conn.channel()
    ch.confirm_delivery()
    ch.basic_publish("", "qq-n3", b"after", pika.BasicProperties(delivery_mode=2))  # confirmed by n1 and n2
    got = [ch.basic_get("qq-n3", auto_ack=True)[2] for _ in range(6)]
    assert got == [b"0", b"1", b"2", b"3", b"4", b"after"]
    conn.close()
    until(lambda: publish_confirmed(cluster, "n2", "st-n3", b"after"), "n1 or n2 leading st-n3")
    assert read_first(cluster.url("n1"), "st-n3", 6)[:5] == [(i, b"%d" % i) for i in range(5)]
    # the group is n1 and n2 now: quorum_status shows them only
    status = cluster.control("n1", "node", "quorum_status", {"vhost": "/", "name": "qq-n3"})
    assert sorted(r["Node Name"] for r in status["rows"]) == [n1, n2]


def test_a_queue_requeues_what_a_consumer_on_a_killed_node_held(cluster: Cluster) -> None:
    """A channel on a node that dies never sends its ChannelDown: the queue must see the node go and
    requeue the channel's unacknowledged deliveries, as RabbitMQ's queue does on the DOWN of a
    channel on a lost node (found by the fault suite: they stayed unacknowledged for ever)."""
    c3, ch3 = connect(cluster, "n3")
    ch3.queue_declare("held-on-n3", durable=True)
    ch3.confirm_delivery()
    c1, ch1 = connect(cluster, "n1")
    ch1.basic_qos(prefetch_count=10)
    held = []
    ch1.basic_consume("held-on-n3", lambda ch, method, props, body: held.append(body))
    for i in range(5):
        ch3.basic_publish("", "held-on-n3", b"%d" % i, pika.BasicProperties(delivery_mode=2))
    until(lambda: c1.process_data_events(0.05) or len(held) == 5, "n1's consumer holding all five")
    cluster.kill("n1")
    until(lambda: cluster.node_name("n1") not in running(cluster, "n3"), "n3 seeing n1 down")
    until(lambda: ch3.queue_declare("held-on-n3", passive=True).method.message_count == 5, "the five requeued")
    got = [ch3.basic_get("held-on-n3", auto_ack=True) for _ in range(5)]
    assert [(m.redelivered, body) for m, _, body in got] == [(True, b"%d" % i) for i in range(5)]
    c3.close()


def test_a_node_restarted_faster_than_its_silence_is_noticed_reaches_every_node_again(own_cluster) -> None:
    cluster = own_cluster(down_after_ms=60_000)
    conn, ch = connect(cluster, "n2")
    ch.queue_declare("home-n2", durable=True)
    conn.close()
    cluster.kill("n1")
    cluster.restart("n1")  # within the minute the others take to see a silent node down
    conn, ch = connect(cluster, "n1")
    ch.queue_declare("home-n1", durable=True)
    ch.confirm_delivery()
    ch.basic_publish("", "home-n2", b"from the restarted node", pika.BasicProperties(delivery_mode=2))
    assert until(lambda: ch.basic_get("home-n2", auto_ack=True)[2], "a queue on n2 used from n1") == \
        b"from the restarted node"
    conn.close()
    conn, ch = connect(cluster, "n2")
    ch.confirm_delivery()
    until(lambda: ch.queue_declare("home-n1", passive=True), "n2 seeing the queue declared on n1")
    ch.basic_publish("", "home-n1", b"to the restarted node", pika.BasicProperties(delivery_mode=2))
    assert until(lambda: ch.basic_get("home-n1", auto_ack=True)[2], "a queue on n1 used from n2") == \
        b"to the restarted node"
    conn.close()


def test_a_consumer_on_a_paused_node_is_cancelled_when_its_node_wakes(cluster: Cluster) -> None:
    """The queue's node saw the paused node down and dropped its consumer (and requeued what it
    held); on waking, the paused node sees the others down too, as RabbitMQ's nodedown, so the
    client is told (basic.cancel) and may consume again, rather than wait on a consumer its queue
    forgot (found by the fault suite)."""
    c3, ch3 = connect(cluster, "n3")
    ch3.queue_declare("watched-on-n3", durable=True)
    ch3.confirm_delivery()
    c1, ch1 = connect(cluster, "n1")
    until(lambda: sees_queue(c1, "watched-on-n3"), "n1 seeing the queue declared on n3")
    held, cancelled = [], []
    ch1.add_on_cancel_callback(lambda method: cancelled.append(method.method.consumer_tag))
    tag = ch1.basic_consume("watched-on-n3", lambda ch, method, props, body: held.append(body))
    ch3.basic_publish("", "watched-on-n3", b"before", pika.BasicProperties(delivery_mode=2))
    until(lambda: c1.process_data_events(0.05) or held == [b"before"], "n1's consumer holding one")
    cluster.pause("n1")
    until(lambda: cluster.node_name("n1") not in running(cluster, "n3"), "n3 seeing n1 down")
    until(lambda: ch3.queue_declare("watched-on-n3", passive=True).method.message_count == 1, "the one requeued")
    cluster.resume("n1")
    until(lambda: c1.process_data_events(0.05) or cancelled == [tag], "basic.cancel for the forgotten consumer")
    c3.close()
