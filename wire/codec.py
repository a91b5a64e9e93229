"""AMQP 0-9-1 primitive types and field tables, as RabbitMQ reads and writes them.

Theory of operation: every decoder takes `(buf, offset)` - `buf` is bytes or a memoryview - and
returns `(value, new_offset)`; every encoder returns bytes. Decoders raise only `DECODE_ERRORS` on
malformed input; callers at the protocol boundary (wire/inbound.py) turn those into an
`AmqpError` value, so no exception leaves the wire layer. Encoders raise ValueError/TypeError for
values the wire cannot carry (a programming error, not a peer's).

Strings: RabbitMQ treats shortstrs as binaries (a routing key need not be UTF-8), so shortstrs
and table keys decode with 'surrogateescape' - any octets round-trip exactly through str.

Field-table values: the grammar is RabbitMQ 3.10's (S T b B s u I i d f l L t D F A x V), and
each value decodes to the Python type that remembers its tag (wire/field_types.py), so a table
encodes back to the octets RabbitMQ would write: every tag as it came except `L`, written `l`
as RabbitMQ writes it. `I` is a plain int, `d` a float, `S` a str when valid UTF-8 (else bytes),
`D` a Decimal (scale octet, unsigned 32-bit value, as RabbitMQ reads it), `F` a dict, `A` a
list, `V` None. From other Python values: bool->t, int->I if it fits int32 else l, float->d,
str/bytes->S, dict->F, list/tuple->A, None->V, Decimal->D, datetime->T. So decode(encode(v))
== v for every value built from those types (a negative Decimal, written two's-complement as
pika and py-amqp write it, reads back unsigned as RabbitMQ reads it), and encode(decode(b)) == b
for every table without `L` or repeated keys. A repeated key keeps its first value, the one
RabbitMQ's table_lookup finds. Nesting deeper than NESTING_DEPTH_MAX is refused, not recursed
into.
"""
from __future__ import annotations

import struct
from datetime import datetime, timezone
from decimal import Decimal
from typing import Annotated, Any

from wire.field_types import (INT32_MAX, INT32_MIN, ByteArray, Float32, Int8, Int16, Int64, Timestamp,
                              UInt8, UInt16, UInt32)

__all__ = ["ByteArray", "Timestamp"]  # re-exported: most callers know the two from here

Buffer = bytes | bytearray | memoryview

# A field table as a message field: actors/messages carries a field so annotated as its AMQP
# encoding, since msgpack would flatten the typed values (an Int8 arrives as a plain int).
FIELD_TABLE = "amqp field table"
FieldTable = Annotated[dict[str, Any], FIELD_TABLE]


class DecodeError(ValueError):
    """Malformed input found while decoding (raised inside wire/, caught at its boundary)."""


# What a decoder may raise on bad input: its own checks, plus what indexing and struct raise
# on a short buffer (cheaper than checking lengths on the hot path).
DECODE_ERRORS = (DecodeError, IndexError, struct.error, UnicodeDecodeError)


_OCTET = struct.Struct(">B")
_SHORT = struct.Struct(">H")
_LONG = struct.Struct(">I")
_LONGLONG = struct.Struct(">Q")
_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_FLOAT = struct.Struct(">f")
_DOUBLE = struct.Struct(">d")
_DECIMAL = struct.Struct(">BI")

OCTET_BYTES = tuple(bytes((i,)) for i in range(256))  # one-octet length prefixes, shared


def decode_octet(buf: Buffer, offset: int) -> tuple[int, int]:
    return buf[offset], offset + 1


def decode_short(buf: Buffer, offset: int) -> tuple[int, int]:
    return _SHORT.unpack_from(buf, offset)[0], offset + 2


def decode_long(buf: Buffer, offset: int) -> tuple[int, int]:
    return _LONG.unpack_from(buf, offset)[0], offset + 4


def decode_longlong(buf: Buffer, offset: int) -> tuple[int, int]:
    return _LONGLONG.unpack_from(buf, offset)[0], offset + 8


decode_timestamp = decode_longlong


def decode_shortstr(buf: Buffer, offset: int) -> tuple[str, int]:
    n = buf[offset]
    end = offset + 1 + n
    if end > len(buf):
        raise DecodeError("short string runs past the end")
    return str(buf[offset + 1:end], "utf-8", "surrogateescape"), end


def decode_longstr(buf: Buffer, offset: int) -> tuple[bytes, int]:
    n = _LONG.unpack_from(buf, offset)[0]
    end = offset + 4 + n
    if end > len(buf):
        raise DecodeError("long string runs past the end")
    return bytes(buf[offset + 4:end]), end


def encode_octet(value: int) -> bytes:
    return _OCTET.pack(value)


def encode_short(value: int) -> bytes:
    return _SHORT.pack(value)


def encode_long(value: int) -> bytes:
    return _LONG.pack(value)


def encode_longlong(value: int) -> bytes:
    return _LONGLONG.pack(value)


encode_timestamp = encode_longlong


def encode_shortstr(value: str) -> bytes:
    raw = value.encode("utf-8", "surrogateescape")
    if len(raw) > 255:
        raise ValueError(f"short string longer than 255 octets: {len(raw)}")
    return OCTET_BYTES[len(raw)] + raw


def encode_longstr(value: bytes | str) -> bytes:
    if isinstance(value, str):
        value = value.encode("utf-8", "surrogateescape")
    return _LONG.pack(len(value)) + value


def decode_bits(octet: int, count: int) -> list[bool]:
    """The first `count` bits of one packed octet, least significant first (AMQP bit packing)."""
    return [bool(octet >> i & 1) for i in range(count)]


def encode_bits(*bits: Any) -> bytes:
    """Up to 8 truth values packed into one octet, the first in the least significant bit."""
    octet = 0
    for i, bit in enumerate(bits):
        if bit:
            octet |= 1 << i
    return OCTET_BYTES[octet]


# ---- field tables -------------------------------------------------------------------------------

NESTING_DEPTH_MAX = 64  # nested tables/arrays; deeper input is refused rather than recursed into


def decode_table(buf: Buffer, offset: int, depth: int = 0) -> tuple[dict[str, Any], int]:
    """A field table (long length prefix, then shortstr key + typed value pairs)."""
    if depth > NESTING_DEPTH_MAX:
        raise DecodeError("field table nested too deeply")
    size = _LONG.unpack_from(buf, offset)[0]
    offset += 4
    end = offset + size
    if end > len(buf):
        raise DecodeError("table runs past the end")
    table: dict[str, Any] = {}
    while offset < end:
        key, offset = decode_shortstr(buf, offset)
        value, offset = _decode_value(buf, offset, end, depth)
        if key not in table:
            table[key] = value
    if offset != end:
        raise DecodeError("table entry runs past the table")
    return table, end


def _decode_array(buf: Buffer, offset: int, depth: int) -> tuple[list[Any], int]:
    if depth > NESTING_DEPTH_MAX:
        raise DecodeError("field array nested too deeply")
    size = _LONG.unpack_from(buf, offset)[0]
    offset += 4
    end = offset + size
    if end > len(buf):
        raise DecodeError("array runs past the end")
    items = []
    while offset < end:
        value, offset = _decode_value(buf, offset, end, depth)
        items.append(value)
    if offset != end:
        raise DecodeError("array item runs past the array")
    return items, end


def _decode_value(buf: Buffer, offset: int, limit: int, depth: int) -> tuple[Any, int]:
    if offset >= limit:
        raise DecodeError("field value missing")
    kind = buf[offset]
    offset += 1
    fixed = _FIXED_VALUES.get(kind)
    if fixed is not None:
        codec, convert = fixed
        value = codec.unpack_from(buf, offset)[0]
        return (convert(value) if convert else value), offset + codec.size
    if kind == 0x53:  # 'S'
        raw, offset = decode_longstr(buf, offset)
        try:
            return raw.decode("utf-8"), offset
        except UnicodeDecodeError:
            return raw, offset
    if kind == 0x46:  # 'F'
        return decode_table(buf, offset, depth + 1)
    if kind == 0x41:  # 'A'
        return _decode_array(buf, offset, depth + 1)
    if kind == 0x78:  # 'x'
        raw, offset = decode_longstr(buf, offset)
        return ByteArray(raw), offset
    if kind == 0x44:  # 'D'
        scale, value = _DECIMAL.unpack_from(buf, offset)
        return Decimal(value).scaleb(-scale), offset + 5
    if kind == 0x56:  # 'V'
        return None, offset
    raise DecodeError(f"unknown field type {kind:#x}")


_FIXED_VALUES: dict[int, tuple[struct.Struct, Any]] = {
    ord("t"): (_OCTET, bool),
    ord("b"): (_INT8, Int8),
    ord("B"): (_OCTET, UInt8),
    ord("s"): (_INT16, Int16),
    ord("u"): (_SHORT, UInt16),
    ord("I"): (_INT32, None),
    ord("i"): (_LONG, UInt32),
    ord("l"): (_INT64, Int64),
    ord("L"): (_INT64, Int64),  # signed, as RabbitMQ reads it (its parser's comment cites the errata)
    ord("f"): (_FLOAT, Float32),
    ord("d"): (_DOUBLE, None),
    ord("T"): (_LONGLONG, Timestamp),
}

# the tag each typed subclass is written with (plain int, float, bytes: see _encode_value)
_TYPED: dict[type, tuple[bytes, struct.Struct]] = {
    Int8: (b"b", _INT8), UInt8: (b"B", _OCTET), Int16: (b"s", _INT16), UInt16: (b"u", _SHORT),
    UInt32: (b"i", _LONG), Int64: (b"l", _INT64), Timestamp: (b"T", _LONGLONG),
    Float32: (b"f", _FLOAT),
}


# octets after the tag of each fixed-size type; S x F A carry a long length
_SIZES = {tag: codec.size for tag, (codec, _) in _FIXED_VALUES.items()} | {ord("D"): 5, ord("V"): 0}
_LENGTH_PREFIXED = frozenset(b"SxFA")


def skip_table(buf: Buffer, offset: int, depth: int = 0) -> int:
    """Where the field table at `offset` ends, checking its grammar as `decode_table` would but
    building nothing (a publish's headers are checked so; few are ever decoded). Raises
    DecodeError where decode_table would fail."""
    if depth > NESTING_DEPTH_MAX:
        raise DecodeError("field table nested too deeply")
    end = offset + 4 + _LONG.unpack_from(buf, offset)[0]
    if end > len(buf):
        raise DecodeError("table runs past the end")
    offset += 4
    while offset < end:
        offset += 1 + buf[offset]  # the key
        offset = _skip_value(buf, offset, end, depth)
    if offset != end:
        raise DecodeError("table entry runs past the table")
    return end


def _skip_value(buf: Buffer, offset: int, limit: int, depth: int) -> int:
    if offset >= limit:
        raise DecodeError("field value missing")
    kind = buf[offset]
    size = _SIZES.get(kind)
    if size is not None:
        return offset + 1 + size
    if kind not in _LENGTH_PREFIXED:
        raise DecodeError(f"unknown field type {kind:#x}")
    if kind == 0x46:  # 'F'
        return skip_table(buf, offset + 1, depth + 1)
    end = offset + 5 + _LONG.unpack_from(buf, offset + 1)[0]
    if end > limit:
        raise DecodeError("field value runs past its table")
    if kind == 0x41:  # 'A'
        if depth + 1 > NESTING_DEPTH_MAX:
            raise DecodeError("field array nested too deeply")
        offset += 5
        while offset < end:
            offset = _skip_value(buf, offset, end, depth + 1)
        if offset != end:
            raise DecodeError("array item runs past the array")
    return end


def encode_table(table: dict[str, Any] | None) -> bytes:
    """A field table with its long length prefix; None and {} both encode as the empty table."""
    if not table:
        return b"\x00\x00\x00\x00"
    parts = []
    for key, value in table.items():
        parts.append(encode_shortstr(key))
        _encode_value(value, parts)
    body = b"".join(parts)
    return _LONG.pack(len(body)) + body


def _encode_value(value: Any, parts: list[bytes]) -> None:
    # Order matters: the typed subclasses first, bool before int (bool is an int), ByteArray
    # before bytes.
    typed = _TYPED.get(type(value))
    if typed is not None:
        tag, codec = typed
        parts.append(tag + codec.pack(value))
    elif isinstance(value, bool):
        parts.append(b"t\x01" if value else b"t\x00")
    elif isinstance(value, int):
        if INT32_MIN <= value <= INT32_MAX:
            parts.append(b"I" + _INT32.pack(value))
        else:
            parts.append(b"l" + _INT64.pack(value))
    elif isinstance(value, str):
        parts.append(b"S" + encode_longstr(value))
    elif isinstance(value, ByteArray):
        parts.append(b"x" + encode_longstr(value))
    elif isinstance(value, (bytes, bytearray, memoryview)):
        parts.append(b"S" + encode_longstr(bytes(value)))
    elif isinstance(value, float):
        parts.append(b"d" + _DOUBLE.pack(value))
    elif isinstance(value, dict):
        parts.append(b"F" + encode_table(value))
    elif isinstance(value, (list, tuple)):
        items: list[bytes] = []
        for item in value:
            _encode_value(item, items)
        body = b"".join(items)
        parts.append(b"A" + _LONG.pack(len(body)) + body)
    elif value is None:
        parts.append(b"V")
    elif isinstance(value, Decimal):
        parts.append(b"D" + _encode_decimal(value))
    elif isinstance(value, datetime):
        if value.tzinfo is None:  # naive datetimes are taken as UTC, as pika does
            value = value.replace(tzinfo=timezone.utc)
        parts.append(b"T" + _LONGLONG.pack(int(value.timestamp())))
    else:
        raise TypeError(f"cannot encode {type(value).__name__} in a field table")


def decimal_parts(value: Decimal) -> tuple[int, int]:
    """(scale, unsigned 32-bit value) of a decimal as field type D carries it - RabbitMQ's
    {Before, After}; a negative value is its two's complement, as pika and py-amqp write it."""
    sign, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        raise ValueError(f"cannot encode decimal {value}")
    unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    if exponent > 0:
        unscaled *= 10 ** exponent
        exponent = 0
    scale = -exponent
    if scale > 255 or not INT32_MIN <= unscaled <= 0xFFFFFFFF:
        raise ValueError(f"decimal {value} does not fit scale octet + 32 bits")
    return scale, unscaled & 0xFFFFFFFF


def _encode_decimal(value: Decimal) -> bytes:
    return _DECIMAL.pack(*decimal_parts(value))
