"""The shared write-ahead log's pure core: memtables, batches, written notifications, rollover.

Theory of operation (Ra's WAL, docs/DESIGN.md §7). One WAL per node serves every Raft member on it.
A member's `submit` (entries: one RUN record), `truncate` (follower conflict) or `save_hard_state`
(term and vote: a HARD_STATE record in the same group commit, no file of its own) is encoded at
once and applied at once to that member's memtable, so the member can serve what it appended before
it is durable (Raft lets a leader send entries it has not yet written). `take_batch` hands the
shell every record queued since the last batch as one run of byte pieces (no copy of the commands);
the shell appends them to the current WAL file with one gathered write and syncs once, then calls
`written(batch)`, which returns for each member in the batch the highest index now durable for it:
its last index as of the batch (a truncation-only batch reports the index below the cut);
`Batch.hard` says whose hard state the batch made durable. Ordering rule: a member may report an
append as written (to a leader, or count it towards commit) only after that notification. The
notification carries no term, so a truncation while a batch is in flight (taken, not yet
`written`: its sync runs on a thread, or in the WAL's own process) lowers what that batch will
report for the member to below the cut: a stale notice never marks the entries that replace the
cut ones as durable.

Rollover: once the WAL files written since the last rollover hold `max_size_bytes`, `should_roll()`
says so. The shell then starts a new WAL file and calls `start_roll()` between batches: the memtables
become `frozen` (they hold exactly the state all old WAL files describe) and new appends go to fresh
ones. The shell writes the frozen tables into the members' segment files a slice at a time, across
loop turns (a 512 MiB WAL written at once would stall every member of the node for seconds),
deletes the old WAL files once all of them are synced, and calls `roll_done()`, which releases the
frozen tables. Meanwhile a member reads its log from its memtable, then its frozen table, then its
segments; a truncation cuts both tables, and a compaction drops from both.

Recovery replays records through `MemberReplay`, which applies Ra's rule that writing index i
discards everything at and above i, skips what lies below the member's floor (snapshot/compaction),
and reports a `Gap` (never accepts it) when the replayed log has a hole.

Left out: the WAL does not bound a batch; the shell decides when to flush (see `pending_bytes`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from raft.log import Entry
from persist.wal.records import (ENTRY, HARD_STATE, RUN, TRUNCATE, Record, decode_hard_state,
                             encode, encode_hard_state, encode_run, newer_hard_state, run_entries)


class MemTable:
    """A member's contiguous run of recent entries, first..last, held in memory."""

    __slots__ = ("first", "items", "nbytes")

    def __init__(self, first: int = 1) -> None:
        self.first = first
        self.items: list[Entry] = []
        self.nbytes = 0

    @property
    def last(self) -> int | None:
        return self.first + len(self.items) - 1 if self.items else None

    def append(self, entries: Sequence[Entry]) -> None:
        if not self.items:
            self.first = entries[0].index
        assert entries[0].index == self.first + len(self.items), "memtable append not contiguous"
        self.items.extend(entries)
        self.nbytes += sum(len(e.command) for e in entries)

    def truncate_from(self, index: int) -> None:
        """Drop entries >= index; an empty table then starts at `index`."""
        k = max(0, index - self.first)
        dropped = self.items[k:]
        del self.items[k:]
        self.nbytes -= sum(len(e.command) for e in dropped)
        if not self.items:
            self.first = index

    def drop_below(self, index: int) -> None:
        k = max(0, min(index - self.first, len(self.items)))
        self.nbytes -= sum(len(e.command) for e in self.items[:k])
        del self.items[:k]
        self.first += k

    def get(self, index: int) -> Entry | None:
        k = index - self.first
        return self.items[k] if 0 <= k < len(self.items) else None

    def slice(self, lo: int, hi: int) -> list[Entry]:
        """Entries with lo <= index < hi that the table holds."""
        return self.items[max(0, lo - self.first):max(0, hi - self.first)]


@dataclass(frozen=True, slots=True)
class Batch:
    parts: list[bytes]  # the records, written back to back
    nbytes: int
    written: dict[str, int]  # member -> highest index durable once the parts are synced
    records: int
    hard: dict[str, tuple[int, str | None]]  # member -> hard state durable once synced

    @property
    def data(self) -> bytes:
        return b"".join(self.parts)


class WalCore:
    def __init__(self, max_size_bytes: int, bytes_since_roll: int = 0) -> None:
        assert max_size_bytes > 0
        self.max_size_bytes = max_size_bytes
        self.bytes_since_roll = bytes_since_roll
        self.mem: dict[str, MemTable] = {}
        self.frozen: dict[str, MemTable] = {}  # the memtables of a rollover in progress
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._pending_records = 0
        self._last: dict[str, int] = {}  # member -> last index as of the records queued so far
        self._hard: dict[str, tuple[int, str | None]] = {}  # member -> latest hard state queued
        self._member_bytes: dict[str, bytes] = {}
        self._in_flight: list[Batch] = []  # taken, not yet written (oldest first)

    def memtable(self, member: str) -> MemTable:
        table = self.mem.get(member)
        if table is None:
            table = self.mem[member] = MemTable()
        return table

    def submit(self, member: str, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        self.memtable(member).append(entries)
        parts = encode_run(entries, self._mid(member))
        self._pending.extend(parts)
        self._pending_bytes += sum(map(len, parts))
        self._pending_records += len(entries)
        self._last[member] = entries[-1].index

    def truncate(self, member: str, index: int) -> None:
        """Queue the durable record of a truncation and apply it to the memtables now."""
        self.memtable(member).truncate_from(index)
        frozen = self.frozen.get(member)
        if frozen is not None:
            frozen.truncate_from(index)
        self._queue(encode(TRUNCATE, index, 0, b"", self._mid(member)), 1)
        self._last[member] = index - 1
        for batch in self._in_flight:
            upto = batch.written.get(member)
            if upto is not None and upto >= index:
                batch.written[member] = index - 1

    def save_hard_state(self, member: str, term: int, voted_for: str | None) -> None:
        """Queue a member's term and vote; durable with the batch that carries it."""
        self._queue(encode_hard_state(term, voted_for, self._mid(member)), 1)
        self._hard[member] = (term, voted_for)

    def pending_bytes(self) -> int:
        return self._pending_bytes

    def queued_members(self) -> tuple[list[str], bool]:
        """The members with records queued for the next batch, and whether a hard state is among them."""
        return list(self._last), bool(self._hard)

    def take_batch(self) -> Batch | None:
        if not self._pending:
            return None
        batch = Batch(self._pending, self._pending_bytes, dict(self._last), self._pending_records,
                      dict(self._hard))
        self._pending = []
        self._last.clear()
        self._hard.clear()
        self._pending_bytes = self._pending_records = 0
        self._in_flight.append(batch)
        return batch

    def written(self, batch: Batch) -> dict[str, int]:
        """The batch is durable: what to tell each member."""
        self.bytes_since_roll += batch.nbytes
        in_flight = self._in_flight
        for k, taken in enumerate(in_flight):
            if taken is batch:
                del in_flight[k]
                break
        return batch.written

    def should_roll(self) -> bool:
        return self.bytes_since_roll >= self.max_size_bytes and not self._pending and not self.frozen

    def start_roll(self) -> None:
        """The shell started a new WAL file: the memtables freeze, to be written into segments."""
        assert not self._pending, "roll over only between batches"
        assert not self.frozen, "one rollover at a time"
        self.frozen, self.mem = self.mem, {}
        self.bytes_since_roll = 0

    def roll_done(self) -> None:
        """The shell wrote every frozen table into segments and deleted the old WAL files."""
        self.frozen = {}

    def forget(self, member: str) -> None:
        """A member deleted for good: nothing of it stays, its name's bytes included (one entry
        per quorum queue ever deleted otherwise). Records of it already queued still go out."""
        self.mem.pop(member, None)
        self.frozen.pop(member, None)
        self._member_bytes.pop(member, None)

    def _queue(self, data: bytes, records: int) -> None:
        self._pending.append(data)
        self._pending_bytes += len(data)
        self._pending_records += records

    def _mid(self, member: str) -> bytes:
        mid = self._member_bytes.get(member)
        if mid is None:
            mid = self._member_bytes[member] = member.encode()
        return mid


@dataclass(frozen=True, slots=True)
class Gap:
    """Indices missing from a member's log: recovery stops rather than accept it."""

    member: str
    missing_lo: int
    missing_hi: int
    where: str

    @property
    def text(self) -> str:
        return (f"member {self.member!r}: log indices {self.missing_lo}..{self.missing_hi} "
                f"missing {self.where}")


class MemberReplay:
    """Folds one member's WAL records over what its segments recovered.

    Every record applies Ra's rule (ENTRY i replaces i and above; TRUNCATE j drops j and above),
    and records below `floor` (snapshot/compaction) are skipped. Contiguity is judged only on the
    final state (`finish`): after a crash inside a rollover, an old WAL file is replayed over
    segments that already hold its *result*, possibly cut below where the file's early records
    start; those records then land above a hole that a later record of the same file closes again.
    Replaying R over such segments gives the same state as over the old ones, because R never
    touches anything below its lowest index and everything at or above that index is rewritten.
    """

    def __init__(self, member: str, floor: int, seg_first: int | None, seg_last: int) -> None:
        self.member = member
        self.floor = floor
        self.seg_first = seg_first  # None without segments
        self.seg_limit = seg_last  # segments are valid up to here (a replayed cut lowers it)
        self._entries: dict[int, Entry] = {}
        self._top = 0  # the highest index in _entries (0 if none)
        self.hard_state: tuple[int, str | None] = (0, None)  # the newest HARD_STATE replayed

    def check_segments(self) -> Gap | None:
        if self.seg_first is not None and self.floor < self.seg_first <= self.seg_limit:
            return Gap(self.member, self.floor, self.seg_first - 1,
                       "below the first segment (not covered by a snapshot)")
        return None

    def apply(self, rec: Record) -> None:
        if rec.type == RUN:
            entries = run_entries(rec, self.floor)
            if entries:
                self._cut(entries[0].index)
                for e in entries:
                    self._entries[e.index] = e
                self._top = entries[-1].index
        elif rec.type == ENTRY:
            if rec.index < self.floor:
                return
            self._cut(rec.index)
            self._entries[rec.index] = Entry(rec.index, rec.term, bytes(rec.payload))
            self._top = rec.index
        elif rec.type == TRUNCATE:
            self._cut(max(rec.index, self.floor))
        elif rec.type == HARD_STATE:
            self.hard_state = newer_hard_state(self.hard_state, decode_hard_state(rec))

    def _cut(self, index: int) -> None:
        self.seg_limit = min(self.seg_limit, index - 1)
        if index <= self._top:
            for i in range(index, self._top + 1):
                self._entries.pop(i, None)
            self._top = max(self._entries, default=0)

    def finish(self) -> tuple[int, MemTable] | Gap:
        """(last index, memtable) of the replayed log, or the first hole in it."""
        prev = max(self.seg_limit, self.floor - 1)
        mem = MemTable(prev + 1)
        ordered = [self._entries[i] for i in sorted(self._entries)]
        for e in ordered:
            if e.index != prev + 1:
                return Gap(self.member, prev + 1, e.index - 1, f"before WAL entry {e.index}")
            prev = e.index
        if ordered:
            mem.append(ordered)
        return prev, mem
