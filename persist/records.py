"""On-disk records of the Raft log: encoding, decoding and scanning a byte buffer.

Theory of operation: every durable thing the log writes (a WAL entry, a truncation marker, a
segment entry, a snapshot, a hard state) is one self-delimiting record:

    crc32:u32 | type:u8 | member_len:u16 | index:u64 | term:u64 | payload_len:u32 | member | payload

little-endian, 27 header bytes. The CRC (zlib.crc32) covers everything after itself, so a torn,
zero-filled or bit-flipped record fails the check. `member` names the Raft member in the shared WAL
and is empty in a member's own files (segments, snapshot, hard state).

`scan(buf)` walks a buffer and returns the records of its longest valid prefix plus a `Cut`
describing what follows it, if anything (offset, bytes, reason). It never raises on bad input: a
reader decides what to do with a cut (recovery truncates the file there and logs it). Everything
after the first bad record is cut, because lengths after it cannot be trusted.

Record types: ENTRY (index, term, payload = command); TRUNCATE (index = first index dropped; term
and payload unused); SNAPSHOT (index, term, payload = floor:u64 + machine state); MEMBER_META
(index = floor, the first index the log may hold; term = current term; payload = voted_for: b""
for None, else b"=" + utf-8 name).
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from persist.raft.log import Entry

ENTRY = 1
TRUNCATE = 2
SNAPSHOT = 3
MEMBER_META = 4
_TYPES = frozenset((ENTRY, TRUNCATE, SNAPSHOT, MEMBER_META))

_HEADER = struct.Struct("<IBHQQI")
HEADER_BYTES = _HEADER.size
# Bounds that make a garbage length field look torn instead of asking for gigabytes.
MEMBER_BYTES_MAX = 1024
PAYLOAD_BYTES_MAX = 1 << 31


@dataclass(frozen=True, slots=True)
class Record:
    type: int
    member: str
    index: int
    term: int
    payload: bytes
    offset: int  # where the record starts in the scanned buffer
    size: int  # bytes it occupies, header included


@dataclass(frozen=True, slots=True)
class Cut:
    """The part of a buffer that is not a valid record sequence."""

    offset: int
    size: int
    reason: str


@dataclass(frozen=True, slots=True)
class ScanResult:
    records: list[Record]
    valid_bytes: int
    cut: Cut | None


def encode(rtype: int, index: int, term: int, payload: bytes = b"", member: bytes = b"") -> bytes:
    """One record. `member` is the utf-8 member id (already encoded, the WAL caches it)."""
    assert rtype in _TYPES and len(member) <= MEMBER_BYTES_MAX
    tail = _HEADER.pack(0, rtype, len(member), index, term, len(payload))[4:]
    crc = zlib.crc32(payload, zlib.crc32(member, zlib.crc32(tail)))
    return b"".join((crc.to_bytes(4, "little"), tail, member, payload))


def encode_entries(entries: list[Entry] | tuple[Entry, ...], member: bytes = b"") -> bytes:
    return b"".join([encode(ENTRY, e.index, e.term, e.command, member) for e in entries])


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


def scan(buf: bytes | bytearray | memoryview, base_offset: int = 0) -> ScanResult:
    """Records in the longest valid prefix of `buf`, and the cut after it (None if clean)."""
    view = memoryview(buf)
    end = len(view)
    pos = 0
    records: list[Record] = []
    while pos < end:
        reason = _check(view, pos, end)
        if reason is not None:
            return ScanResult(records, pos, Cut(base_offset + pos, end - pos, reason))
        _crc, rtype, mlen, index, term, plen = _HEADER.unpack_from(view, pos)
        body = pos + HEADER_BYTES
        member = bytes(view[body:body + mlen]).decode("utf-8", "replace")
        payload = bytes(view[body + mlen:body + mlen + plen])
        size = HEADER_BYTES + mlen + plen
        records.append(Record(rtype, member, index, term, payload, base_offset + pos, size))
        pos += size
    return ScanResult(records, pos, None)


def _check(view: memoryview, pos: int, end: int) -> str | None:
    if end - pos < HEADER_BYTES:
        return "short header"
    crc, rtype, mlen, _index, _term, plen = _HEADER.unpack_from(view, pos)
    if mlen > MEMBER_BYTES_MAX or plen > PAYLOAD_BYTES_MAX:
        return "bad length"
    size = HEADER_BYTES + mlen + plen
    if end - pos < size:
        return "short record"
    if zlib.crc32(view[pos + 4:pos + size]) != crc:
        return "bad crc"
    if rtype not in _TYPES:
        return "bad type"
    return None
