"""Adding `x-stream-offset` to a message's raw content header, without decoding the rest.

Theory of operation: every delivery from a stream carries its offset in the `headers` table, as
RabbitMQ's do. The offset is known when the stream appends the message, so the header is stamped
once, then, and what the log stores is what every delivery sends (no per-delivery work); a batch
whose messages share a header splits it once (`split`) and adds only each offset's eight bytes. The
content header payload is class id, weight, body size (12 bytes), the property flags (bit 15
content-type, 14 content-encoding, 13 headers), then the present properties in order; only the two
short strings before `headers` are skipped, and the entry (shortstr key, 'l', int64) is appended
to an existing table or a new table is put in with its flag set. A header with a continued flag
word (bit 0, no AMQP 0-9-1 client sends one) is decoded and re-encoded instead.
"""
from __future__ import annotations

import struct
from typing import Sequence

from persist.classic.message import Message
from persist.stream import chunk
from wire.field_types import Int64
from wire.properties import HEADER_PROPS_OFFSET, BasicProperties

HEADERS_FLAG = 0x2000
_BEFORE_HEADERS = (0x8000, 0x4000)  # content-type, content-encoding: short strings
_ENTRY_PREFIX = b"\x0fx-stream-offsetl"
OFFSET = _LONGLONG = struct.Struct(">q")  # the offset's eight bytes in a stamped header
_LONG = struct.Struct(">I")


def stamp(header: bytes, offset: int) -> bytes:
    """`header` with x-stream-offset = `offset` (a signed 64-bit 'l' field, as RabbitMQ sends)."""
    prefix, suffix = split(header)
    return prefix + _LONGLONG.pack(offset) + suffix


def stamped_chunk(first_offset: int, timestamp_ms: int,
                  batch: Sequence[tuple[int, str, str, bytes, bytes]]) -> tuple[bytes, list[Message]]:
    """A publish batch ((seq, exchange, routing key, header, body) each) as one encoded chunk whose
    entries start at `first_offset`, and the same entries as the deliveries a consumer is handed.

    The chunk's payload is built here rather than by `chunk.encode`, so that what a batch shares
    is done once per batch: a header is split once, and an entry's lead (lengths, names) and the
    stamped header's prefix are one piece; per message there is the offset's eight bytes, the
    stamped header (what deliveries send) and four pieces of the payload. The bytes are those
    `chunk.encode` writes for the stamped entries."""
    leads: dict[tuple[bytes, str, str, int], tuple[bytes, bytes, bytes]] = {}
    parts: list[bytes] = []
    out: list[Message] = []
    deliver, pack, new = out.append, _LONGLONG.pack, tuple.__new__  # new: a Message without NamedTuple's slow __new__
    offset = first_offset
    for _, exchange, routing_key, header, body in batch:
        key = (header, exchange, routing_key, len(body))
        known = leads.get(key)
        if known is None:
            prefix, suffix = split(header)
            lead = chunk.entry_lead(exchange.encode(), routing_key.encode(), len(prefix) + 8 + len(suffix), len(body))
            known = leads[key] = (lead + prefix, prefix, suffix)
        lead, prefix, suffix = known
        stamp8 = pack(offset)
        deliver(new(Message, (offset, False, exchange, routing_key, prefix + stamp8 + suffix, body)))
        parts += (lead, stamp8, suffix, body)
        offset += 1
    return chunk.seal(first_offset, timestamp_ms, len(out), b"".join(parts)), out


def split(header: bytes) -> tuple[bytes, bytes]:
    """What comes before and after the offset's eight bytes in the stamped `header`: the same for
    every offset, so a batch of messages with one header splits it once."""
    flags = (header[HEADER_PROPS_OFFSET] << 8) | header[HEADER_PROPS_OFFSET + 1]
    if flags & 1:
        stamped = _stamp_decoded(header, 0)
        at = stamped.rindex(_ENTRY_PREFIX) + len(_ENTRY_PREFIX)
        return stamped[:at], stamped[at + 8:]
    pos = HEADER_PROPS_OFFSET + 2
    for bit in _BEFORE_HEADERS:
        if flags & bit:
            pos += 1 + header[pos]
    entry_bytes = len(_ENTRY_PREFIX) + 8
    if flags & HEADERS_FLAG:
        (size,) = _LONG.unpack_from(header, pos)
        end = pos + 4 + size
        return header[:pos] + _LONG.pack(size + entry_bytes) + header[pos + 4:end] + _ENTRY_PREFIX, header[end:]
    flags |= HEADERS_FLAG
    return (header[:HEADER_PROPS_OFFSET] + bytes((flags >> 8, flags & 0xFF)) + header[HEADER_PROPS_OFFSET + 2:pos]
            + _LONG.pack(entry_bytes) + _ENTRY_PREFIX, header[pos:])


def _stamp_decoded(header: bytes, offset: int) -> bytes:
    props = BasicProperties.decode(header, HEADER_PROPS_OFFSET)
    props.headers = {**(props.headers or {}), "x-stream-offset": Int64(offset)}
    return header[:HEADER_PROPS_OFFSET] + props.encode()
