"""`MemberLog`: one Raft member's log (raft.log.Log) over the node's shared WAL.

Where an index lives, low to high: below `floor` nothing (compacted or discarded; the snapshot
stands in for it); then the member's segment files up to `segments.limit`; then, while a rollover
is being written, its frozen memtable (`WalCore.frozen[member]`); then the WAL memtable
(`WalCore.mem[member]`), which holds everything appended since the last rollover, durable or not.
`last` is the member's last index; `floor - 1` when it holds no entries.

Durability (the contract in raft/log.py): `append` and `truncate_from` are queued to the
WAL and durable once a flush covers them. The writer calls `_synced(upto)` right after the sync
that covers them; `set_written(upto)` (the core's view) never passes that, and truncation lowers
both, so a stale written notification cannot mark a replacement entry written.
`save_hard_state` queues a HARD_STATE record in the same group commit as the entries (a vote must
not cost a file and its fsyncs of its own: 100 members electing at once did that); it is durable
once the flush that carries it has synced, which the writer reports with `_hard_synced`, and
`durable_hard_state()` says what that covers. The shell holds back every message that follows a
PersistHardState until then (actors/raft/member.py). `install_snapshot` and `compact_below` are
durable when they return (small files replaced atomically, see persist/wal/snapshots.py).

Known window, deliberately accepted: an `install_snapshot` that discards the log also queues a
WAL truncation for the entries above the snapshot; if the node crashes before the next flush,
those stale entries come back. That is the same state as a follower whose truncation was not yet
written, which Raft's log-matching check repairs (they are never acked: written_index stays put).
"""
from __future__ import annotations

from typing import Sequence

from raft.log import Entry
from persist.wal.segments import SegmentSet
from persist.wal.snapshots import MemberMeta, SnapshotStore
from persist.wal.core import MemTable, WalCore


class MemberLog:
    def __init__(self, member: str, wal: WalCore, segments: SegmentSet,
                 snapshots: SnapshotStore, meta: MemberMeta, last: int,
                 hard_state: tuple[int, str | None] = (0, None)) -> None:
        self.member = member
        self._wal = wal  # the node's shared WAL core: this member's memtable and what it queues
        self.segments = segments
        self._snapshots = snapshots
        self._meta = meta
        self._floor = max(meta.floor, snapshots.floor)
        self._last = last
        self._synced_upto = last
        self._written = last
        self._hard = self._hard_durable = hard_state

    @property
    def _mem(self) -> MemTable:
        return self._wal.memtable(self.member)

    @property
    def _tables(self) -> tuple[MemTable, ...]:
        """The memtables that hold entries, low to high: a rollover's frozen one, the current one."""
        frozen = self._wal.frozen.get(self.member)
        mem = self._mem
        return (frozen, mem) if frozen is not None and frozen.items else (mem,)

    # -- reads -----------------------------------------------------------------------------
    def first_index(self) -> int:
        return self._floor

    def last_index_term(self) -> tuple[int, int]:
        return self._last, self.term_at(self._last) or 0

    def term_at(self, index: int) -> int | None:
        snap = self._snapshots.meta
        if snap is not None and index == snap[0]:
            return snap[1]
        if index == 0:
            return 0
        if index < self._floor or index > self._last:
            return None
        for table in self._tables:
            entry = table.get(index)
            if entry is not None:
                return entry.term
        return self.segments.term_at(index)

    def entries(self, lo: int, hi: int, max_bytes: int | None = None) -> list[Entry]:
        assert lo >= self._floor, f"entries({lo}) below first index {self._floor}"
        hi = min(hi, self._last + 1)
        if lo >= hi:
            return []
        tables = self._tables
        first = tables[0]
        split = first.first if first.items else hi  # the first index served from memory
        out: list[Entry] = []
        if lo < split:
            seg_hi = min(hi, split)
            out = self.segments.read(lo, seg_hi, max_bytes)
            if len(out) < seg_hi - lo:
                return out  # out of budget inside the segments
            if max_bytes is not None:
                max_bytes -= sum(len(e.command) for e in out)
            lo = seg_hi
        for table in tables:
            for e in table.slice(lo, hi):
                if max_bytes is not None:
                    if len(e.command) > max_bytes and out:
                        return out
                    max_bytes -= len(e.command)
                out.append(e)
        return out

    def written_index(self) -> int:
        return self._written

    def hard_state(self) -> tuple[int, str | None]:
        return self._hard

    def durable_hard_state(self) -> tuple[int, str | None]:
        return self._hard_durable

    def snapshot_meta(self) -> tuple[int, int] | None:
        return self._snapshots.meta

    def snapshot_data(self) -> bytes | None:
        return self._snapshots.data()

    # -- writes ------------------------------------------------------------------------------
    def append(self, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        assert entries[0].index == self._last + 1, \
            f"append at {entries[0].index}, last is {self._last}"
        self._wal.submit(self.member, entries)
        self._last = entries[-1].index

    def truncate_from(self, index: int) -> None:
        assert index >= self._floor, "cannot truncate below the first index"
        if index > self._last:
            return
        self._wal.truncate(self.member, index)
        if index <= self.segments.limit:
            self.segments.limit = index - 1
        self._last = index - 1
        self._synced_upto = min(self._synced_upto, index - 1)
        self._written = min(self._written, index - 1)

    def set_written(self, upto: int) -> None:
        self._written = max(self._written, min(upto, self._synced_upto))

    def _synced(self, upto: int) -> None:
        """The WAL writer's sync made this member durable up to `upto`."""
        self._synced_upto = max(self._synced_upto, min(upto, self._last))

    def save_hard_state(self, term: int, voted_for: str | None) -> None:
        self._hard = (term, voted_for)
        self._wal.save_hard_state(self.member, term, voted_for)

    def _hard_synced(self, hard_state: tuple[int, str | None]) -> None:
        self._hard_durable = hard_state

    def install_snapshot(self, index: int, term: int, data: bytes) -> None:
        snap = self._snapshots.meta
        keep = self.term_at(index) == term and not (snap is not None and index < snap[0])
        if keep:
            self._snapshots.save(index, term, self._snapshots.floor, data)
            return
        # Raft §7: the log does not hold the snapshot's last entry, so all of it goes. The view
        # changes with the snapshot file, before the segment files go: if deleting them fails
        # (a crash at its directory sync), this log already says what the disk says now.
        self._snapshots.save(index, term, index + 1, data)
        self._floor = index + 1
        if self._last > index:
            self._wal.truncate(self.member, index + 1)
        for table in self._tables:
            table.truncate_from(index + 1)
            table.drop_below(index + 1)
        self._last = self._synced_upto = self._written = index
        self.segments.limit = min(self.segments.limit, index)
        self.segments.compact_below(index + 1)

    def compact_below(self, index: int) -> None:
        snap = self._snapshots.meta
        index = min(index, (snap[0] if snap else 0) + 1)
        if index <= self._floor:
            return
        self._meta.save(*self._hard_durable, index)
        self._floor = index
        for table in self._tables:
            table.drop_below(index)
        self.segments.compact_below(index)
