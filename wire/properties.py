"""Basic content properties and the content header frame payload.

Theory of operation: a content header payload is class-id (short), weight (short, always 0),
body-size (longlong), then a property flag word and the present properties in spec order
(`spec.BASIC_PROPERTIES`; the first property is flag bit 15, the last bit 2, bit 0 announces another
flag word). The broker never re-encodes a message's header: it keeps the payload bytes it received
and only peeks into them - `parse_content_header` for size, `read_delivery_mode` for persistence.
`BasicProperties` is for the broker's own messages and for tests. Decoding raises one of
`codec.DECODE_ERRORS` on malformed input, as every decoder in wire/ does.
"""
from __future__ import annotations

import struct
from typing import Any

from wire import spec
from wire.codec import (DECODE_ERRORS, Buffer, DecodeError, decode_longlong, decode_shortstr, decode_table,
                        encode_longlong, encode_shortstr, encode_table, skip_table)

_HEADER = struct.Struct(">HHQ")
_FLAGS = struct.Struct(">H")
_LONG = struct.Struct(">I")

HEADER_PROPS_OFFSET = 12  # class-id, weight, body-size
DELIVERY_MODE_FLAG = 1 << 12
_CONTENT_TYPE_FLAG = 1 << 15
_CONTENT_ENCODING_FLAG = 1 << 14
_HEADERS_FLAG = 1 << 13

_NAMES = tuple(f.name for f in spec.BASIC_PROPERTIES)
_FLAG_BITS = tuple(1 << (15 - i) for i in range(len(_NAMES)))


def _octet(buf: Buffer, offset: int) -> tuple[int, int]:
    return buf[offset], offset + 1


_DECODERS = {spec.SHORTSTR: decode_shortstr, spec.TABLE: decode_table, spec.OCTET: _octet,
             spec.TIMESTAMP: decode_longlong}
_ENCODERS = {spec.SHORTSTR: encode_shortstr, spec.TABLE: encode_table,
             spec.OCTET: lambda v: bytes((v,)), spec.TIMESTAMP: encode_longlong}
_FIELD_CODECS = tuple((f.name, _DECODERS[f.type], _ENCODERS[f.type]) for f in spec.BASIC_PROPERTIES)


class BasicProperties:
    """The 14 basic properties; None means absent (its flag bit clear)."""

    __slots__ = _NAMES

    def __init__(
        self,
        content_type: str | None = None,
        content_encoding: str | None = None,
        headers: dict[str, Any] | None = None,
        delivery_mode: int | None = None,
        priority: int | None = None,
        correlation_id: str | None = None,
        reply_to: str | None = None,
        expiration: str | None = None,
        message_id: str | None = None,
        timestamp: int | None = None,
        type: str | None = None,
        user_id: str | None = None,
        app_id: str | None = None,
        cluster_id: str | None = None,
    ) -> None:
        self.content_type = content_type
        self.content_encoding = content_encoding
        self.headers = headers
        self.delivery_mode = delivery_mode
        self.priority = priority
        self.correlation_id = correlation_id
        self.reply_to = reply_to
        self.expiration = expiration
        self.message_id = message_id
        self.timestamp = timestamp
        self.type = type
        self.user_id = user_id
        self.app_id = app_id
        self.cluster_id = cluster_id

    def encode(self) -> bytes:
        """The flag word followed by the present properties."""
        flags = 0
        parts = [b""]
        for (name, _, encode), bit in zip(_FIELD_CODECS, _FLAG_BITS):
            value = getattr(self, name)
            if value is not None:
                flags |= bit
                parts.append(encode(value))
        parts[0] = _FLAGS.pack(flags)
        return b"".join(parts)

    @classmethod
    def decode(cls, buf: Buffer, offset: int = 0) -> "BasicProperties":
        """Properties from a flag word at `offset`; they must end at the end of `buf`."""
        flags, offset = _read_flags(buf, offset)
        props = cls()
        for (name, decode, _), bit in zip(_FIELD_CODECS, _FLAG_BITS):
            if flags & bit:
                value, offset = decode(buf, offset)
                setattr(props, name, value)
        if offset != len(buf):
            raise DecodeError("content properties do not end at the end of the frame")
        return props

    def __eq__(self, other: object) -> bool:
        if type(other) is not BasicProperties:
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in _NAMES)

    __hash__ = None  # type: ignore[assignment]  # mutable value object

    def __repr__(self) -> str:
        present = ", ".join(f"{n}={getattr(self, n)!r}" for n in _NAMES
                            if getattr(self, n) is not None)
        return f"BasicProperties({present})"


_SKIPS = tuple((bit, f.type) for f, bit in zip(spec.BASIC_PROPERTIES, _FLAG_BITS))
PRIORITY_FLAG = 1 << 11
_OCTET_FLAGS = DELIVERY_MODE_FLAG | PRIORITY_FLAG


def properties_decode(payload: Buffer) -> bool:
    """Whether a content header payload's properties decode (RabbitMQ's channel decodes every
    publish's and fails on those that do not), checked without building them."""
    try:
        flags, offset = _read_flags(payload, HEADER_PROPS_OFFSET)
        if not flags & ~_OCTET_FLAGS:  # delivery-mode and priority at most: the common case
            return offset + (flags & DELIVERY_MODE_FLAG != 0) + (flags & PRIORITY_FLAG != 0) == len(payload)
        for bit, kind in _SKIPS:
            if flags & bit:
                if kind == spec.SHORTSTR:
                    offset += 1 + payload[offset]
                elif kind == spec.TABLE:
                    offset = skip_table(payload, offset)
                else:
                    offset += 1 if kind == spec.OCTET else 8
    except DECODE_ERRORS:
        return False
    return offset == len(payload)


def _read_flags(buf: Buffer, offset: int) -> tuple[int, int]:
    """The first flag word; continuation words (bit 0) carry no properties we know, so skip them."""
    flags = word = _FLAGS.unpack_from(buf, offset)[0]
    offset += 2
    while word & 1:
        word = _FLAGS.unpack_from(buf, offset)[0]
        offset += 2
    return flags & ~1, offset


def encode_content_header(class_id: int, body_size: int, props: BasicProperties | bytes) -> bytes:
    """A content header frame payload; `props` may be pre-encoded properties (flags + values)."""
    raw = props if isinstance(props, (bytes, bytearray, memoryview)) else props.encode()
    return _HEADER.pack(class_id, 0, body_size) + raw


def parse_content_header(payload: Buffer) -> tuple[int, int, int]:
    """(class_id, body_size, offset of the property flags) of a content header payload.

    The weight field is not returned: the inbound parser rejects a non-zero weight as RabbitMQ does.
    """
    class_id, _weight, body_size = _HEADER.unpack_from(payload, 0)
    return class_id, body_size, HEADER_PROPS_OFFSET


def _leading_octet(payload: Buffer, flag: int) -> int:
    """delivery-mode or priority (octets behind content-type, content-encoding, headers and, for
    priority, delivery-mode), 0 when absent, decoding only the lengths of what precedes them."""
    flags = _FLAGS.unpack_from(payload, HEADER_PROPS_OFFSET)[0]
    if not flags & flag:
        return 0
    offset = HEADER_PROPS_OFFSET + 2
    while _FLAGS.unpack_from(payload, offset - 2)[0] & 1:  # skip continuation flag words
        offset += 2
    if flags & _CONTENT_TYPE_FLAG:
        offset += 1 + payload[offset]
    if flags & _CONTENT_ENCODING_FLAG:
        offset += 1 + payload[offset]
    if flags & _HEADERS_FLAG:
        offset += 4 + _LONG.unpack_from(payload, offset)[0]
    if flag == PRIORITY_FLAG and flags & DELIVERY_MODE_FLAG:
        offset += 1
    return payload[offset]


def read_delivery_mode(payload: Buffer) -> int:
    """delivery-mode of a content header payload, 0 when absent (hot path: is it persistent?)."""
    return _leading_octet(payload, DELIVERY_MODE_FLAG)


def read_priority(payload: Buffer) -> int:
    """priority of a content header payload, 0 when absent (as RabbitMQ treats it)."""
    return _leading_octet(payload, PRIORITY_FLAG)
