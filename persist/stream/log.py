"""A stream's log on disk: segment files of chunks, a sparse index per segment, retention by segment.

Theory of operation. The log is a directory of segments, each a pair of files named for the
first offset it holds: `N.segment` (chunks, persist/stream/chunk.py, back to back) and `N.index`
(one fixed row per chunk: first offset, timestamp ms, position in the segment). Only the last
segment is written; it rolls over once it reaches `segment_bytes`. What RAM holds is one small
`Segment` summary per segment (base, end, first and last timestamp, bytes), never the entries or
the index rows, so memory is bounded by the number of segments however long the log is, and
retention bounds that. An offset or a timestamp is found by the summaries, then a binary search
of that segment's index file, never by scanning chunks.

THE ORDERING RULE: `append` writes into the OS (buffered); `sync` makes everything appended durable
(fdatasync of the segment) and only then moves `committed`. Whoever confirms a publish or lets a
reader see an entry does so only below `committed`. The index of the segment being written is not
synced with it (it is at roll-over, when the segment closes): every chunk checks itself (length,
CRC), so recovery re-indexes the last segment from its last sound row on (see below), and a
sync is one fdatasync, not two (one journal commit: 0.32 -> 0.20 ms and ~45 µs less CPU per
sync here, bench/RESULTS.md 2026-12-04 "stream3").

Retention (`retain`) deletes whole segments from the oldest, never the one being written: while
the total exceeds max_bytes, and while a segment's newest chunk is older than max_age. A reader
that retention passed jumps to the log's first offset at its next read; nothing waits for slow
readers. The newest chunks (RECENT_BYTES_MAX) are also kept decoded as appended, so readers at
the tail, the common case, neither read nor decode the file; `forget_recent` drops them (a stream
without consumers, so that idle streams hold no bodies). Past that budget the oldest chunk stays
while an open reader has not read it yet, up to RECENT_HOLD_BYTES_MAX: a reader waits at a
replicated stream's commit, which lags the log's end by what is not confirmed yet (a publisher's
whole confirm window, ~1 MiB of 1 KiB messages), so with the budget alone a consumer that kept up
fell off the decoded chunks and read every chunk back from the file, and, its commit never within
the budget of the end, never got back (measured: 65 chunks of 3,665 taken from RAM on 3 nodes,
bench/RESULTS.md 2026-12-04 "stream3"). A reader behind the decoded chunks holds them too: it
reads the file up to the oldest and goes on from RAM.

Recovery (`StreamLog.open`): every segment's summary comes from its index (first and last rows);
the last segment's index is kept up to its first row that is not its chunk's (a chunk header of
the row's offset and timestamp at its position: a crash may have lost the index's unsynced tail,
or left zeros in its place), its chunks are checked from the last row kept on (CRC, length), a
torn tail is cut from both files, and chunks past that row (written, index row lost) are
indexed again. Left out: checking every chunk of closed segments at start (their index rows were synced
after them, so they were whole when indexed).
"""
from __future__ import annotations

import bisect
import os
import shutil
import struct
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Sequence

from persist.classic.message import Message
from persist.stream import chunk
from persist.stream.chunk import ChunkHeader, Entry

INDEX_ROW = struct.Struct("<QqQ")  # first offset, timestamp ms, position of the chunk in its segment
RECENT_BYTES_MAX = 1 << 20  # the newest chunks kept decoded for readers at the tail, per stream
RECENT_HOLD_BYTES_MAX = 8 << 20  # the most kept while a reader has not read them


@dataclass
class Segment:
    base: int  # first offset it holds
    end: int  # the offset after its last entry
    first_ts: int
    last_ts: int
    bytes: int
    chunks: int

    @property
    def stem(self) -> str:
        return f"{self.base:020d}"


class StreamLog:
    def __init__(self, directory: Path, segment_bytes: int) -> None:
        self.directory = directory
        self.segment_bytes = segment_bytes
        self.segments: list[Segment] = []
        self._file: BinaryIO | None = None
        self._index: BinaryIO | None = None
        self.committed = 0  # every offset below is on disk
        self.last_chunk = -1  # the first offset of the newest chunk ("last" for a consumer)
        # the newest chunks' entries as appended, as the Messages readers hand out, oldest first, at
        # most recent_bytes_max: readers at the tail take them from here instead of reading and
        # decoding the file again
        self._recent: list[tuple[int, list[Message]]] = []
        self._recent_bytes: list[int] = []
        self.recent_bytes_max = RECENT_BYTES_MAX
        self.recent_hold_bytes_max = RECENT_HOLD_BYTES_MAX
        self._readers: weakref.WeakSet[Reader] = weakref.WeakSet()  # open readers (they hold decoded chunks)

    # -- shape -------------------------------------------------------------------------------------

    @property
    def first_offset(self) -> int:
        return self.segments[0].base if self.segments else self.committed

    @property
    def next_offset(self) -> int:
        return self.segments[-1].end if self.segments else self.committed

    @property
    def bytes(self) -> int:
        return sum(s.bytes for s in self.segments)

    @property
    def recent_bytes(self) -> int:
        """RAM the decoded newest chunks take (their encoded size, near enough)."""
        return sum(self._recent_bytes)

    @property
    def entries(self) -> int:
        return self.next_offset - self.first_offset

    # -- writing -----------------------------------------------------------------------------------

    def start_at(self, offset: int) -> None:
        """An empty log starts at `offset` (a new replica of a stream whose leader's retention
        dropped everything before it): its first chunk goes there. Nothing to make durable: an
        empty log that restarts is sent the same chunks again."""
        assert not self.segments, "only an empty log starts anew"
        self.committed = offset

    def append(self, entries: Sequence[Entry], timestamp_ms: int) -> int:
        """Write `entries` as one chunk (into the OS, see `sync`); returns their first offset."""
        first = self.next_offset
        self.append_chunk(chunk.encode(first, timestamp_ms, entries),
                          [Message(first + i, False, *e) for i, e in enumerate(entries)])
        return first

    def append_chunk(self, data: bytes, entries: list[Message] | None = None) -> ChunkHeader:
        """Write one encoded chunk whose first offset is `next_offset` (a replica appends its
        leader's chunks as they are, so every member's chunks and offsets are the same); `entries`
        are its entries as readers hand them out (`chunk.messages`) when the caller has them (kept
        for readers at the tail)."""
        header = chunk.read_header(data)
        assert header is not None and header.first_offset == self.next_offset, "a chunk goes at the log's end"
        first, timestamp_ms = header.first_offset, header.timestamp_ms
        seg = self.segments[-1] if self.segments else None
        if seg is None or (seg.bytes >= self.segment_bytes and seg.chunks):
            seg = self._roll(first, timestamp_ms)
        assert self._file is not None and self._index is not None
        self._index.write(INDEX_ROW.pack(first, timestamp_ms, seg.bytes))
        self._file.write(data)
        if not seg.chunks:
            seg.first_ts = timestamp_ms
        seg.bytes += len(data)
        seg.chunks += 1
        seg.end = header.next_offset
        seg.last_ts = timestamp_ms
        self.last_chunk = first
        if entries is not None:
            self._remember(first, entries, len(data))
        elif self._recent:  # the remembered chunks must end where the log does (recent_chunk)
            self.forget_recent()
        return header

    def read_chunks(self, offset: int, max_bytes: int) -> list[bytes]:
        """The encoded chunks from the one starting at `offset` on (whole chunks, at least one if
        there is any, then while under `max_bytes`), durable or not: what a leader sends a replica."""
        found = self.chunk_at(offset)
        if found is None:
            return []
        si, pos, first = found
        assert first == offset, "a replica is sent whole chunks from a chunk's first offset"
        if self._file is not None:
            self._file.flush()
        out: list[bytes] = []
        size = 0
        for seg in self.segments[si:]:
            with open(self.directory / f"{seg.stem}.segment", "rb") as f:
                while True:
                    f.seek(pos)
                    head = f.read(chunk.HEADER_BYTES)
                    header = chunk.read_header(head)
                    if header is None:
                        break
                    data = head + f.read(header.payload_bytes)
                    if len(data) < header.size or (out and size + len(data) > max_bytes):
                        return out
                    out.append(data)
                    size += len(data)
                    pos += header.size
            pos = 0
        return out

    def truncate(self, offset: int) -> int:
        """Cut the log back to the chunk boundary at `offset` (a replica drops what its new leader
        does not have); durable when it returns. Never below `committed` that was confirmed: the
        caller's rule. Returns the new `next_offset`."""
        if offset >= self.next_offset:
            return self.next_offset
        while self.segments and self.segments[-1].base >= offset and len(self.segments) > 1:
            self._close_writer()
            self._unlink(self.segments.pop())
        seg = self.segments[-1]
        self._close_writer()
        rows_raw = (self.directory / f"{seg.stem}.index").read_bytes()
        rows = [INDEX_ROW.unpack_from(rows_raw, i * INDEX_ROW.size) for i in range(len(rows_raw) // INDEX_ROW.size)]
        keep = [r for r in rows if r[0] < offset]
        cut = rows[len(keep)][2] if len(keep) < len(rows) else seg.bytes
        for suffix, size in ((".segment", cut), (".index", len(keep) * INDEX_ROW.size)):
            with open(self.directory / f"{seg.stem}{suffix}", "r+b") as f:
                f.truncate(size)
                os.fsync(f.fileno())
        if not keep:
            self._unlink(self.segments.pop())
            self.committed = min(self.committed, seg.base)
            self.last_chunk = -1
        else:
            with open(self.directory / f"{seg.stem}.segment", "rb") as f:
                last = _chunk_at(f, keep[-1][2])
            assert last is not None
            seg.end, seg.bytes, seg.chunks, seg.last_ts = last.next_offset, cut, len(keep), keep[-1][1]
            self.last_chunk = last.first_offset
            self._file = open(self.directory / f"{seg.stem}.segment", "ab")
            self._index = open(self.directory / f"{seg.stem}.index", "ab", buffering=0)
            self.committed = min(self.committed, seg.end)
        self.forget_recent()
        return self.next_offset

    def _remember(self, first: int, entries: list[Message], size: int) -> None:
        recent, sizes = self._recent, self._recent_bytes
        recent.append((first, entries))
        sizes.append(size)
        total = sum(sizes)
        if total <= self.recent_bytes_max:
            return
        held = min((r.next_offset for r in self._readers), default=first)  # the oldest unread (docstring)
        cut = 0
        while total > self.recent_bytes_max and cut < len(sizes) - 1:
            start, chunk_entries = recent[cut]
            if start + len(chunk_entries) > held and total <= self.recent_hold_bytes_max:
                break
            total -= sizes[cut]
            cut += 1
        if cut:
            del recent[:cut], sizes[:cut]

    def forget_recent(self) -> None:
        self._recent, self._recent_bytes = [], []

    def recent_chunk(self, offset: int) -> tuple[int, list[Message]] | None:
        """(first offset, entries) of the remembered chunk holding `offset`, if it is remembered."""
        recent = self._recent
        if not recent or offset < recent[0][0] or offset >= self.next_offset:
            return None
        i = bisect.bisect_right(recent, offset, key=lambda r: r[0]) - 1
        return recent[i]

    def sync(self) -> int:
        """Make every appended chunk durable; returns the new `committed`."""
        target, fds = self.flush()
        make_durable(fds)
        return self.commit(target)

    def flush(self) -> tuple[int, list[int]]:
        """The first half of a sync that may finish on another thread: hand the buffered chunks to
        the OS and return the offset they reach with duplicates of the descriptors to fdatasync
        (`make_durable`; duplicates, so a roll-over that closes the files meanwhile is harmless).
        `commit(target)` only after they are synced."""
        target = self.next_offset
        if self._file is None or self._index is None or self.committed >= target:
            return target, []
        self._file.flush()
        return target, [os.dup(self._file.fileno())]  # the index is rebuilt from it (docstring)

    def commit(self, target: int) -> int:
        """Everything below `target` is on disk (its `flush`'s descriptors were synced)."""
        self.committed = max(self.committed, target)
        return self.committed

    def _roll(self, base: int, timestamp_ms: int) -> Segment:
        self._close_writer()
        seg = Segment(base, base, timestamp_ms, timestamp_ms, 0, 0)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._file = open(self.directory / f"{seg.stem}.segment", "ab")
        self._index = open(self.directory / f"{seg.stem}.index", "ab", buffering=0)  # readers search it at once
        self.segments.append(seg)
        return seg

    def _close_writer(self) -> None:
        for f in (self._file, self._index):
            if f is not None:
                f.flush()
                os.fdatasync(f.fileno())
                f.close()
        self._file = self._index = None

    def close(self) -> None:
        self._close_writer()

    def delete(self) -> None:
        """The stream is deleted: its directory goes, with whatever its owner kept there too."""
        self.close()
        self.segments = []
        shutil.rmtree(self.directory, ignore_errors=True)

    # -- retention ---------------------------------------------------------------------------------

    def retain(self, max_bytes: int | None, max_age_ms: int | None, now_ms: int) -> int:
        """Delete whole segments, oldest first, over max_bytes or older than max_age; never the
        segment being written. Returns how many went."""
        gone = 0
        total = self.bytes
        while len(self.segments) > 1:
            oldest = self.segments[0]
            over_size = max_bytes is not None and total > max_bytes
            too_old = max_age_ms is not None and oldest.last_ts < now_ms - max_age_ms
            if not (over_size or too_old):
                break
            self.segments.pop(0)
            total -= oldest.bytes
            self._unlink(oldest)
            gone += 1
        return gone

    def _unlink(self, seg: Segment) -> None:
        for suffix in (".segment", ".index"):
            try:
                os.unlink(self.directory / f"{seg.stem}{suffix}")
            except FileNotFoundError:
                pass

    # -- finding -----------------------------------------------------------------------------------

    def _segment_of(self, offset: int) -> int:
        """The index of the segment that holds `offset` (clamped to the log)."""
        i = bisect.bisect_right([s.base for s in self.segments], offset) - 1
        return max(0, i)

    def _rows(self, seg: Segment) -> tuple[BinaryIO, int]:
        f = open(self.directory / f"{seg.stem}.index", "rb")
        return f, seg.chunks

    def _row(self, f: BinaryIO, i: int) -> tuple[int, int, int]:
        f.seek(i * INDEX_ROW.size)
        return INDEX_ROW.unpack(f.read(INDEX_ROW.size))

    def chunk_at(self, offset: int) -> tuple[int, int, int] | None:
        """(segment index, position, first offset) of the chunk holding `offset`, by binary search
        of one index file; None past the end or in an empty log."""
        if not self.segments or offset >= self.next_offset:
            return None
        offset = max(offset, self.first_offset)
        si = self._segment_of(offset)
        f, n = self._rows(self.segments[si])
        with f:
            lo, hi = 0, n - 1  # the last row whose first offset <= offset
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if self._row(f, mid)[0] <= offset:
                    lo = mid
                else:
                    hi = mid - 1
            first, _, pos = self._row(f, lo)
        return si, pos, first

    def offset_at_time(self, timestamp_ms: int) -> int:
        """The first offset of the first chunk stamped at or after `timestamp_ms` (next_offset if none)."""
        for seg in self.segments:
            if seg.chunks and seg.last_ts >= timestamp_ms:
                f, n = self._rows(seg)
                with f:
                    lo, hi = 0, n - 1  # the first row stamped >= timestamp_ms
                    while lo < hi:
                        mid = (lo + hi) // 2
                        if self._row(f, mid)[1] >= timestamp_ms:
                            hi = mid
                        else:
                            lo = mid + 1
                    return self._row(f, lo)[0]
        return self.next_offset

    def reader(self, offset: int) -> Reader:
        reader = Reader(self, offset)
        self._readers.add(reader)
        return reader

    # -- recovery ----------------------------------------------------------------------------------

    @classmethod
    def open(cls, directory: Path, segment_bytes: int) -> StreamLog:
        log = cls(directory, segment_bytes)
        stems = sorted(p.stem for p in directory.glob("*.segment")) if directory.exists() else []
        for i, stem in enumerate(stems):
            last = i == len(stems) - 1
            seg = log._recover_last(int(stem)) if last else log._recover_closed(int(stem), int(stems[i + 1]))
            if seg is not None:
                log.segments.append(seg)
        if log.segments:
            seg = log.segments[-1]
            log._file = open(directory / f"{seg.stem}.segment", "ab")
            log._index = open(directory / f"{seg.stem}.index", "ab", buffering=0)
        log.committed = log.next_offset
        return log

    def _recover_closed(self, base: int, end: int) -> Segment:
        path = self.directory / f"{base:020d}.index"
        rows = path.stat().st_size // INDEX_ROW.size
        with open(path, "rb") as f:
            _, first_ts, _ = self._row(f, 0)
            last_first, last_ts, _ = self._row(f, rows - 1)
        self.last_chunk = last_first
        size = (self.directory / f"{base:020d}.segment").stat().st_size
        return Segment(base, end, first_ts, last_ts, size, rows)

    def _recover_last(self, base: int) -> Segment | None:
        seg_path = self.directory / f"{base:020d}.segment"
        idx_path = self.directory / f"{base:020d}.index"
        rows_raw = idx_path.read_bytes() if idx_path.exists() else b""
        rows = [INDEX_ROW.unpack_from(rows_raw, i * INDEX_ROW.size) for i in range(len(rows_raw) // INDEX_ROW.size)]
        with open(seg_path, "rb") as f:
            rows = _sound_rows(f, rows)
            # the last indexed chunk that is whole: where the forward check starts
            while rows and _chunk_at(f, rows[-1][2]) is None:
                rows.pop()
            pos = rows.pop()[2] if rows else 0  # that chunk is indexed again by the scan
            while True:
                header = _chunk_at(f, pos)
                if header is None:
                    break
                rows.append((header.first_offset, header.timestamp_ms, pos))
                pos += header.size
        with open(seg_path, "r+b") as f:
            f.truncate(pos)
            os.fsync(f.fileno())
        with open(idx_path, "wb") as f:
            f.write(b"".join(INDEX_ROW.pack(*r) for r in rows))
            os.fsync(f.fileno())
        if not rows:
            seg_path.unlink()
            idx_path.unlink()
            self.committed = max(self.committed, base)
            return None
        with open(seg_path, "rb") as f:
            last = _chunk_at(f, rows[-1][2])
        assert last is not None
        self.last_chunk = last.first_offset
        return Segment(base, last.next_offset, rows[0][1], rows[-1][1], pos, len(rows))


def _sound_rows(f: BinaryIO, rows: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """The rows of the last segment's index up to the first that is not its chunk's (the file's
    unsynced tail may come back as zeros, or with a page lost in between): each row's position
    past the one before, with a chunk header there of the row's first offset and timestamp. One
    header read per row; the chunks' CRCs are checked from the last row kept on only."""
    end = 0
    for i, (first, timestamp_ms, pos) in enumerate(rows):
        f.seek(pos)
        header = chunk.read_header(f.read(chunk.HEADER_BYTES)) if pos >= end else None
        if header is None or (header.first_offset, header.timestamp_ms) != (first, timestamp_ms):
            return rows[:i]
        end = pos + header.size
    return rows


def make_durable(fds: Sequence[int]) -> None:
    """fdatasync and close what `StreamLog.flush` handed out (any thread)."""
    for fd in fds:
        try:
            os.fdatasync(fd)
        finally:
            os.close(fd)


def _chunk_at(f: BinaryIO, pos: int) -> ChunkHeader | None:
    """The chunk header at `pos` if the whole chunk there checks (CRC and length), else None."""
    f.seek(pos)
    header = chunk.read_header(f.read(chunk.HEADER_BYTES))
    if header is None:
        return None
    return header if chunk.check(header, f.read(header.payload_bytes)) else None


class Reader:
    """One consumer's cursor: its own open segment file and position; reads whole chunks, hands
    out entries from `next_offset` on, never past the log's `committed`, as `Message`s whose
    msg_id is the offset (what a delivery carries, so a reader at the tail hands out slices of
    what the append built, with no work per message)."""

    def __init__(self, log: StreamLog, offset: int) -> None:
        self.log = log
        self.next_offset = max(offset, log.first_offset)
        self._file: BinaryIO | None = None
        self._seg_base = -1
        self._pos = 0
        self._chunk: tuple[ChunkHeader, list[Message]] | None = None  # the chunk being handed out

    def close(self) -> None:
        """The reader is done: its file closes and it holds no decoded chunks any more."""
        self._release()
        self.log._readers.discard(self)

    def _release(self) -> None:
        """Close the segment file (the next read opens the one it needs)."""
        self._chunk = None
        if self._file is not None:
            self._file.close()
            self._file = None

    def _seek(self) -> bool:
        """Open the segment holding next_offset at its chunk; False when there is nothing to read."""
        log = self.log
        found = log.chunk_at(self.next_offset)
        if found is None:
            return False
        si, pos, _ = found
        self._release()
        seg = log.segments[si]
        self._file = open(log.directory / f"{seg.stem}.segment", "rb")
        self._seg_base, self._pos = seg.base, pos
        return True

    def read(self, max_entries: int, upto: int | None = None) -> list[Message]:
        """Up to `max_entries` (at least one chunk's worth may be cut) committed entries from
        next_offset on, none at or past `upto` (a replicated stream's commit)."""
        out: list[Message] = []
        log = self.log
        if self.next_offset < log.first_offset:  # retention went past this reader
            self._release()
            self.next_offset = log.first_offset
        limit = log.committed if upto is None else min(upto, log.committed)
        while len(out) < max_entries and self.next_offset < limit:
            recent = log.recent_chunk(self.next_offset)
            if recent is not None:  # at the tail: no file read
                self._release()
                first, entries = recent
                self._take(out, first, entries, max_entries)
                continue
            if self._file is None and not self._seek():
                break
            header, entries = self._chunk if self._chunk is not None else self._read_chunk()
            if header is None:  # the end of this segment: the next one
                self._release()
                continue
            self._take(out, header.first_offset, entries, max_entries)
            if self.next_offset >= header.next_offset:
                self._pos += header.size
                self._chunk = None
            else:
                self._chunk = (header, entries)
        return out

    def _take(self, out: list[Message], first: int, entries: list[Message], max_entries: int) -> None:
        skip = self.next_offset - first
        assert skip >= 0, "a reader's position is inside the chunk it reads"
        take = entries[skip:skip + max_entries - len(out)]
        out += take
        self.next_offset += len(take)

    def _read_chunk(self) -> tuple[ChunkHeader | None, list[Message]]:
        assert self._file is not None
        self._file.seek(self._pos)
        header = chunk.read_header(self._file.read(chunk.HEADER_BYTES))
        if header is None:
            return None, []
        payload = self._file.read(header.payload_bytes)
        assert chunk.check(header, payload), f"chunk at {self._pos} of segment {self._seg_base} is corrupt"
        return header, chunk.messages(header, payload)
