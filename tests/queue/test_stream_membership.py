"""A replicated stream's membership changes (actors/stream/replication.py's `set_members`) over
member cores with real logs (tests/queue/stream_net.py): a new member catches up through the
leader's catch-up path and counts towards the majority; a removed leader steps down and the
others elect one; a removed member is not listened to; a smaller majority commits. One member
is added or removed per change (Raft's single-server change, Ongaro's thesis section 4.1).
"""
from __future__ import annotations

from actors.messages.channel_queue import Rejected
from actors.messages.node import Dispose
from actors.messages.stream import StreamAppend, StreamVote
from actors.stream.replication import LEADER, REPLICA
from tests.queue.stream_net import Net


def published(net: Net, member: str, channel: str, seqs: range) -> None:
    for seq in seqs:
        net.publish(member, channel, seq, b"m%d" % seq)


def test_a_new_member_catches_up_from_the_leader_and_counts_towards_the_majority(tmp_path):
    net = Net(tmp_path, ("n1", "n2"))
    net.settle()
    published(net, "n1", "chA", range(1, 6))
    net.settle()
    assert net.confirmed["chA"] == 5
    net.set_members(("n1", "n2", "n3"))
    assert net.cores["n3"].rep.epoch == 0 and net.cores["n3"].log.next_offset == 0
    net.settle()
    assert net.cores["n3"].rep.leader == "n1" and net.bodies("n3") == [b"m%d" % s for s in range(1, 6)]
    net.node_down("n2")  # n1 and n3 are a majority of three: the new member's ack is what commits
    published(net, "n1", "chA", range(6, 8))
    net.settle()
    assert net.confirmed["chA"] == 7
    net.consume("n3", "chC")
    assert [b for _, b in net.delivered["chC"]] == [b"m%d" % s for s in range(1, 8)]


def test_the_new_majority_is_counted_at_once(tmp_path):
    """Three members, two of them down: the fourth makes the majority three, so n1 and the new
    member alone commit nothing (they would have with the old list's two of three, had n2 been up)."""
    net = Net(tmp_path)
    net.settle()
    net.node_down("n3")
    net.set_members(("n1", "n2", "n3", "n4"))
    net.settle()
    net.node_down("n2")
    published(net, "n1", "chA", range(1, 3))
    net.settle()
    assert net.confirmed["chA"] == 0 and net.bodies("n4") == [b"m1", b"m2"]
    net.node_up("n2")
    net.settle()
    assert net.confirmed["chA"] == 2


def test_a_removed_leader_steps_down_and_the_others_elect_one_losing_nothing_confirmed(tmp_path):
    net = Net(tmp_path)
    net.settle()
    published(net, "n2", "chB", range(1, 4))  # through a replica: handed on to n1
    net.settle()
    assert net.confirmed["chB"] == 3
    net.set_members(("n2", "n3"))
    assert net.cores["n1"].rep.role == REPLICA and net.cores["n1"].rep.leader is None
    assert "election" in net.timers["n2"] and "election" not in net.timers["n1"]
    net.dispose("n1")
    assert not (tmp_path / "n1").exists()  # its log went with it
    net.fire("n2")
    net.settle()
    assert net.leader() == "n2" and net.cores["n3"].rep.leader == "n2" and net.cores["n2"].rep.epoch == 2
    published(net, "n3", "chC", range(1, 3))
    net.settle()
    assert net.confirmed["chC"] == 2
    assert net.bodies("n2") == net.bodies("n3") == [b"m1", b"m2", b"m3", b"m1", b"m2"]


def test_a_removed_member_is_not_listened_to(tmp_path):
    net = Net(tmp_path)
    net.settle()
    net.set_members(("n1", "n2"))
    core = net.cores["n3"]
    assert core.rep.role == REPLICA and core.rep.leader is None
    net.fire("n3")  # a timer armed before it heard: it does not stand
    assert not net.wires[("n3", "n1")] and not net.wires[("n3", "n2")]
    n1 = net.cores["n1"].rep
    assert n1.vote(StreamVote(9, "n3", 1, 99)) == []  # a late vote request from it moves no epoch on
    assert n1.epoch == 1 and n1.role == LEADER
    assert core.rep.append(StreamAppend(1, "n1", 0, [], 0)) == []  # and it follows nobody


def test_a_removed_replica_with_the_majority_smaller_commits_without_it(tmp_path):
    net = Net(tmp_path)
    net.settle()
    net.node_down("n3")
    net.node_down("n2")
    published(net, "n1", "chA", range(1, 3))
    net.settle()
    assert net.confirmed["chA"] == 0  # one of three
    net.node_up("n2")
    net.wires[("n1", "n2")].clear()  # n2 is back but has heard nothing yet
    net.set_members(("n1",))
    assert net.cores["n1"].rep.leads and net.confirmed["chA"] == 2  # alone, its own disk is the majority


def test_a_removed_member_refuses_what_it_held_for_its_channels(tmp_path):
    net = Net(tmp_path)
    net.settle()
    net.node_down("n1")  # no leader: a publish through n3 is held there
    net.publish("n3", "chC", 1, b"x")
    net.set_members(("n1", "n2"))
    effects = net.cores["n3"].handle("node", Dispose(5, False, False))
    assert [e.msg for e in effects if getattr(e, "to", None) == "chC"] == [Rejected([1])]


def test_a_new_member_starts_where_the_leaders_retention_left_the_log(tmp_path):
    net = Net(tmp_path, ("n1", "n2"))
    net.settle()
    for m in ("n1", "n2"):
        net.cores[m].log.segment_bytes = 4096
    body = b"r" * 1000
    for seq in range(1, 21):
        net.publish("n1", "chA", seq, body)
        net.settle()
    leader_log = net.cores["n1"].log
    leader_log.retain(8192, None, 1000)
    assert leader_log.first_offset > 0
    net.set_members(("n1", "n2", "n3"))
    net.settle()
    n3 = net.cores["n3"].log
    assert (n3.first_offset, n3.next_offset) == (leader_log.first_offset, 20)
    assert net.bodies("n3") == [body] * (20 - leader_log.first_offset)
    net.node_down("n2")  # and it acks: with n1 it commits
    net.publish("n1", "chA", 21, b"after")
    net.settle()
    assert net.confirmed["chA"] == 21
