"""MemberLog over SimDisk against a model: append/truncate/flush/crash/recover.

The model keeps each member's log as the member sees it and as the last completed flush made it
durable, plus every intermediate state since then, one per WAL record. After a clean crash the
recovered log must equal the durable state; after a crash inside a flush (the sync point armed to
fail, possibly tearing the last write) it must equal the state after some prefix of the records
that flush was writing - never anything else.
"""
from __future__ import annotations

import random

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from raft.log import Entry
from persist.wal.writer import WalWriter
from tests.sim.simdisk import SimCrash, SimDisk

MEMBERS = ("a", "b")
Logs = dict[str, tuple[Entry, ...]]


class MemberLogMachine(RuleBasedStateMachine):
    @initialize(seed=st.integers(0, 2**32 - 1), wal_max=st.sampled_from([200, 600, 1 << 20]),
                seg_max=st.integers(1, 4), prealloc=st.sampled_from([0, 64, 4096]))
    def start(self, seed, wal_max, seg_max, prealloc):
        self.disk = SimDisk(random.Random(seed))
        self.config = dict(wal_max_size_bytes=wal_max, segment_max_entries=seg_max, prealloc_bytes=prealloc)
        self.writer = WalWriter(self.disk, **self.config)
        self.writer.recover()
        for m in MEMBERS:
            self.writer.member(m)
        self.view: Logs = {m: () for m in MEMBERS}
        self.durable: Logs = dict(self.view)
        self.since_sync: list[tuple[str, tuple[Entry, ...]]] = []  # (member, view) per record
        self.term = 1
        self.hard = {m: (0, None) for m in MEMBERS}          # saved (queued in the WAL)
        self.hard_durable = dict(self.hard)
        self.hard_since: dict[str, list] = {m: [] for m in MEMBERS}  # saved since the last sync

    @rule(m=st.sampled_from(MEMBERS), n=st.integers(1, 4), size=st.integers(0, 40),
          bump=st.booleans())
    def append(self, m, n, size, bump):
        self.term += bump
        log = self.view[m]
        for _ in range(n):
            index = len(log) + 1
            log = log + (Entry(index, self.term, bytes([index % 256]) * size),)
            self.since_sync.append((m, log))
        self.writer.logs[m].append(log[len(self.view[m]):])
        self.view[m] = log

    @rule(m=st.sampled_from(MEMBERS), data=st.data())
    def truncate(self, m, data):
        if not self.view[m]:
            return
        index = data.draw(st.integers(1, len(self.view[m])))
        self.writer.logs[m].truncate_from(index)
        self.view[m] = self.view[m][:index - 1]
        self.since_sync.append((m, self.view[m]))

    @rule(m=st.sampled_from(MEMBERS), vote=st.sampled_from([None, "n1", "n2"]))
    def save_hard_state(self, m, vote):
        """A new term, with or without a vote (a vote in the same term only after none)."""
        term = self.hard[m][0] + 1
        self.writer.logs[m].save_hard_state(term, vote)
        self.hard[m] = (term, vote)
        self.hard_since[m].append(self.hard[m])

    @rule()
    def flush(self):
        written = self.writer.flush()
        self.hard_durable = dict(self.hard)
        self.hard_since = {m: [] for m in MEMBERS}
        for m in MEMBERS:
            assert self.writer.logs[m].durable_hard_state() == self.hard[m]
        for m, upto in written.items():
            self.writer.logs[m].set_written(upto)
            assert upto == len(self.view[m])
        self.durable = dict(self.view)
        self.since_sync.clear()
        for m in MEMBERS:
            assert self.writer.logs[m].written_index() == len(self.view[m])

    @rule(torn=st.booleans())
    def crash(self, torn):
        self.disk.crash(torn=torn)  # nothing unsynced is pending a write: torn changes nothing
        self._recover([self.durable])

    @rule(sync_points=st.integers(0, 6), torn=st.booleans())
    def crash_inside_flush(self, sync_points, torn):
        self.disk.arm_crash(sync_points)
        try:
            self.writer.flush()
        except SimCrash:
            pass
        self.disk.crash(torn=torn)
        candidates = [dict(self.durable)]
        for m, log in self.since_sync:
            candidates.append({**candidates[-1], m: log})
        self._recover(candidates)

    def _recover(self, candidates: list[Logs]):
        self.writer = WalWriter(self.disk, **self.config)
        self.writer.recover()
        # a member that wrote nothing has no files: its owner names it (the quorum host's table)
        logs = {m: self.writer.member(m) for m in MEMBERS}
        got = {m: tuple(logs[m].entries(1, 10**9)) for m in MEMBERS}
        assert got in candidates, (got, candidates)
        for m in MEMBERS:
            assert logs[m].written_index() == len(got[m])
            # durable, or newer: a crash inside a flush may have synced it, a torn tail kept it
            assert logs[m].hard_state() in [self.hard_durable[m]] + self.hard_since[m]
            self.hard[m] = self.hard_durable[m] = logs[m].hard_state()
            self.hard_since[m] = []
        self.view = got
        self.durable = dict(got)
        self.since_sync.clear()

    @invariant()
    def log_reads_as_the_model(self):
        for m in MEMBERS:
            log = self.writer.logs[m]
            view = self.view[m]
            assert log.last_index_term() == ((len(view), view[-1].term) if view else (0, 0))
            assert tuple(log.entries(1, len(view) + 1)) == view
            if view:
                mid = len(view) // 2 + 1
                assert log.term_at(mid) == view[mid - 1].term
                budget = len(view[mid - 1].command) + 10
                assert log.entries(mid, len(view) + 1, max_bytes=budget) == \
                    within_budget(view[mid - 1:], budget)


def within_budget(entries, max_bytes: int) -> list[Entry]:
    """raft/log.py: stop before the entry that would pass max_bytes, but return one."""
    out, size = [], 0
    for e in entries:
        size += len(e.command)
        if out and size > max_bytes:
            break
        out.append(e)
    return out


MemberLogMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=30,
                                              deadline=None)
test_member_log_against_model = MemberLogMachine.TestCase
