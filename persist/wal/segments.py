"""A member's segment files: the part of its Raft log that has left the WAL.

Files are `<dir>/NNNNNNNN.segment`, numbered in write order, each a run of ENTRY records (no member
id) with contiguous indices, at most `max_entries` per file. An in-memory index keeps, per file, its
first index, each record's offset and each entry's term, so `term_at` costs no IO and a read is one
`pread` of a contiguous byte span.

`limit` is the last index the segments hold *validly*: a truncation replayed from the WAL (or made
by the member) lowers it without touching the files, because the WAL record that justifies the cut
may not be durable yet. `write` (called at WAL rollover, when it is) cuts the files down to `limit`
first, then appends. Every write is synced file by file, in order, and a new file's name is made durable (fsync_dir)
before the next file is started, so after a crash only the last file can be short or torn, never
followed by a later one, and the WAL it came from still exists (it is deleted after `write`).
"""
from __future__ import annotations

import bisect
from array import array
from dataclasses import dataclass, field

import structlog

from persist.disk import Disk
from raft.log import Entry
from persist.wal.records import ENTRY, HEADER_BYTES, Cut, encode, scan

SEGMENT_MAX_ENTRIES_LIMIT = 65535
log = structlog.get_logger("warren.persist.segments")


class CorruptSegment(Exception):
    """A record that was valid when indexed no longer reads back (media error)."""


@dataclass
class _Segment:
    name: str
    first: int
    offsets: array = field(default_factory=lambda: array("Q", [0]))  # one per record, + end
    terms: array = field(default_factory=lambda: array("Q"))

    @property
    def count(self) -> int:
        return len(self.terms)

    @property
    def last(self) -> int:
        return self.first + self.count - 1


class SegmentSet:
    def __init__(self, disk: Disk, directory: str, max_entries: int) -> None:
        if not 1 <= max_entries <= SEGMENT_MAX_ENTRIES_LIMIT:
            raise ValueError(f"segment_max_entries must be 1..{SEGMENT_MAX_ENTRIES_LIMIT}")
        self.disk = disk
        self.dir = directory
        self.max_entries = max_entries
        self._segs: list[_Segment] = []
        self._firsts: list[int] = []
        self._next_seq = 1
        self.limit = 0

    # -- recovery --------------------------------------------------------------------------------
    def load(self) -> tuple[int, int] | None:
        """Index every segment file, cutting a torn tail. Returns a (lo, hi) gap between files."""
        self.disk.makedirs(self.dir)
        gap = None
        for name in self.disk.listdir(self.dir):
            if not name.endswith(".segment"):
                continue
            self._next_seq = int(name.split(".")[0]) + 1
            path = f"{self.dir}/{name}"
            result = scan(self.disk.read(path))
            if result.cut is not None:
                self._cut_tail(path, result.cut)
            if not result.records:
                self.disk.remove(path)
                continue
            seg = _Segment(name, result.records[0].index)
            for rec in result.records:
                if rec.type != ENTRY or rec.index != seg.first + seg.count:
                    self._cut_tail(path, Cut(rec.offset, result.valid_bytes - rec.offset,
                                             "index out of sequence"))
                    break
                seg.terms.append(rec.term)
                seg.offsets.append(rec.offset + rec.size)
            if self._segs and seg.first != self._segs[-1].last + 1 and gap is None:
                gap = (self._segs[-1].last + 1, seg.first - 1)
            self._add(seg)
        self.limit = self.last
        return gap

    def _cut_tail(self, path: str, cut: Cut) -> None:
        log.warning("segment_torn_tail_cut", path=path, offset=cut.offset, bytes=cut.size,
                    reason=cut.reason)
        self.disk.truncate(path, cut.offset)
        self.disk.sync(path)

    # -- queries -------------------------------------------------------------------------------
    @property
    def first(self) -> int | None:
        return self._segs[0].first if self._segs else None

    @property
    def last(self) -> int:
        """Physical last index (0 if empty); valid entries end at `limit`."""
        return self._segs[-1].last if self._segs else 0

    @property
    def files(self) -> list[tuple[str, int, int]]:
        return [(s.name, s.first, s.last) for s in self._segs]

    def _find(self, index: int) -> _Segment | None:
        if not self._segs or index > self.limit or index < self._segs[0].first:
            return None
        return self._segs[bisect.bisect_right(self._firsts, index) - 1]

    def term_at(self, index: int) -> int | None:
        seg = self._find(index)
        return None if seg is None else seg.terms[index - seg.first]

    def read(self, lo: int, hi: int, max_bytes: int | None = None) -> list[Entry]:
        """Entries lo <= index < hi (clamped to what is held); max_bytes as in MemberLog.entries."""
        out: list[Entry] = []
        budget = max_bytes
        hi = min(hi, self.limit + 1)
        while lo < hi:
            seg = self._find(lo)
            if seg is None:
                break
            k_lo, k_hi = lo - seg.first, min(hi, seg.last + 1) - seg.first
            if budget is not None:
                k_hi = self._within(seg, k_lo, k_hi, budget, not out)
                budget -= seg.offsets[k_hi] - seg.offsets[k_lo] - HEADER_BYTES * (k_hi - k_lo)
            start, end = seg.offsets[k_lo], seg.offsets[k_hi]
            result = scan(self.disk.read(f"{self.dir}/{seg.name}", start, end - start))
            if result.cut is not None or len(result.records) != k_hi - k_lo:
                raise CorruptSegment(f"{self.dir}/{seg.name}: {result.cut}")
            out.extend(Entry(r.index, r.term, r.payload) for r in result.records)
            if k_hi < min(hi, seg.last + 1) - seg.first:
                break  # out of budget
            lo = seg.first + k_hi
        return out

    @staticmethod
    def _within(seg: _Segment, k_lo: int, k_hi: int, budget: int, need_one: bool) -> int:
        k = k_lo
        while k < k_hi:
            size = seg.offsets[k + 1] - seg.offsets[k] - HEADER_BYTES
            if size > budget and not (need_one and k == k_lo):
                break
            budget -= size
            k += 1
        return k

    # -- changes -------------------------------------------------------------------------------
    def write(self, entries: list[Entry], floor: int) -> int:
        """Make `entries` durable in segments; returns how many segment files it appended to. They start at limit + 1, or anywhere when the
        segments are empty, or at the log's `floor` when everything the segments validly hold
        lies below it: a truncation lowered `limit`, then a compaction or a snapshot raised the
        floor above it and released the memtable up to there. Those files are then dropped
        first, so the set stays contiguous (no file may be followed by a hole)."""
        self._apply_limit()
        if not entries:
            return 0
        if self._segs and entries[0].index > self.limit + 1:
            assert entries[0].index <= floor, "segment write leaves a hole above the floor"
            self._remove_from(0)
        if self._segs:
            assert entries[0].index == self.last + 1, "segment write not contiguous"
        pos = files = 0
        while pos < len(entries):
            seg = self._segs[-1] if self._segs else None
            if seg is None or seg.count >= self.max_entries:
                seg = _Segment(f"{self._next_seq:08d}.segment", entries[pos].index)
                self._next_seq += 1
                self.disk.open(f"{self.dir}/{seg.name}")
                self._add(seg)
            chunk = entries[pos:pos + self.max_entries - seg.count]
            data = b"".join([encode(ENTRY, e.index, e.term, e.command) for e in chunk])
            path = f"{self.dir}/{seg.name}"
            base = self.disk.append(path, data)
            assert base == seg.offsets[-1]
            for e in chunk:
                seg.terms.append(e.term)
                seg.offsets.append(seg.offsets[-1] + HEADER_BYTES + len(e.command))
            self.disk.sync(path)
            if len(chunk) == seg.count:  # a new file: its name is durable before the next starts
                self.disk.fsync_dir(self.dir)
            pos += len(chunk)
            files += 1
        self.limit = self.last
        return files

    def _apply_limit(self) -> None:
        """Cut the files down to `limit` (now that the WAL record causing it is durable).

        Whole files go first (and that is made durable) so that a crash can never leave a
        shortened file followed by the files after it: that would look like a gap.
        """
        self._remove_from(next((k for k, s in enumerate(self._segs) if s.first > self.limit),
                               len(self._segs)))
        if self._segs and self._segs[-1].last > self.limit:
            seg = self._segs[-1]
            keep = self.limit - seg.first + 1
            path = f"{self.dir}/{seg.name}"
            self.disk.truncate(path, seg.offsets[keep])
            self.disk.sync(path)
            del seg.offsets[keep + 1:]
            del seg.terms[keep:]

    def _remove_from(self, k: int) -> None:
        """Remove files k and after, last first, and make that durable."""
        if k >= len(self._segs):
            return
        while len(self._segs) > k:
            self.disk.remove(f"{self.dir}/{self._segs.pop().name}")
            self._firsts.pop()
        self.disk.fsync_dir(self.dir)

    def compact_below(self, index: int) -> int:
        """Delete files whose every entry is below `index`; return how many."""
        n = 0
        while self._segs and self._segs[0].last < index:
            self.disk.remove(f"{self.dir}/{self._segs.pop(0).name}")
            self._firsts.pop(0)
            n += 1
        if n:
            self.disk.fsync_dir(self.dir)
        if not self._segs:
            self.limit = 0
        return n

    def _add(self, seg: _Segment) -> None:
        self._segs.append(seg)
        self._firsts.append(seg.first)
