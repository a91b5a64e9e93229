"""AMQP 0-9-1 primitive types and field tables, as RabbitMQ reads and writes them.

Theory of operation: every decoder takes `(buf, offset)` - `buf` is bytes or a memoryview - and
returns `(value, new_offset)`; every encoder returns bytes. Decoders raise only `DECODE_ERRORS` on
malformed input; callers at the protocol boundary (wire/inbound.py) turn those into an
`AmqpError` value, so no exception leaves the wire layer. Encoders raise ValueError/TypeError for
values the wire cannot carry (a programming error, not a peer's).

Strings: RabbitMQ treats shortstrs as binaries (a routing key need not be UTF-8), so shortstrs
and table keys decode with 'surrogateescape' - any octets round-trip exactly through str.

Field-table values, decoded:
  t bool | b B s u I i l int | f d float | D decimal.Decimal (signed int32 value, as pika) |
  S str when valid UTF-8, else bytes | x ByteArray (a bytes subclass) | A list | F dict |
  T Timestamp (an int subclass: epoch seconds; datetime cannot hold every uint64) | V None.
Encoded from Python: bool->t, int->I if it fits int32 else l, float->d, str/bytes->S,
ByteArray->x, dict->F, list/tuple->A, None->V, Decimal->D, Timestamp/datetime->T. So
decode(encode(v)) == v for every value built from those types, and encode(decode(b)) == b for
tables in canonical form. Nesting deeper than NESTING_DEPTH_MAX is refused, not recursed into.
"""
from __future__ import annotations

import struct
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

Buffer = bytes | bytearray | memoryview


class DecodeError(ValueError):
    """Malformed input found while decoding (raised inside wire/, caught at its boundary)."""


# What a decoder may raise on bad input: its own checks, plus what indexing and struct raise
# on a short buffer (cheaper than checking lengths on the hot path).
DECODE_ERRORS = (DecodeError, IndexError, struct.error, UnicodeDecodeError)


class ByteArray(bytes):
    """Bytes that encode as field type 'x' (byte array) rather than 'S' (long string)."""


class Timestamp(int):
    """Seconds since the epoch that encode as field type 'T'."""


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
_DECIMAL = struct.Struct(">Bi")

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
        table[key], offset = _decode_value(buf, offset, end, depth)
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
    ord("b"): (_INT8, None),
    ord("B"): (_OCTET, None),
    ord("s"): (_INT16, None),
    ord("u"): (_SHORT, None),
    ord("I"): (_INT32, None),
    ord("i"): (_LONG, None),
    ord("l"): (_INT64, None),
    ord("f"): (_FLOAT, None),
    ord("d"): (_DOUBLE, None),
    ord("T"): (_LONGLONG, Timestamp),
}


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
    # Order matters: bool before int (bool is an int), ByteArray before bytes, Timestamp before int.
    if isinstance(value, bool):
        parts.append(b"t\x01" if value else b"t\x00")
    elif isinstance(value, Timestamp):
        parts.append(b"T" + _LONGLONG.pack(value))
    elif isinstance(value, int):
        if -0x80000000 <= value <= 0x7FFFFFFF:
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


def _encode_decimal(value: Decimal) -> bytes:
    sign, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        raise ValueError(f"cannot encode decimal {value}")
    unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    if exponent > 0:
        unscaled *= 10 ** exponent
        exponent = 0
    scale = -exponent
    if scale > 255 or not -0x80000000 <= unscaled <= 0x7FFFFFFF:
        raise ValueError(f"decimal {value} does not fit scale octet + int32")
    return _DECIMAL.pack(scale, unscaled)
