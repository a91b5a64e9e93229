"""Cluster membership core: the exact effects of hellos, pings, silence, joins and forgets."""
from __future__ import annotations

import json

from actors.cluster.membership import Membership, liveness_ticks
from actors.messages.cluster import Directory, Hello, JoinAnswer, JoinRequest, NodesUp, Ping, Pong
from effects import Log, SaveClusterFile, Send

A, B, C = "a@box", "b@box", "c@box"
EA, EB, EC = "tcp://127.0.0.1:25672", "tcp://127.0.0.1:25673", "tcp://127.0.0.1:25674"


def addr(node: str) -> str:
    return f"{node}:node/cluster"


def core(members=None, **kw) -> Membership:
    return Membership(A, EA, members if members is not None else {A: EA, B: EB}, address_of=addr,
                      ping_interval_ticks=2, down_after_ticks=5, **kw)


def sends(effects, kind=None) -> list[Send]:
    return [e for e in effects if isinstance(e, Send) and (kind is None or isinstance(e.msg, kind))]


def logs(effects) -> list[str]:
    return [e.event for e in effects if isinstance(e, Log)]


def test_start_says_hello_to_every_other_member():
    m = core({A: EA, B: EB, C: EC})
    out = m.start()
    assert sends(out) == [Send(addr(B), Hello(A, EA, {}, [A, B, C])), Send(addr(C), Hello(A, EA, {}, [A, B, C]))]


def test_a_subscriber_gets_the_directory_and_who_is_up_at_once():
    m = core()
    assert m.subscribe("conn0") == [Send("conn0", Directory({})), Send("conn0", NodesUp([A], [B]))]


def test_a_first_hello_marks_the_peer_up_publishes_its_hosts_and_is_answered():
    m = core()
    m.subscribe("conn0")
    out = m.receive(Hello(B, EB, {f"{B}:queue0": "tcp://127.0.0.1:40001"}, [A, B]))
    assert logs(out) == ["cluster.node_up"]
    assert sends(out) == [
        Send("conn0", NodesUp([A, B], [])),
        Send("conn0", Directory({f"{B}:queue0": "tcp://127.0.0.1:40001", f"{B}:node": EB})),
        Send(addr(B), Hello(A, EA, {}, [A, B])),
    ]
    # the same hello again changes nothing and is not answered (no hello storm)
    assert m.receive(Hello(B, EB, {f"{B}:queue0": "tcp://127.0.0.1:40001"}, [A, B])) == []


def test_a_host_that_binds_its_mailbox_is_announced_to_every_peer():
    m = core()
    out = m.host_listening(f"{A}:conn0", "tcp://127.0.0.1:41000")
    assert out == [Send(addr(B), Hello(A, EA, {f"{A}:conn0": "tcp://127.0.0.1:41000"}, [A, B]))]
    assert m.host_listening(f"{A}:conn0", "tcp://127.0.0.1:41000") == []


def test_pings_go_out_every_interval_and_silence_marks_a_peer_down():
    m = core()
    m.subscribe("conn0")
    m.receive(Hello(B, EB, {}, [A, B]))  # heard at tick 0
    assert sends(m.tick()) == []                          # tick 1
    assert sends(m.tick()) == [Send(addr(B), Ping(A, 1))]  # tick 2
    m.tick(), m.tick()                                     # ticks 3, 4
    out = m.tick()                                         # tick 5: 5 ticks silent
    assert logs(out) == ["cluster.node_down"]
    assert sends(out, NodesUp) == [Send("conn0", NodesUp([A], [B]))]
    assert m.down() == [B]


def test_a_word_from_a_down_peer_brings_it_back_and_asks_for_its_hello():
    m = core()
    m.receive(Hello(B, EB, {}, [A, B]))
    for _ in range(5):
        m.tick()
    assert m.down() == [B]
    out = m.receive(Ping(B, 9))
    assert logs(out) == ["cluster.node_up"]
    # the Hello tells B that A saw it down once (B's channels must let go of what they had here)
    assert sends(out) == [Send(addr(B), Hello(A, EA, {}, [A, B], 0, 1)), Send(addr(B), Pong(A, 9))]
    assert m.up() == [A, B]


def test_a_peer_that_saw_this_node_down_unseen_is_down_and_up_again():
    """B saw A down (A stopped just after hearing B, so A's own silence fell short): A lets go of
    what it had at B as B let go of A's, once per time B says it saw A down."""
    m = core()
    m.subscribe("conn0")
    m.receive(Hello(B, EB, {}, [A, B], 7))
    out = m.receive(Hello(B, EB, {}, [A, B], 7, 1))
    assert logs(out) == ["cluster.seen_down_by_peer", "cluster.node_up"]
    assert [s.msg for s in sends(out, NodesUp)] == [NodesUp([A], [B]), NodesUp([A, B], [])]
    assert m.receive(Hello(B, EB, {}, [A, B], 7, 1)) == []  # the same news again: nothing
    hellos = sends(m.host_listening(f"{A}:conn0", "tcp://127.0.0.1:41000"), Hello)
    assert [s.msg.downs_of_you for s in hellos] == [0]  # a bounce is not a down seen: told to nobody


def test_a_peer_that_saw_this_node_down_while_this_node_saw_it_down_too_is_not_bounced_again():
    m = core()
    m.subscribe("conn0")
    m.receive(Hello(B, EB, {}, [A, B], 7))
    for _ in range(5):
        m.tick()
    assert m.down() == [B]
    m.receive(Ping(B, 1))  # up again: the same silence, seen on both sides
    out = m.receive(Hello(B, EB, {}, [A, B], 7, 1))
    assert "cluster.seen_down_by_peer" not in logs(out) and sends(out, NodesUp) == []
    assert m.up() == [A, B]


def test_a_restarted_peer_on_a_new_port_moves_its_directory_entries():
    m = core()
    m.subscribe("conn0")
    m.receive(Hello(B, EB, {f"{B}:queue0": "tcp://127.0.0.1:40001"}, [A, B]))
    out = m.receive(Hello(B, EB, {f"{B}:queue0": "tcp://127.0.0.1:40999"}, [A, B]))
    assert sends(out) == [Send("conn0", Directory({f"{B}:queue0": "tcp://127.0.0.1:40999", f"{B}:node": EB}))]


def test_a_stranger_is_not_a_member_unless_it_lists_this_node():
    m = core()
    assert logs(m.receive(Hello(C, EC, {}, [C]))) == ["cluster.hello_from_stranger"]
    assert C not in m.members()
    out = m.receive(Hello(C, EC, {}, [A, B, C]))  # admitted elsewhere: it knows us
    assert SaveClusterFile(m.cluster_file()) in out and C in m.members()


def test_a_join_is_admitted_by_the_shell_then_announced():
    m = core()
    assert m.admission(JoinRequest(B, EB)) is None  # already a member at that endpoint
    assert m.admission(JoinRequest(C, EC)) == (C, EC)
    out = m.admitted(C, EC, "joiner")
    assert out[0] == SaveClusterFile(m.cluster_file())
    assert json.loads(out[0].data) == {"node": A, "members": {A: EA, B: EB, C: EC}}
    assert Send("joiner", JoinAnswer(True, "", {A: EA, B: EB, C: EC})) in out
    assert {s.to for s in sends(out, Hello)} == {addr(B), addr(C)}


def test_the_joiner_takes_the_members_from_the_answer():
    m = Membership(C, EC, {C: EC}, address_of=addr)
    out = m.joined(JoinAnswer(True, "", {A: EA, B: EB, C: EC}))
    assert m.members() == {A: EA, B: EB, C: EC}
    assert out[0] == SaveClusterFile(m.cluster_file())
    assert {s.to for s in sends(out, Hello)} == {addr(A), addr(B)}


def test_forgetting_drops_the_node_for_good():
    m = core()
    m.subscribe("conn0")
    m.receive(Hello(B, EB, {f"{B}:queue0": "tcp://127.0.0.1:40001"}, [A, B]))
    out = m.forget(B)
    assert out[0] == SaveClusterFile(m.cluster_file()) and m.members() == {A: EA}
    assert sends(out) == [Send("conn0", Directory({})), Send("conn0", NodesUp([A], []))]
    assert logs(m.receive(Ping(B, 1))) == ["cluster.unknown_peer"]


def test_a_peer_that_restarted_unnoticed_is_down_and_up_again_and_gets_our_hello():
    m = core()
    m.subscribe("conn0")
    m.receive(Hello(B, EB, {f"{B}:queue0": "tcp://127.0.0.1:40001"}, [A, B], 1))
    assert m.receive(Hello(B, EB, {f"{B}:queue0": "tcp://127.0.0.1:40001"}, [A, B], 1)) == []
    out = m.receive(Hello(B, EB, {}, [A, B], 2))  # a new incarnation, before any silence was seen
    assert logs(out) == ["cluster.node_restarted", "cluster.node_up"]
    ups = [s.msg for s in sends(out, NodesUp)]
    assert ups == [NodesUp([A], [B]), NodesUp([A, B], [])]  # every host hears it went away
    assert sends(out, Hello) == [Send(addr(B), Hello(A, EA, {}, [A, B]))]  # it learns our hosts again


def test_liveness_from_a_down_after_in_ms_keeps_the_default_and_pings_at_least_five_times():
    assert liveness_ticks(5000, 100) == {"down_after_ticks": 50, "ping_interval_ticks": 10}  # the default
    assert liveness_ticks(2500, 100) == {"down_after_ticks": 25, "ping_interval_ticks": 5}
    assert liveness_ticks(60000, 100) == {"down_after_ticks": 600, "ping_interval_ticks": 10}  # a ping a second
    assert liveness_ticks(150, 100) == {"down_after_ticks": 2, "ping_interval_ticks": 1}


def test_a_peer_silent_for_the_configured_time_is_down():
    m = Membership(A, EA, {A: EA, B: EB}, address_of=addr, **liveness_ticks(2500, 100))
    m.start()
    m.receive(Hello(B, EB, {}, [A, B]))
    down = [t for t in range(1, 40) if "cluster.node_down" in logs(m.tick())]
    assert down == [25]
