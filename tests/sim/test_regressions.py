"""Regression tests for the bugs in persist/ that running the real WAL under the simulator found
(a 1000-seed sweep). Each has a minimal reproduction against the WAL writer or the core, and the
simulator run that first showed it (seeds replay differently since the simulator learned batched
proposals and held hard-state sends, so those runs are kept as plain seed runs)."""
from __future__ import annotations

import random

import pytest

from raft import ClusterConfig, MemoryLog, RaftCore, commands
from raft.effects import ToPeer
from raft.log import Entry
from raft.messages import AppendReply, InstallSnapshot, PreVoteReply, RequestVoteReply
from raft.roles import LEADER
from raft.snapshot import encode_snapshot
from persist.wal.writer import WalWriter
from tests.sim.kvmachine import KvMachine, command
from tests.sim.run import run_seed
from tests.sim.simdisk import SimDisk
from tests.sim.simulator import SETTINGS


def es(lo: int, hi: int, term: int, size: int = 24) -> list[Entry]:
    return [Entry(i, term, bytes([i % 251]) * size) for i in range(lo, hi + 1)]


def open_writer(disk: SimDisk, wal_max_size_bytes: int = 1 << 20) -> WalWriter:
    writer = WalWriter(disk, wal_max_size_bytes, segment_max_entries=4)
    writer.recover()
    return writer


def test_snapshot_above_the_written_log_survives_a_crash_consistently() -> None:
    """(c) a snapshot written above the WAL's written index survived a crash that lost the entries
    below it: recovery gave a log ending below its snapshot, and the next append (snapshot index
    + 1) tripped logstore's contiguity assertion. Recovery now restarts the log just above the
    snapshot, and saves that floor, so a second recovery does not see a hole."""
    disk = SimDisk(random.Random(1))
    writer = open_writer(disk)
    log = writer.member("q")
    log.append(es(1, 5, term=1))
    writer.flush()
    log.append(es(6, 10, term=1))           # not yet flushed
    log.install_snapshot(8, 1, b"state")    # a follower applied 8 (committed elsewhere)
    disk.crash()
    writer = WalWriter(disk, 1 << 20, 4)
    log = writer.recover()["q"]
    assert log.snapshot_meta() == (8, 1)
    assert log.last_index_term() == (8, 1) and log.first_index() == 9
    log.append(es(9, 9, term=1))            # what the next AppendEntries after 8 does
    assert log.last_index_term() == (9, 1)
    log.append(es(10, 10, term=2))
    writer.flush()
    disk.crash()
    log = WalWriter(disk, 1 << 20, 4).recover()["q"]  # no gap between the old WAL and 9
    assert log.last_index_term() == (10, 2) and log.entries(9, 11) == es(9, 9, 1) + es(10, 10, 2)


def test_rollover_after_compaction_above_a_pending_segment_truncation() -> None:
    """(a) compact_below dropped memtable entries above the segments' valid limit (a truncation
    not yet rolled over), leaving segments valid up to the limit and a memtable starting above
    it; the next rollover's SegmentSet.write asserted 'segment write not contiguous' (seeds 12,
    28, 34, 59). Segments wholly below the floor are now dropped before the write."""
    disk = SimDisk(random.Random(1))
    writer = open_writer(disk, wal_max_size_bytes=300)
    log = writer.member("q")
    log.append(es(1, 8, term=1))
    writer.flush()
    assert writer.rollovers == 1 and log.segments.limit == 8
    log.truncate_from(6)                    # a new leader's conflicting suffix
    log.append(es(6, 10, term=2, size=60))
    log.install_snapshot(9, 2, b"state")    # the log holds (9, 2): the suffix stays
    log.compact_below(8)
    writer.flush()                          # rolls over again
    assert writer.rollovers == 2
    assert [(e.index, e.term) for e in log.entries(8, 11)] == [(8, 2), (9, 2), (10, 2)]
    assert log.segments.first == 8
    log = WalWriter(disk, 300, 4).recover()["q"]
    assert [(e.index, e.term) for e in log.entries(8, 11)] == [(8, 2), (9, 2), (10, 2)]


@pytest.mark.parametrize("seed,nodes,log", [(12, 3, "wal"), (446, 3, "wal"), (446, 3, "memory"),
                                            (340, 3, "wal")])
def test_simulator_seeds_that_found_them(seed: int, nodes: int, log: str) -> None:
    assert not run_seed(seed, 1500, nodes, log=log)


def test_simulator_without_deferred_snapshots() -> None:
    """(c) through the simulator: python -m tests.sim.run --seed 1 --steps 1200 --nodes 5
    --log wal --no-defer-snapshots"""
    assert not run_seed(1, 1200, 5, log="wal", defer_snapshots=False)


def compacted_leader() -> RaftCore:
    """A leader of {n1, n2} whose log starts at 10 (a snapshot at 10, entries 10..12 kept)."""
    config = ClusterConfig(frozenset({"n1", "n2"}))
    machine = KvMachine()
    log = MemoryLog()
    log.save_hard_state(1, None)
    log.append([Entry(i, 1, commands.user(command("incr", "a", 1, i))) for i in range(1, 13)])
    log.sync()
    log.install_snapshot(10, 1, encode_snapshot(machine, config, machine.init(), 1))
    log.compact_below(10)
    core = RaftCore("n1", config, log, machine, random.Random(0), SETTINGS)
    for _ in range(2 * SETTINGS.election_ticks):
        core.tick()
    core.step(PreVoteReply(core.term + 1, "n2", True))
    core.step(RequestVoteReply(core.term, "n2", True))
    assert core.role == LEADER and log.first_index() == 10
    return core


def test_leader_with_compacted_log_probes_an_empty_follower_with_a_snapshot() -> None:
    """(b) Raft §7: when a follower's reject hints index 0 (its log is empty, e.g. it crashed
    before its first WAL sync), the leader probes from next=1; term_at(0) is 0 by the Log
    contract, so send_append read entries(1, ...) below a compacted log's first index
    (assertion) instead of sending the snapshot (seeds 446 and 340, both modes)."""
    core = compacted_leader()
    out = core.step(AppendReply(core.term, "n2", False, 12, hint_index=0, hint_term=0))
    assert any(isinstance(e, ToPeer) and isinstance(e.msg, InstallSnapshot) for e in out), out
