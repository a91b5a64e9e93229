"""A stream's on-disk chunk: a batch of entries with one header, a length and a CRC-32C.

Theory of operation: a stream appends what one publish batch brought as one chunk, as Osiris
does, so the per-message cost on disk is the entry's own few bytes and a chunk is the unit of
everything else: the index has one row per chunk, a reader reads a chunk at a time, replication
ships chunks. A chunk is

    header  <4sIIQqI  magic, payload length, CRC-32C of the payload, first offset, timestamp ms, entries
    payload entries, each <BBII exchange length, routing key length, content header length, body
            length, then those four byte strings

The timestamp is the time the chunk was written (the leader's wall clock), what a consumer's
timestamp offset and x-max-age compare against. `read_chunk` refuses a chunk whose magic, length
or CRC does not hold: a torn tail after a crash is found and cut by the log, never read as data.
"""
from __future__ import annotations

import struct
from typing import NamedTuple, Sequence

from crc32c import crc32c

from persist.classic.message import Message

MAGIC = b"WSC1"
HEADER = struct.Struct("<4sIIQqI")
ENTRY = struct.Struct("<BBII")
HEADER_BYTES = HEADER.size


class Entry(NamedTuple):
    exchange: str
    routing_key: str
    header: bytes  # the AMQP content header payload
    body: bytes


class ChunkHeader(NamedTuple):
    payload_bytes: int
    crc: int
    first_offset: int
    timestamp_ms: int
    count: int

    @property
    def size(self) -> int:
        return HEADER_BYTES + self.payload_bytes

    @property
    def next_offset(self) -> int:
        return self.first_offset + self.count


def encode(first_offset: int, timestamp_ms: int, entries: Sequence[Entry]) -> bytes:
    assert entries, "a chunk holds at least one entry"
    parts: list[bytes] = []
    for exchange, routing_key, header, body in entries:
        parts += (entry_lead(exchange.encode(), routing_key.encode(), len(header), len(body)), header, body)
    return seal(first_offset, timestamp_ms, len(entries), b"".join(parts))


def entry_lead(exchange: bytes, routing_key: bytes, header_bytes: int, body_bytes: int) -> bytes:
    """What precedes an entry's content header in a payload: its lengths and its two names (a
    writer that builds the payload itself, actors/stream/header.py, makes it once per batch)."""
    return ENTRY.pack(len(exchange), len(routing_key), header_bytes, body_bytes) + exchange + routing_key


def seal(first_offset: int, timestamp_ms: int, count: int, payload: bytes) -> bytes:
    """The chunk of `count` entries whose encoded payload is `payload`: its header (length, CRC-32C
    of the whole payload, once per chunk) and the payload."""
    assert count, "a chunk holds at least one entry"
    return HEADER.pack(MAGIC, len(payload), crc32c(payload), first_offset, timestamp_ms, count) + payload


def read_header(buf: bytes) -> ChunkHeader | None:
    """The header at the start of `buf`, None when it is short or not a chunk header."""
    if len(buf) < HEADER_BYTES:
        return None
    magic, *fields = HEADER.unpack_from(buf)
    return ChunkHeader(*fields) if magic == MAGIC else None


def check(header: ChunkHeader, payload: bytes) -> bool:
    return len(payload) == header.payload_bytes and crc32c(payload) == header.crc


def decode(header: ChunkHeader, payload: bytes) -> list[Entry]:
    """The chunk's entries as they were appended."""
    return [Entry(*m[2:]) for m in messages(header, payload)]


def messages(header: ChunkHeader, payload: bytes) -> list[Message]:
    """The chunk's entries as a consumer is handed them: each a `Message` whose msg_id is its offset."""
    out: list[Message] = []
    pos, unpack, size, first = 0, ENTRY.unpack_from, ENTRY.size, header.first_offset
    new = tuple.__new__  # a Message without NamedTuple's slow __new__
    for offset in range(first, first + header.count):
        xl, rkl, hl, bl = unpack(payload, pos)
        pos += size
        x = payload[pos:pos + xl].decode()
        pos += xl
        rk = payload[pos:pos + rkl].decode()
        pos += rkl
        h = payload[pos:pos + hl]
        pos += hl
        out.append(new(Message, (offset, False, x, rk, h, payload[pos:pos + bl])))
        pos += bl
    assert pos == len(payload), "a chunk's entries fill its payload"
    return out


def body_bytes(entries: Sequence[Entry]) -> int:
    return sum(len(e.body) for e in entries)
