"""The queue index: one per durable queue, what the queue holds and each message's fate, on disk.

Theory of operation: a queue numbers its messages with increasing seq ids; seq s lives in segment
file `s // segment_entries`.idx (16384 entries per segment by default) in the queue's directory.
Segments are append-only runs of records (records.py framing, one CRC each) of three kinds:
  PUB  seq, flags (persistent, embedded, expires), expiry, size, body size, guid, [message]
  DEL  a batch of seqs delivered at least once
  ACK  a batch of seqs that left the queue for good (acked, purged, dropped)
A message smaller than `queue_index_embed_msgs_below` (4096 bytes of header + body) is embedded in
its PUB record; a larger one names its guid in the message store. `size` is header + body (what the
embed threshold and RAM accounting use), `body size` the body alone (what x-max-length-bytes
limits); `expiry` is the absolute expiry in wall-clock ms when the F_EXPIRES flag is set (a message
with a TTL), so a TTL keeps running while the node is down, as in RabbitMQ. Records are gathered in
memory per segment and written (one append per touched segment) by `sync()`, which then makes them
durable with one fdatasync per touched segment: the group commit the queue confirms on. So a
message costs no syscall of its own however few share a commit (at 1,000 msg/s a commit covers
one: a PUB and a DEL were two appends and two fstats per message, ~40 % of the queue host's time
taking a publish). Nothing unsynced is promised, so records lost from memory by a crash are what
the recovery rules already allow; what is gathered is written early when it passes
`pending_bytes_max` (memory stays bounded whatever the sync cadence) and before every read.

A segment whose every entry is acked is deleted at the next sync (its acks need not be durable
first: if the removal is lost, the messages come back redelivered, which the recovery rules allow),
except the one the next publish goes to: a queue whose consumers keep up empties at nearly every
commit, and deleting and creating that file each time cost a directory sync for each. That one is
cut back to nothing instead once it holds more than `empty_head_bytes_max`, so a drained queue
keeps at most that much on disk (recovery drops it if it is still empty then).

Transient messages are only written here when the queue pages them out; they are live for the run
that wrote them (seq >= `run_start`) and invisible to every later run.

Recovery: a clean `close()` writes recovery terms (`clean.terms`: next seq, live counts, bytes and
body bytes per segment) and the next `recover()` trusts them without reading a segment, then deletes
them so that a crash after that is never mistaken for a clean stop. Without terms (a crash), every
segment is scanned, a torn tail is cut (and logged), entries whose store body is missing are acked
(and logged), and every surviving message counts as delivered before (`delivered_below`), because
the DEL records of the last interval may be lost.

Left out: a separate journal (we append to segments directly; the cost is one fsync per touched
segment per batch instead of one).
"""
from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import structlog

from persist.classic.msg_store import read_spans
from persist.classic.records import FRAME_BYTES, frame, scan
from persist.disk import Disk, write_atomic

SEGMENT_ENTRIES = 16384
pending_bytes_max = 256 * 1024  # records gathered in memory before they are written without a sync
empty_head_bytes_max = 1024 * 1024  # an empty segment the next publish goes to is cut back above this
TERMS_FILE = "clean.terms"
PUB, DEL, ACK = 1, 2, 3
F_PERSISTENT, F_EMBEDDED, F_EXPIRES = 1, 2, 4

_PUB = struct.Struct("<BQBQIIB")  # type, seq, flags, expiry, size, body size, guid_len
_SEQS = struct.Struct("<BI")  # type, count
_TERMS = struct.Struct("<QQI")  # next_seq, delivered_below, segments
_SEG_TERMS = struct.Struct("<IIQQ")  # segment, live persistent, their bytes, their body bytes

log = structlog.get_logger("warren.persist.queue_index")

# (seq, persistent, guid or None, size, embedded body location or None, delivered before,
#  body size, expiry in ms or None)
IndexEntry = tuple[int, bool, bytes | None, int, tuple[int, int, int] | None, bool, int, int | None]
# What `publish` takes: (seq, persistent, guid or None, size, message payload parts if embedded,
#  body size, expiry in ms or None)
PubRecord = tuple[int, bool, bytes | None, int, tuple[bytes, ...] | None, int, int | None]
# What `ack` takes: (seq, persistent, size, body size)
AckRecord = tuple[int, bool, int, int]
# A parsed PUB: (persistent, guid, size, embedded location, body size, expiry or None)
_Pub = tuple[bool, bytes | None, int, tuple[int, int, int] | None, int, int | None]


class CorruptSegment(Exception):
    """A segment that was valid when recovered no longer reads back (a media error)."""


@dataclass(frozen=True, slots=True)
class IndexRecovery:
    clean: bool
    messages: int  # live persistent messages
    bytes: int  # their header + body bytes
    body_bytes: int  # their body bytes
    lo: int  # lowest seq that may be live
    next_seq: int
    torn_bytes: int  # cut from torn tails
    dropped: int  # entries whose store body was missing


class QueueIndex:
    def __init__(self, disk: Disk, directory: str, segment_entries: int = SEGMENT_ENTRIES) -> None:
        assert segment_entries >= 1
        self.disk = disk
        self.dir = directory
        self.n = segment_entries
        # segment -> [live persistent, live transient, live persistent bytes, ... body bytes]
        self._live: dict[int, list[int]] = {}
        self._sizes: dict[int, int] = {}  # bytes in each existing segment file, gathered ones included
        self._pending: dict[int, bytearray] = {}  # records gathered for each segment, not yet written
        self._pending_bytes = 0
        self._dirty: set[int] = set()
        self._new_names = False
        self.run_start = 0
        self.delivered_below = 0
        self.next_seq = 0

    def _path(self, seg: int) -> str:
        return f"{self.dir}/{seg}.idx"

    # -- recovery --------------------------------------------------------------------------------
    def recover(self, check_guid: Callable[[bytes], bool] | None = None,
                must_scan: bool = False) -> IndexRecovery:
        """Load the index. When it scans, `check_guid(guid)` (if given) says whether the store
        holds a body (and may count the reference); `must_scan` scans even after a clean stop
        (the store lost its reference counts and needs them re-declared)."""
        self.disk.makedirs(self.dir)
        terms = self._load_terms()
        if terms is not None and not must_scan:
            result = self._apply_terms(terms)
        else:
            result = self._scan(check_guid, terms)
        self.run_start = self.next_seq
        empty = [seg for seg, live in self._live.items() if not live[0]]
        for seg in empty:
            self._drop_segment(seg)
        if empty:
            self.disk.fsync_dir(self.dir)
        return result

    def _segments_on_disk(self) -> list[int]:
        return sorted(int(n[:-4]) for n in self.disk.listdir(self.dir) if n.endswith(".idx"))

    def _load_terms(self) -> tuple[int, int, dict[int, tuple[int, int, int]]] | None:
        path = f"{self.dir}/{TERMS_FILE}"
        if not self.disk.exists(path):
            return None
        data = self.disk.read(path)
        self.disk.remove(path)
        self.disk.fsync_dir(self.dir)
        spans, _valid, cut = scan(data)
        if cut is not None or len(spans) != 1:
            log.warning("queue_index_terms_invalid", dir=self.dir)
            return None
        pos = spans[0][0]
        next_seq, delivered_below, nsegs = _TERMS.unpack_from(data, pos)
        pos += _TERMS.size
        segs = {}
        for _ in range(nsegs):
            seg, count, nbytes, body_bytes = _SEG_TERMS.unpack_from(data, pos)
            pos += _SEG_TERMS.size
            segs[seg] = (count, nbytes, body_bytes)
        return next_seq, delivered_below, segs

    def _apply_terms(self, terms: tuple[int, int, dict[int, tuple[int, int, int]]]) -> IndexRecovery:
        self.next_seq, self.delivered_below, segs = terms
        on_disk = set(self._segments_on_disk())
        for seg, (count, nbytes, body_bytes) in segs.items():
            if seg in on_disk:
                self._live[seg] = [count, 0, nbytes, body_bytes]
        for seg in on_disk:
            self._sizes[seg] = self.disk.size(self._path(seg))
            self._live.setdefault(seg, [0, 0, 0, 0])
        return self._result(True, 0, 0)

    def _scan(self, check_guid: Callable[[bytes], bool] | None,
              terms: tuple[int, int, dict[int, tuple[int, int, int]]] | None) -> IndexRecovery:
        torn = dropped = 0
        next_seq = terms[0] if terms else 0
        for seg in self._segments_on_disk():
            path = self._path(seg)
            data = self.disk.read(path)
            spans, valid, cut = scan(data)
            if cut is not None:
                log.warning("queue_index_torn_tail_cut", path=path, offset=cut.offset,
                            bytes=cut.size, reason=cut.reason)
                torn += cut.size
                self.disk.truncate(path, valid)
                self.disk.sync(path)
            self._sizes[seg] = valid
            pubs, delivered, acked = _parse(data, spans, seg)
            live = self._live[seg] = [0, 0, 0, 0]
            missing = []
            for seq, (persistent, guid, size, _loc, body_size, _expiry) in pubs.items():
                next_seq = max(next_seq, seq + 1)
                if not persistent or seq in acked:
                    continue
                if guid is not None and check_guid is not None and not check_guid(guid):
                    missing.append(seq)
                    continue
                live[0] += 1
                live[2] += size
                live[3] += body_size
            if missing:
                log.warning("queue_index_body_missing", path=path, messages=len(missing))
                self._append_seqs(ACK, missing)
                dropped += len(missing)
        self.next_seq = next_seq
        self.delivered_below = terms[1] if terms else next_seq
        if self._dirty:
            self.sync()
        log.info("queue_index_recovered_by_scan", dir=self.dir, clean=terms is not None,
                 segments=len(self._live), torn_bytes=torn, dropped=dropped)
        return self._result(terms is not None, torn, dropped)

    def _result(self, clean: bool, torn: int, dropped: int) -> IndexRecovery:
        live = [seg for seg, v in self._live.items() if v[0]]
        return IndexRecovery(clean, sum(v[0] for v in self._live.values()),
                             sum(v[2] for v in self._live.values()),
                             sum(v[3] for v in self._live.values()),
                             min(live) * self.n if live else self.next_seq, self.next_seq,
                             torn, dropped)

    # -- the data path ---------------------------------------------------------------------------
    def publish(self, records: list[PubRecord]) -> list[tuple[int, int, int] | None]:
        """Append PUB records; return each embedded body's (segment, offset, length), else None."""
        bufs: dict[int, bytearray] = {}
        locs: list[tuple[int, int, int] | None] = []
        n = self.n
        for seq, persistent, guid, size, payload, body_size, expiry in records:
            seg = seq // n
            buf = bufs.get(seg)
            if buf is None:
                buf = bufs[seg] = bytearray()
                if seg not in self._sizes:
                    self.disk.open(self._path(seg))
                    self._sizes[seg] = 0
                    self._live.setdefault(seg, [0, 0, 0, 0])
                    self._new_names = True
            g = guid or b""
            flags = ((F_PERSISTENT if persistent else 0) | (F_EMBEDDED if payload is not None else 0)
                     | (F_EXPIRES if expiry is not None else 0))
            head = _PUB.pack(PUB, seq, flags, expiry or 0, size, body_size, len(g))
            if payload is None:
                buf += frame(head, g)
                locs.append(None)
            else:
                offset = self._sizes[seg] + len(buf) + FRAME_BYTES + len(head) + len(g)
                buf += frame(head, g, *payload)
                locs.append((seg, offset, sum([len(p) for p in payload])))
            live = self._live[seg]
            if persistent:
                live[0] += 1
                live[2] += size
                live[3] += body_size
            else:
                live[1] += 1
            if seq >= self.next_seq:
                self.next_seq = seq + 1
        for seg, buf in bufs.items():
            self._write(seg, buf)
        return locs

    def deliver(self, seqs: Iterable[int]) -> None:
        """Record that these (indexed) messages were delivered at least once."""
        self._append_seqs(DEL, list(seqs))

    def ack(self, entries: Iterable[AckRecord]) -> None:
        """Record that these indexed (seq, persistent, size, body size) messages left the queue
        for good."""
        seqs = []
        for seq, persistent, size, body_size in entries:
            live = self._live[seq // self.n]
            if persistent:
                live[0] -= 1
                live[2] -= size
                live[3] -= body_size
            else:
                live[1] -= 1
            assert live[0] >= 0 and live[1] >= 0
            seqs.append(seq)
        self._append_seqs(ACK, seqs)

    def _append_seqs(self, kind: int, seqs: list[int]) -> None:
        by_seg: dict[int, list[int]] = {}
        for seq in seqs:
            by_seg.setdefault(seq // self.n, []).append(seq)
        for seg, group in by_seg.items():
            if seg in self._sizes:
                body = _SEQS.pack(kind, len(group)) + struct.pack(f"<{len(group)}Q", *group)
                self._write(seg, frame(body))

    def _write(self, seg: int, data: bytes | bytearray) -> None:
        pending = self._pending.get(seg)
        if pending is None:
            self._pending[seg] = bytearray(data)
        else:
            pending += data
        self._sizes[seg] += len(data)
        self._pending_bytes += len(data)
        self._dirty.add(seg)
        if self._pending_bytes > pending_bytes_max:
            self.write_pending()

    def write_pending(self) -> None:
        """Append what was gathered, one write per segment (to the OS: a kill -9 keeps it, and
        only its sync waits)."""
        for seg, data in self._pending.items():
            self.disk.append(self._path(seg), bytes(data))
        self._pending.clear()
        self._pending_bytes = 0

    def sync(self) -> None:
        """Make every record written so far durable; delete segments that hold nothing live."""
        head = self.next_seq // self.n
        empty = [seg for seg, live in self._live.items() if not live[0] and not live[1] and seg != head]
        for seg in empty:
            self._drop_segment(seg)
        live = self._live.get(head)
        if live is not None and not live[0] and not live[1] and self._sizes[head] > empty_head_bytes_max:
            self._cut_back(head)
        self.write_pending()
        for seg in sorted(self._dirty):
            self.disk.sync(self._path(seg))
        self._dirty.clear()
        if self._new_names or empty:
            self.disk.fsync_dir(self.dir)
            self._new_names = False

    def _cut_back(self, seg: int) -> None:
        """Empty the file of segment `seg`, whose every entry is acked (the next sync covers it)."""
        self._discard_pending(seg)
        self.disk.truncate(self._path(seg), 0)
        self._sizes[seg] = 0
        self._dirty.add(seg)

    def _discard_pending(self, seg: int) -> None:
        """Forget what was gathered for segment `seg` and not yet written."""
        dropped = self._pending.pop(seg, None)
        if dropped is not None:
            self._pending_bytes -= len(dropped)

    def _drop_segment(self, seg: int) -> None:
        del self._live[seg]
        self._discard_pending(seg)
        if self._sizes.pop(seg, None) is not None:
            self.disk.remove(self._path(seg))
        self._dirty.discard(seg)

    def read(self, lo: int, hi: int) -> tuple[list[IndexEntry], int]:
        """Live entries with lo <= seq < hi from ONE segment (lo's), and where the next read starts."""
        seg = lo // self.n
        upto = min(hi, (seg + 1) * self.n)
        if seg not in self._sizes:
            return [], upto
        self.write_pending()
        data = self.disk.read(self._path(seg), 0, self._sizes[seg])
        spans, _valid, cut = scan(data)
        if cut is not None:
            raise CorruptSegment(f"{self._path(seg)}: {cut}")
        pubs, delivered, acked = _parse(data, spans, seg)
        out: list[IndexEntry] = []
        run_start, delivered_below = self.run_start, self.delivered_below
        for seq in sorted(pubs):
            if seq < lo or seq >= upto or seq in acked:
                continue
            persistent, guid, size, loc, body_size, expiry = pubs[seq]
            if not persistent and seq < run_start:
                continue
            out.append((seq, persistent, guid, size, loc,
                        seq in delivered or seq < delivered_below, body_size, expiry))
        return out, upto

    def read_bodies(self, locs: list[tuple[int, int, int]]) -> list[bytes | memoryview]:
        """Embedded message payloads at these (segment, offset, length) locations, in order."""
        by_seg: dict[int, list[tuple[int, int, int]]] = {}
        for i, (seg, offset, length) in enumerate(locs):
            by_seg.setdefault(seg, []).append((offset, length, i))
        out: list[bytes | memoryview] = [b""] * len(locs)
        self.write_pending()
        for seg, wanted in by_seg.items():
            read_spans(self.disk, self._path(seg), wanted, out)
        return out

    # -- stop ------------------------------------------------------------------------------------
    def close(self) -> None:
        """Clean stop: sync and write the recovery terms."""
        self.sync()
        segs = sorted((seg, v[0], v[2], v[3]) for seg, v in self._live.items() if v[0])
        data = _TERMS.pack(self.next_seq, self.delivered_below, len(segs)) + b"".join(
            _SEG_TERMS.pack(*s) for s in segs)
        write_atomic(self.disk, f"{self.dir}/{TERMS_FILE}", frame(data))

    def delete(self) -> None:
        """Remove every file of this index (the queue was deleted). Not synced: a removal a crash
        undoes leaves files that no queue names, which recovery deletes (host_storage.py)."""
        for name in self.disk.listdir(self.dir):
            self.disk.remove(f"{self.dir}/{name}")
        self._live.clear()
        self._sizes.clear()
        self._pending.clear()
        self._pending_bytes = 0
        self._dirty.clear()

    @property
    def live_persistent(self) -> int:
        """Persistent messages published and not yet acked (ready or delivered)."""
        return sum([live[0] for live in self._live.values()])

    @property
    def segments(self) -> list[int]:
        return sorted(self._sizes)


def _parse(data: bytes, spans: list[tuple[int, int]], seg: int
           ) -> tuple[dict[int, _Pub], set[int], set[int]]:
    """(seq -> (persistent, guid, size, embedded location, body size, expiry), delivered seqs,
    acked seqs)."""
    pubs: dict[int, _Pub] = {}
    delivered: set[int] = set()
    acked: set[int] = set()
    unpack_pub = _PUB.unpack_from
    for start, length in spans:
        kind = data[start]
        if kind == PUB:
            _k, seq, flags, expiry, size, body_size, glen = unpack_pub(data, start)
            pos = start + _PUB.size
            guid = bytes(data[pos:pos + glen]) if glen else None
            loc = None
            if flags & F_EMBEDDED:
                loc = (seg, pos + glen, length - _PUB.size - glen)
            pubs[seq] = (bool(flags & F_PERSISTENT), guid, size, loc, body_size,
                         expiry if flags & F_EXPIRES else None)
        else:
            _k, count = _SEQS.unpack_from(data, start)
            seqs = struct.unpack_from(f"<{count}Q", data, start + _SEQS.size)
            (delivered if kind == DEL else acked).update(seqs)
    return pubs, delivered, acked
