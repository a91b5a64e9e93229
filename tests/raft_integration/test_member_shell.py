"""The member shell's ordering rules, in one process with a fake loop and runtime: persist the
hard state before the sends that follow it; snapshot only what the WAL has written."""
from __future__ import annotations

import random

from actors.raft.machine import KvMachine
from actors.raft.member import MemberActor
from actors.raft.wal import WalActor
from actors.runtime.address import Address
from raft.config import ClusterConfig, RaftSettings
from raft.core import RaftCore
from raft.effects import WriteSnapshot
from raft.log import Entry
from raft.messages import RequestVote, RequestVoteReply
from persist.wal.writer import WalWriter
from tests.sim.simdisk import SimDisk

ME, PEER = "raft-n1/g0", "raft-n2/g0"


class Loop:
    """call_soon only queues; `turn()` runs what is queued, as one event-loop iteration."""

    def __init__(self) -> None:
        self.ready: list = []

    def call_soon(self, callback) -> None:
        self.ready.append(callback)

    def turn(self) -> None:
        ready, self.ready = self.ready, []
        for callback in ready:
            callback()


class Runtime:
    def __init__(self) -> None:
        self.sent: list[tuple[str, type]] = []

    def send(self, to: Address, msg, sender: Address) -> None:
        self.sent.append((str(to), type(msg)))


def member() -> tuple[MemberActor, Runtime, Loop, SimDisk]:
    disk, loop, runtime = SimDisk(random.Random(0)), Loop(), Runtime()
    writer = WalWriter(disk, 1 << 20, 16)
    writer.recover()
    wal = WalActor(writer, loop)
    config = ClusterConfig(frozenset({ME, PEER, "raft-n3/g0"}))
    core = RaftCore(ME, config, writer.member(ME), KvMachine(), random.Random(0),
                    RaftSettings(append_per_turn=True))
    return MemberActor(runtime, Address.parse(ME), core, wal), runtime, loop, disk


def test_a_vote_leaves_only_after_the_wal_synced_it():
    actor, runtime, loop, disk = member()
    actor.receive(Address.parse(PEER), RequestVote(1, PEER, 0, 0))
    assert runtime.sent == []  # held: the vote is queued in the WAL, not yet durable
    syncs = disk.syncs
    loop.turn()
    assert disk.syncs == syncs + 1
    assert runtime.sent == [(PEER, RequestVoteReply)]
    assert actor.core.log.durable_hard_state() == (1, PEER)


def test_a_snapshot_of_entries_the_wal_has_not_written_waits_for_them():
    actor, runtime, loop, disk = member()
    log = actor.core.log
    log.append([Entry(i, 1, b"u") for i in range(1, 4)])
    actor.run([WriteSnapshot(3, 1, b"state")])
    assert log.snapshot_meta() is None  # entries 1..3 not written yet
    actor.wal.kick()
    loop.turn()  # the WAL flushes and reports written(3); the snapshot follows
    assert log.written_index() == 3 and log.snapshot_meta() == (3, 1)


def test_turn_end_work_runs_before_the_write_and_after_flush_work_after_the_sync():
    actor, runtime, loop, disk = member()
    actor.core.log.append([Entry(1, 1, b"u")])
    seen = []
    actor.wal.after_flush(lambda: seen.append(("after", disk.syncs)))
    actor.wal.at_turn_end(lambda: seen.append(("turn end", disk.syncs)))
    syncs = disk.syncs
    loop.turn()
    assert seen == [("turn end", syncs), ("after", syncs + 1)]
