"""Primitive types and field tables: table-driven cases (value <-> octets) and round trips."""
from __future__ import annotations

import struct
from datetime import datetime, timezone
from decimal import Decimal

import pytest
from hypothesis import given, settings, strategies as st

from tests.wire.strategies import field_values, tables
from wire import codec
from wire.codec import ByteArray, Timestamp
from wire.field_types import Float32, Int8, Int16, Int64, UInt8, UInt16, UInt32, field_type

PRIMITIVE_CASES = [
    (codec.encode_octet, codec.decode_octet, 7, b"\x07"),
    (codec.encode_short, codec.decode_short, 0x1234, b"\x12\x34"),
    (codec.encode_long, codec.decode_long, 0xDEADBEEF, b"\xde\xad\xbe\xef"),
    (codec.encode_longlong, codec.decode_longlong, 2**64 - 1, b"\xff" * 8),
    (codec.encode_timestamp, codec.decode_timestamp, 1700000000, struct.pack(">Q", 1700000000)),
    (codec.encode_shortstr, codec.decode_shortstr, "amq.direct", b"\x0aamq.direct"),
    (codec.encode_shortstr, codec.decode_shortstr, "", b"\x00"),
    (codec.encode_shortstr, codec.decode_shortstr, "\udcff\udcfe", b"\x02\xff\xfe"),  # not UTF-8
    (codec.encode_shortstr, codec.decode_shortstr, "é", b"\x02\xc3\xa9"),
    (codec.encode_longstr, codec.decode_longstr, b"PLAIN", b"\x00\x00\x00\x05PLAIN"),
    (codec.encode_table, codec.decode_table, {}, b"\x00\x00\x00\x00"),
]


@pytest.mark.parametrize("encode, decode, value, octets", PRIMITIVE_CASES)
def test_primitive(encode, decode, value, octets):
    assert encode(value) == octets
    assert decode(octets, 0) == (value, len(octets))
    assert decode(b"\xaa" + octets, 1) == (value, len(octets) + 1)


def test_bits_pack_least_significant_first():
    assert codec.encode_bits(True, False, True) == b"\x05"
    assert codec.decode_bits(0x05, 3) == [True, False, True]


def _t(key: str, octets: bytes) -> bytes:
    entry = codec.encode_shortstr(key) + octets
    return struct.pack(">I", len(entry)) + entry


# (value, canonical octets of the table {"k": value}, RabbitMQ's type name): every type
# RabbitMQ 3.10's parser takes, each decoding to the Python type that writes its tag again
TABLE_CASES = [
    (True, b"t\x01", "bool"),
    (False, b"t\x00", "bool"),
    (Int8(-1), b"b\xff", "byte"),
    (UInt8(255), b"B\xff", "unsignedbyte"),
    (Int16(-2), b"s\xff\xfe", "short"),
    (UInt16(65534), b"u\xff\xfe", "unsignedshort"),
    (5, b"I\x00\x00\x00\x05", "signedint"),
    (-1, b"I\xff\xff\xff\xff", "signedint"),
    (UInt32(2**32 - 1), b"i\xff\xff\xff\xff", "unsignedint"),
    (Int64(5), b"l" + struct.pack(">q", 5), "long"),
    (Int64(-2**63), b"l\x80" + b"\x00" * 7, "long"),
    (Float32(0.5), b"f" + struct.pack(">f", 0.5), "float"),
    (1.5, b"d" + struct.pack(">d", 1.5), "double"),
    ("héllo", b"S\x00\x00\x00\x06h\xc3\xa9llo", "longstr"),
    (b"\xff\x00", b"S\x00\x00\x00\x02\xff\x00", "longstr"),
    (ByteArray(b"\x01\x02"), b"x\x00\x00\x00\x02\x01\x02", "binary"),
    ({"a": 1}, b"F" + _t("a", b"I\x00\x00\x00\x01"), "table"),
    ([1, "b"], b"A\x00\x00\x00\x0bI\x00\x00\x00\x01S\x00\x00\x00\x01b", "array"),
    (None, b"V", "void"),
    (Decimal("1.25"), b"D\x02\x00\x00\x00\x7d", "decimal"),
    (Decimal("1.50"), b"D\x02\x00\x00\x00\x96", "decimal"),
    (Decimal("4294967.295"), b"D\x03\xff\xff\xff\xff", "decimal"),
    (Timestamp(1700000000), b"T" + struct.pack(">Q", 1700000000), "timestamp"),
]


@pytest.mark.parametrize("value, octets, name", TABLE_CASES)
def test_table_value(value, octets, name):
    encoded = codec.encode_table({"k": value})
    assert encoded == _t("k", octets)
    decoded = codec.decode_table(encoded, 0)
    assert decoded == ({"k": value}, len(encoded))
    assert type(decoded[0]["k"]) is type(value) and field_type(decoded[0]["k"]) == name


# What decodes to another encoding: plain ints out of int32 as `l`; `L` read signed and written
# `l` (rabbit_binary_parser); a negative Decimal written two's-complement (pika, py-amqp) read
# unsigned, as RabbitMQ reads it.
ENCODE_CASES = [
    (2**31, b"l\x00\x00\x00\x00\x80\x00\x00\x00", Int64(2**31)),
    (-2**63, b"l\x80" + b"\x00" * 7, Int64(-2**63)),
    (Decimal("-3"), b"D\x00\xff\xff\xff\xfd", Decimal(2**32 - 3)),
]


@pytest.mark.parametrize("value, octets, decoded", ENCODE_CASES)
def test_values_that_decode_to_another_type(value, octets, decoded):
    encoded = codec.encode_table({"k": value})
    assert encoded == _t("k", octets)
    assert codec.decode_table(encoded, 0)[0] == {"k": decoded}


DECODE_ONLY_CASES = [
    (b"L" + b"\xff" * 8, Int64(-1), b"l" + b"\xff" * 8),
    (b"L" + struct.pack(">q", 2**27 * 1000), Int64(2**27 * 1000), b"l" + struct.pack(">q", 2**27 * 1000)),
]


@pytest.mark.parametrize("octets, value, written", DECODE_ONLY_CASES)
def test_table_decode_only(octets, value, written):
    decoded = codec.decode_table(_t("k", octets), 0)[0]
    assert decoded == {"k": value} and type(decoded["k"]) is Int64
    assert codec.encode_table(decoded) == _t("k", written)


def test_a_repeated_key_keeps_its_first_value_as_rabbitmqs_table_lookup_finds_it():
    raw = codec.encode_shortstr("k") + b"I\x00\x00\x00\x01" + codec.encode_shortstr("k") + b"b\x02"
    assert codec.decode_table(struct.pack(">I", len(raw)) + raw, 0)[0] == {"k": 1}


def test_bytes_that_are_utf8_decode_as_str():
    assert codec.decode_table(codec.encode_table({"k": b"abc"}), 0)[0] == {"k": "abc"}


def test_datetime_encodes_as_timestamp():
    moment = datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    decoded = codec.decode_table(codec.encode_table({"t": moment}), 0)[0]["t"]
    assert isinstance(decoded, Timestamp) and decoded == int(moment.timestamp())
    naive = codec.decode_table(codec.encode_table({"t": moment.replace(tzinfo=None)}), 0)[0]["t"]
    assert naive == decoded


@pytest.mark.parametrize("value", [Decimal("1e-300"), Decimal(2**40), object()])
def test_unencodable_values_raise(value):
    with pytest.raises((ValueError, TypeError)):
        codec.encode_table({"k": value})


MALFORMED_TABLES = [
    _t("k", b"Z\x00"),  # unknown type
    _t("k", b"U\x00\x01"),  # the 0-9-1 spec's U, which RabbitMQ (and the errata) do not know
    _t("k", b"F" + _t("n", b"M\x00")),  # an unknown type inside a nested table
    _t("k", b"A\x00\x00\x00\x01Z"),  # an unknown type inside an array
    _t("k", b"I\x00\x00"),  # value cut short inside the table
    b"\x00\x00\x00\x09\x01kS\x00\x00\x00\x09",  # string longer than the table
    b"\x00\x00\x00\x40\x01kV",  # table longer than the buffer
    b"\x00\x00\x00\x03\x05k",  # key longer than the table
    _t("k", b"A\x00\x00\x00\x09I\x00\x00\x00\x01"),  # array longer than the table
    b"\x00\x00",  # no length
]


@pytest.mark.parametrize("octets", MALFORMED_TABLES)
def test_malformed_table_raises_decode_error(octets):
    with pytest.raises(codec.DECODE_ERRORS):
        codec.decode_table(octets, 0)


@settings(max_examples=200)
@given(tables)
def test_table_round_trip(table):
    encoded = codec.encode_table(table)
    assert codec.decode_table(encoded, 0) == (table, len(encoded))
    # canonical form: re-encoding the decoded table gives the same octets
    assert codec.encode_table(codec.decode_table(encoded, 0)[0]) == encoded


@settings(max_examples=100)
@given(field_values)
def test_array_round_trip(value):
    encoded = codec.encode_table({"a": [value]})
    assert codec.decode_table(encoded, 0)[0] == {"a": [value]}


def test_deep_nesting_is_refused_not_recursed():
    nested: dict = {}
    for _ in range(codec.NESTING_DEPTH_MAX + 1):
        nested = {"n": [nested]}
    with pytest.raises(codec.DECODE_ERRORS):
        codec.decode_table(codec.encode_table(nested), 0)
    octets = b"\x00\x00\x00\x00"
    for _ in range(5000):  # 5000 levels: a RecursionError if the decoder had no limit
        octets = _t("k", b"F" + octets)
    with pytest.raises(codec.DECODE_ERRORS):
        codec.decode_table(octets, 0)


@settings(max_examples=300)
@given(tables, st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=3))
def test_skip_table_fails_exactly_where_decode_table_fails(table, mutations):
    """The publish check (skip_table) and the decoder agree on every table, mutated or not."""
    octets = bytearray(codec.encode_table(table))
    for at, octet in mutations:
        octets[at % len(octets)] = octet
    try:
        expected = codec.decode_table(bytes(octets), 0)[1]
    except codec.DECODE_ERRORS:
        expected = None
    try:
        got = codec.skip_table(bytes(octets), 0)
    except codec.DECODE_ERRORS:
        got = None
    assert got == expected
