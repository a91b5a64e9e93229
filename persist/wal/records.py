"""On-disk records of the Raft log: encoding, decoding and scanning a byte buffer.

Theory of operation: every durable thing the log writes (a WAL entry, a truncation marker, a
segment entry, a snapshot, a hard state) is one self-delimiting record:

    crc:u32 | type:u8 | member_len:u16 | index:u64 | term:u64 | payload_len:u32 | member | payload

little-endian, 27 header bytes. The CRC is CRC-32C (the crc32c package, hardware-accelerated: the
one checksum of everything warren keeps on disk, classic storage's framing included,
persist/classic/records.py); it covers everything after itself, so a torn, zero-filled or
bit-flipped record fails the check. (The format changed from zlib's CRC-32 to CRC-32C before
anything was released: logs written with the old one are not read.) `member` names the Raft member in the shared WAL
and is empty in a member's own files (segments, snapshot, hard state).

`scan(buf)` walks a buffer and returns the records of its longest valid prefix plus a `Cut`
describing what follows it, if anything (offset, bytes, reason, and whether it is all zeros: a
WAL file's preallocated space that no record reached). It never raises on bad input: a reader
decides what to do with a cut (recovery truncates the file there and logs a torn one). Everything
after the first bad record is cut, because lengths after it cannot be trusted. `Scanner` is the
same walk one record at a time, with payloads that are views into the buffer: WAL recovery
replays each record as it is found and copies only the commands it keeps, so a WAL file's
records are never all built at once (which left a recovered quorum host's heap with tens of MB
free between the entries it kept).

Record types: ENTRY (index, term, payload = command); TRUNCATE (index = first index dropped; term
and payload unused); SNAPSHOT (index, term, payload = floor:u64 + machine state); MEMBER_META
(index = floor, the first index the log may hold; term = current term; payload = voted_for: b""
for None, else b"=" + utf-8 name); RUN (a member's run of consecutive entries in the WAL: index =
the first entry's, term unused, payload = per entry `index:u64 | term:u64 | len:u32 | command`);
HARD_STATE (a member's term and vote in the WAL: index unused, term, payload as MEMBER_META's).

Why RUN: the WAL's hot path writes thousands of entries a second per member, and three CRC calls
plus a header per entry cost more than the fsync they share. A run has one header and one CRC,
and still says each entry's index, term and length. Its CRC covers the whole run, so a torn run
is cut whole, at the entry boundary before it; that loses nothing acknowledged, because a run is
written by one append and reported written only after the sync that covers all of it.
"""
from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from crc32c import crc32c

from raft.log import Entry

ENTRY = 1
TRUNCATE = 2
SNAPSHOT = 3
MEMBER_META = 4
RUN = 5
HARD_STATE = 6
_TYPES = frozenset((ENTRY, TRUNCATE, SNAPSHOT, MEMBER_META, RUN, HARD_STATE))

_HEADER = struct.Struct("<IBHQQI")
HEADER_BYTES = _HEADER.size
_RUN_ENTRY = struct.Struct("<QQI")
RUN_ENTRY_BYTES = _RUN_ENTRY.size
# Bounds that make a garbage length field look torn instead of asking for gigabytes.
MEMBER_BYTES_MAX = 1024
PAYLOAD_BYTES_MAX = 1 << 31


@dataclass(frozen=True, slots=True)
class Record:
    type: int
    member: str
    index: int
    term: int
    payload: bytes | memoryview  # a view from `Scanner(copy=False)`: valid while its buffer is
    offset: int  # where the record starts in the scanned buffer
    size: int  # bytes it occupies, header included


@dataclass(frozen=True, slots=True)
class Cut:
    """The part of a buffer that is not a valid record sequence. `blank`: it is all zero bytes,
    space written ahead that no record reached (a WAL file's preallocation), not a torn record."""

    offset: int
    size: int
    reason: str
    blank: bool = False


@dataclass(frozen=True, slots=True)
class ScanResult:
    records: list[Record]
    valid_bytes: int
    cut: Cut | None


def encode(rtype: int, index: int, term: int, payload: bytes = b"", member: bytes = b"") -> bytes:
    """One record. `member` is the utf-8 member id (already encoded, the WAL caches it)."""
    assert rtype in _TYPES and len(member) <= MEMBER_BYTES_MAX
    tail = _HEADER.pack(0, rtype, len(member), index, term, len(payload))[4:]
    crc = crc32c(payload, crc32c(member, crc32c(tail)))
    return b"".join((crc.to_bytes(4, "little"), tail, member, payload))


def encode_run(entries: list[Entry] | tuple[Entry, ...], member: bytes = b"") -> list[bytes]:
    """One RUN record for consecutive entries (one header, one CRC), as pieces to write back to
    back: the commands are not copied into a new buffer (here a 1 MiB copy per batch cost more
    than the CRC). `b"".join` of the pieces is the record."""
    pack = _RUN_ENTRY.pack
    parts: list[bytes] = [b"", member]
    add = parts.append
    size = 0
    for e in entries:
        add(pack(e.index, e.term, len(e.command)))
        add(e.command)
        size += len(e.command)
    size += RUN_ENTRY_BYTES * len(entries)
    assert len(member) <= MEMBER_BYTES_MAX and size <= PAYLOAD_BYTES_MAX
    tail = _HEADER.pack(0, RUN, len(member), entries[0].index, 0, size)[4:]
    crc = crc32c(tail)
    for part in parts[1:]:
        crc = crc32c(part, crc)
    parts[0] = crc.to_bytes(4, "little") + tail
    return parts


class BadRun(Exception):
    """A RUN record whose CRC holds but whose entries do not parse: a writer bug, not a tear."""


def run_entries(rec: Record, first: int = 0) -> list[Entry]:
    """The entries of a RUN record from index `first` on, checked to be consecutive from its
    index. Their commands are copies, so they outlive a view's buffer; the ones below `first`
    (under a member's snapshot) are checked but never copied."""
    payload, unpack, step = rec.payload, _RUN_ENTRY.unpack_from, RUN_ENTRY_BYTES
    out: list[Entry] = []
    pos, end, expect = 0, len(rec.payload), rec.index
    while pos < end:
        if end - pos < step:
            raise BadRun(f"run at {rec.offset}: short entry header")
        index, term, size = unpack(payload, pos)
        pos += step
        if index != expect or pos + size > end:
            raise BadRun(f"run at {rec.offset}: entry {index} (expected {expect}, {size} bytes)")
        if index >= first:
            out.append(Entry(index, term, bytes(payload[pos:pos + size])))
        pos += size
        expect += 1
    return out


def encode_hard_state(term: int, voted_for: str | None, member: bytes) -> bytes:
    return encode(HARD_STATE, 0, term, b"" if voted_for is None else b"=" + voted_for.encode(),
                  member)


def decode_hard_state(rec: Record) -> tuple[int, str | None]:
    return rec.term, (bytes(rec.payload[1:]).decode() if rec.payload else None)


def newer_hard_state(a: tuple[int, str | None], b: tuple[int, str | None]
                     ) -> tuple[int, str | None]:
    """The later of two saved hard states, whatever order they are found in: the term only
    grows, and within a term the vote only goes from None to one candidate (Raft §5.2)."""
    return max(a, b, key=lambda hs: (hs[0], hs[1] is not None))


def encode_meta(term: int, voted_for: str | None, floor: int) -> bytes:
    payload = b"" if voted_for is None else b"=" + voted_for.encode()
    return encode(MEMBER_META, floor, term, payload)


def decode_meta(rec: Record) -> tuple[int, str | None, int]:
    """(term, voted_for, floor)"""
    return rec.term, (rec.payload[1:].decode() if rec.payload else None), rec.index


def encode_snapshot(index: int, term: int, floor: int, data: bytes) -> bytes:
    return encode(SNAPSHOT, index, term, floor.to_bytes(8, "little") + data)


def decode_snapshot(rec: Record) -> tuple[int, int, int, bytes]:
    """(index, term, floor, data)"""
    return rec.index, rec.term, int.from_bytes(rec.payload[:8], "little"), rec.payload[8:]


class Scanner:
    """`for rec in Scanner(buf)`: the records of `buf`'s longest valid prefix, one at a time;
    once the walk ends, `valid_bytes` says where that prefix ends and `cut` what follows it
    (None if nothing). With `copy=False` each payload is a view into `buf`, valid while `buf`
    is: the caller copies what it keeps."""

    def __init__(self, buf: bytes | bytearray | memoryview, base_offset: int = 0,
                 copy: bool = True) -> None:
        self._view = memoryview(buf)
        self._base = base_offset
        self._copy = copy
        self.valid_bytes = 0
        self.cut: Cut | None = None

    def __iter__(self) -> Iterator[Record]:
        view, base, copy = self._view, self._base, self._copy
        end = len(view)
        pos = 0
        while pos < end:
            reason = _check(view, pos, end)
            if reason is not None:
                blank = bytes(view[pos:end]).count(0) == end - pos
                self.cut = Cut(base + pos, end - pos, reason, blank)
                break
            _crc, rtype, mlen, index, term, plen = _HEADER.unpack_from(view, pos)
            body = pos + HEADER_BYTES
            member = bytes(view[body:body + mlen]).decode("utf-8", "replace")
            payload = view[body + mlen:body + mlen + plen]
            size = HEADER_BYTES + mlen + plen
            yield Record(rtype, member, index, term, bytes(payload) if copy else payload,
                         base + pos, size)
            pos += size
            self.valid_bytes = pos


def scan(buf: bytes | bytearray | memoryview, base_offset: int = 0) -> ScanResult:
    """Records in the longest valid prefix of `buf`, and the cut after it (None if clean)."""
    scanner = Scanner(buf, base_offset)
    records = list(scanner)
    return ScanResult(records, scanner.valid_bytes, scanner.cut)


def _check(view: memoryview, pos: int, end: int) -> str | None:
    if end - pos < HEADER_BYTES:
        return "short header"
    crc, rtype, mlen, _index, _term, plen = _HEADER.unpack_from(view, pos)
    if mlen > MEMBER_BYTES_MAX or plen > PAYLOAD_BYTES_MAX:
        return "bad length"
    size = HEADER_BYTES + mlen + plen
    if end - pos < size:
        return "short record"
    if crc32c(view[pos + 4:pos + size]) != crc:
        return "bad crc"
    if rtype not in _TYPES:
        return "bad type"
    return None
