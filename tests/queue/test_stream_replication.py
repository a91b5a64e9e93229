"""Stream replication (actors/stream/replication.py) over member cores with real logs
(tests/queue/stream_net.py): commit by a majority's fdatasync, replicas reading committed chunks
only, publishes handed on to the leader, catch-up, elections by epoch and the cut of a diverged
tail; then seeds of random schedules with crashes, checked for Raft's safety properties.
"""
from __future__ import annotations

import os
import random

import pytest

from actors.messages.stream import StreamAck, StreamAppend, StreamHello
from actors.stream.replication import CATCH_UP_BYTES_MAX, IN_FLIGHT_BYTES_MAX, LEADER, REPLICA, divergence
from persist.stream import epochs
from tests.queue.stream_net import Net

DIVERGENCE_CASES = [
    # (a history, a end, b history, b end) -> first offset where they may differ
    (([], 0, [], 0), 0),
    (([(1, 0)], 10, [(1, 0)], 6), 6),  # the same epoch: the shorter end
    (([(1, 0), (2, 5)], 10, [(1, 0)], 8), 5),  # b kept epoch 1 past where a's epoch 2 began
    (([(1, 0), (3, 5)], 9, [(1, 0), (2, 5)], 7), 5),  # both went on from 5, in different epochs
    (([(1, 0), (2, 5), (3, 8), (4, 8)], 9, [(1, 0), (2, 5)], 9), 8),  # epoch 3 wrote nothing: epoch 4 differs
    (([(1, 0)], 4, [], 4), 0),  # b is a log from before replication (epoch 0)
]


@pytest.mark.parametrize("case, expected", DIVERGENCE_CASES)
def test_divergence(case, expected):
    assert divergence(*case) == expected
    a_history, a_end, b_history, b_end = case
    assert divergence(b_history, b_end, a_history, a_end) == expected  # symmetric


def test_the_declared_leader_takes_epoch_1_and_announces_itself(tmp_path):
    net = Net(tmp_path)
    assert net.cores["n1"].rep.role == LEADER and net.cores["n1"].rep.epoch == 1
    assert list(net.wires[("n1", "n2")]) == [StreamAppend(1, "n1", 0, [], 0)]
    assert epochs.load(tmp_path / "n1").history == [(1, 0)]
    net.settle()
    assert [net.cores[m].rep.role for m in ("n2", "n3")] == [REPLICA, REPLICA]
    assert [net.cores[m].rep.leader for m in ("n2", "n3")] == ["n1", "n1"]


def test_a_publish_is_confirmed_once_a_majority_has_it_on_disk(tmp_path):
    """The leader's own fdatasync is not enough; with one replica's ack it is (2 of 3)."""
    net = Net(tmp_path)
    net.settle()
    net.publish("n1", "chA", 1, b"a")
    net.sync("n1")
    assert net.confirmed["chA"] == 0
    assert net.deliver("n1", "n2")  # the chunk
    assert net.cores["n2"].unsynced
    assert net.wires[("n2", "n1")] == type(net.wires[("n2", "n1")])()  # no ack before its sync
    net.sync("n2")
    assert list(net.wires[("n2", "n1")]) == [StreamAck(1, "n2", 1)]
    net.deliver("n2", "n1")
    assert net.confirmed["chA"] == 1 and net.cores["n1"].rep.commit == 1


def test_a_chunk_that_reaches_a_replica_during_its_sync_is_synced_and_acked_after_it(tmp_path):
    """The sync in flight does not cover it: the replica syncs again and acks it, unprompted (the
    leader may push nothing more: a publisher that stopped, a replica out of step)."""
    net = Net(tmp_path)
    net.settle()
    net.publish("n1", "chA", 1, b"a")
    net.deliver("n1", "n2")
    net.begin_sync("n2")
    net.publish("n1", "chA", 2, b"b")
    net.deliver("n1", "n2")
    net.end_sync("n2")
    assert list(net.wires[("n2", "n1")]) == [StreamAck(1, "n2", 1)]
    assert net.cores["n2"].unsynced  # it owes a sync, and an ack after it
    net.sync("n2")
    assert list(net.wires[("n2", "n1")]) == [StreamAck(1, "n2", 1), StreamAck(1, "n2", 2)]
    net.sync("n1")
    net.deliver("n2", "n1")
    net.deliver("n2", "n1")
    assert net.confirmed["chA"] == 2


def test_a_replica_reads_only_what_is_committed(tmp_path):
    net = Net(tmp_path)
    net.settle()
    net.consume("n3", "chC")
    net.publish("n1", "chA", 1, b"a")
    net.sync("n1")
    net.deliver("n1", "n3")
    net.sync("n3")  # on n3's disk, acked, but n1 has not heard: not committed
    assert net.delivered["chC"] == []
    net.settle()
    assert net.delivered["chC"] == [(0, b"a")]


def test_a_publish_on_a_replica_goes_to_the_leader_and_is_confirmed_through_the_replica(tmp_path):
    net = Net(tmp_path)
    net.settle()
    net.publish("n2", "chB", 7, b"b")
    assert net.cores["n2"].log.next_offset == 0  # the replica does not append it
    net.settle()
    assert net.confirmed["chB"] == 7
    assert [net.bodies(m) for m in net.members] == [[b"b"]] * 3


def test_a_replica_that_was_away_catches_up_a_batch_at_a_time(tmp_path):
    net = Net(tmp_path)
    net.settle()
    net.node_down("n3")
    body = b"x" * 100_000
    for seq in range(1, 31):  # 30 chunks of 100 kB: three catch-up batches
        net.publish("n1", "chA", seq, body)
    net.settle()
    assert net.confirmed["chA"] == 30  # n1 and n2 are a majority
    net.node_up("n3")
    sent = []
    for _ in range(100):
        wire = net.wires[("n1", "n3")]
        sent += [sum(len(c) for c in m.chunks) for m in wire if type(m) is StreamAppend]
        if not net.round():
            break
    assert net.bodies("n3") == [body] * 30
    assert max(sent) <= CATCH_UP_BYTES_MAX and len([s for s in sent if s]) >= 3


def test_a_replica_that_does_not_ack_is_pushed_at_most_the_in_flight_limit(tmp_path):
    net = Net(tmp_path)
    net.settle()
    body = b"y" * 200_000
    for seq in range(1, 61):  # 12 MB, while n3 hears nothing
        net.publish("n1", "chA", seq, body)
        net.sync("n1")
        while net.deliver("n1", "n2"):
            pass
        net.sync("n2")
        net.deliver("n2", "n1")
    assert net.confirmed["chA"] == 60
    pushed = sum(len(c) for m in net.wires[("n1", "n3")] if type(m) is StreamAppend for c in m.chunks)
    assert 0 < pushed <= IN_FLIGHT_BYTES_MAX
    net.settle()
    assert net.bodies("n3") == [body] * 60


def test_the_leaders_node_lost_the_next_member_takes_over_and_nothing_confirmed_is_lost(tmp_path):
    net = Net(tmp_path)
    net.settle()
    for seq in (1, 2):
        net.publish("n1", "chA", seq, b"c%d" % seq)
    net.settle()
    net.publish("n1", "chA", 3, b"u")  # on n1 only: never confirmed
    net.sync("n1")
    net.wires[("n1", "n2")].clear()
    net.wires[("n1", "n3")].clear()
    net.node_down("n1")
    assert "election" in net.timers["n2"] and "election" in net.timers["n3"]
    net.fire("n2")  # the first live member in `members` stands
    net.settle()
    assert net.leader() == "n2" and net.cores["n2"].rep.epoch == 2
    assert epochs.load(tmp_path / "n2").history == [(1, 0), (2, 2)]
    net.consume("n3", "chC")
    assert net.delivered["chC"] == [(0, b"c1"), (1, b"c2")]
    net.publish("n3", "chB", 1, b"d")
    net.settle()
    assert net.confirmed["chB"] == 1
    net.node_up("n1")  # n1's "u" at offset 2 was never committed: cut, and n2's "d" is there instead
    net.settle()
    assert net.cores["n1"].rep.leader == "n2"
    assert [net.bodies(m) for m in net.members] == [[b"c1", b"c2", b"d"]] * 3


def test_a_voter_refuses_a_candidate_whose_log_is_behind(tmp_path):
    net = Net(tmp_path)
    net.settle()
    net.publish("n1", "chA", 1, b"a")
    net.sync("n1")
    net.deliver("n1", "n2")
    net.sync("n2")  # n2 has offset 0, n3 does not
    net.node_down("n1")
    net.fire("n3")  # n3 stands first: n2 refuses it (Raft 5.4.1)
    net.settle()
    assert net.leader() is None
    net.fire("n2")
    net.settle()
    assert net.leader() == "n2"
    assert net.bodies("n3") == [b"a"]


def test_a_restarted_leader_is_replaced_and_follows(tmp_path):
    """A member that hears its leader's StreamHello knows the leader restarted (it leads no more)."""
    net = Net(tmp_path)
    net.settle()
    net.publish("n1", "chA", 1, b"a")
    net.settle()
    net.crash("n1")
    net.start("n1")
    assert list(net.wires[("n1", "n2")]) == [StreamHello(1, "n1", 1, [(1, 0)])]
    net.settle()
    assert net.cores["n2"].rep.leader is None and "election" in net.timers["n2"]
    net.fire("n1")  # it stands first again (the first member), with the longest log
    net.settle()
    assert net.leader() == "n1" and net.cores["n1"].rep.epoch == 2
    net.publish("n1", "chA", 2, b"b")
    net.settle()
    assert net.confirmed["chA"] == 2


@pytest.mark.parametrize("seed", range(20))
def test_seeds_of_deliveries_and_syncs_leave_nothing_owed(tmp_path, monkeypatch, seed):
    """Publishes through the leader under random deliveries and syncs (chunks reaching replicas
    while their syncs run), no crashes: once settled every member's log is on its disk and
    committed to its end, and every publish is confirmed (liveness, which test_seeds' safety
    checks do not cover; before the fix 15 of these 20 left chunks unsynced or unconfirmed)."""
    monkeypatch.setattr(os, "fdatasync", lambda fd: None)
    rng = random.Random(seed)
    net = Net(tmp_path)
    net.settle()
    for seq in range(1, 101):
        if rng.random() < 0.3:
            net.publish("n1", "chA", seq, b"m%d" % seq)
            last = seq
        net.step(rng)
    net.settle()
    assert all(c.log.committed == c.log.next_offset for c in net.cores.values())
    assert net.cores["n1"].rep.commit == net.cores["n1"].log.next_offset and net.confirmed["chA"] == last


# seeds that failed once: 32 (a replica owed an ack to a leader it no longer had, and synced for
# ever), 544 (a power cut lost chunks whose epoch the history still named: it is cut at start now)
REGRESSIONS = [32, 144, 544, 620, 628, 855]


@pytest.mark.parametrize("seed", [*range(30), *REGRESSIONS])
def test_seeds(tmp_path, monkeypatch, seed):
    """Random schedules of deliveries, syncs, timers, publishes through any member and node
    crashes: at most one leader per epoch, every confirmed message in every later leader's log,
    and once the network heals every member holds the same log, with everything confirmed in it.
    Half the crashes lose what the member had not synced (a power cut); the disk's own syncs are
    skipped, since the schedule's `sync` steps are what the members count as durable. Replay: pytest -k 'test_seeds[SEED]'."""
    monkeypatch.setattr(os, "fdatasync", lambda fd: None)
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    elections, confirms = run_seed(tmp_path, seed)
    assert elections >= 1 and confirms > 0


def run_seed(tmp_path, seed: int) -> tuple[int, int]:
    """One seed's run: (how many epochs had a leader, the sum of the confirms' seqs)."""
    rng = random.Random(seed)
    net = Net(tmp_path)
    leaders: dict[int, str] = {}
    sent: dict[int, bytes] = {}  # seq -> body (seqs are global here: increasing on every channel)
    origin: dict[int, str] = {}
    seq = 0
    for step in range(400):
        roll = rng.random()
        live = sorted(net.cores)
        if roll < 0.15:
            seq += 1
            sent[seq] = b"m%d" % seq
            member = rng.choice(live)  # a channel per member incarnation, publishing through it alone
            origin[seq] = f"ch-{member}-{net.starts[member]}"
            net.publish(member, origin[seq], seq, sent[seq])
        elif roll < 0.17 and len(live) == 3:
            net.node_down(rng.choice(live), power=rng.random() < 0.5)
        elif roll < 0.20 and net.down:
            net.node_up(sorted(net.down)[0])
        else:
            net.step(rng)
        for m, core in net.cores.items():
            if core.rep.leads:
                assert leaders.setdefault(core.rep.epoch, m) == m, f"two leaders of epoch {core.rep.epoch}"
                if step % 20 == 0:
                    _check_confirmed_in(net, m, sent, origin)
    for m in sorted(net.down):
        net.node_up(m)
    for i in range(30):  # liveness: one member's timer at a time, the network settling between
        net.settle()
        if net.leader() is not None:
            break
        net.fire(net.members[i % 3])
    net.settle()
    leader = net.leader()
    assert leader is not None
    _check_confirmed_in(net, leader, sent, origin)
    logs = [net.bodies(m) for m in net.members]
    assert logs[0] == logs[1] == logs[2]
    # and nothing is left owed: every member's log on its disk, all of it committed
    assert all(c.log.committed == c.log.next_offset for c in net.cores.values())
    assert net.cores[leader].rep.commit == net.cores[leader].log.next_offset
    return len(leaders), sum(net.confirmed.values())


def _check_confirmed_in(net: Net, m: str, sent: dict[int, bytes], origin: dict[int, str]) -> None:
    """Every confirmed publish (a channel's confirm covers its seqs up to it) is in m's log."""
    log = set(net.bodies(m))
    for channel, upto in net.confirmed.items():
        for s, body in sent.items():
            if s <= upto and origin[s] == channel:
                assert body in log, f"confirmed {body!r} missing from leader {m}"
