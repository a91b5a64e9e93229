"""Basic content properties and content header payloads."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from tests.wire.strategies import BY_TYPE
from wire import codec, spec
from wire.properties import (BasicProperties, encode_content_header, parse_content_header, properties_decode,
                             read_delivery_mode, read_priority)

properties = st.builds(BasicProperties, **{
    f.name: st.none() | BY_TYPE[f.type] for f in spec.BASIC_PROPERTIES})

PROPERTY_CASES = [
    (BasicProperties(), b"\x00\x00"),
    (BasicProperties(content_type="text/plain"), b"\x80\x00\x0atext/plain"),
    (BasicProperties(delivery_mode=2), b"\x10\x00\x02"),
    (BasicProperties(cluster_id="c"), b"\x00\x04\x01c"),
    (BasicProperties(headers={}, priority=3), b"\x28\x00\x00\x00\x00\x00\x03"),
    (BasicProperties(timestamp=1), b"\x00\x40" + (1).to_bytes(8, "big")),
]


@pytest.mark.parametrize("props, octets", PROPERTY_CASES)
def test_properties(props, octets):
    assert props.encode() == octets
    assert BasicProperties.decode(octets) == props


def test_fourteen_properties_in_flag_order():
    assert [f.name for f in spec.BASIC_PROPERTIES] == [
        "content_type", "content_encoding", "headers", "delivery_mode", "priority",
        "correlation_id", "reply_to", "expiration", "message_id", "timestamp", "type", "user_id",
        "app_id", "cluster_id"]


def test_pika_agrees_on_property_octets():
    import pika.spec
    props = dict(content_type="a/b", headers={"x": 1}, delivery_mode=2, priority=1,
                 correlation_id="c", reply_to="r", expiration="60", message_id="m", timestamp=7,
                 type="t", user_id="u", app_id="app", cluster_id="cl")
    theirs = b"".join(pika.spec.BasicProperties(**props).encode())
    assert BasicProperties(**props).encode() == theirs


@settings(max_examples=150)
@given(properties)
def test_properties_round_trip(props):
    encoded = props.encode()
    assert BasicProperties.decode(encoded) == props
    header = encode_content_header(60, 10, props)
    assert read_delivery_mode(header) == (props.delivery_mode or 0)
    assert BasicProperties.decode(header, parse_content_header(header)[2]) == props


def test_content_header():
    payload = encode_content_header(60, 1 << 40, BasicProperties(delivery_mode=1))
    assert payload == b"\x00\x3c\x00\x00" + (1 << 40).to_bytes(8, "big") + b"\x10\x00\x01"
    assert parse_content_header(payload) == (60, 1 << 40, 12)
    assert encode_content_header(60, 1 << 40, b"\x10\x00\x01") == payload  # pre-encoded


def test_read_delivery_mode_skips_what_precedes_it():
    props = BasicProperties(content_type="x", content_encoding="gzip", headers={"a": [1, "b"]},
                            delivery_mode=2, priority=9)
    assert read_delivery_mode(encode_content_header(60, 0, props)) == 2
    assert read_delivery_mode(encode_content_header(60, 0, BasicProperties(priority=2))) == 0


def test_continuation_flag_words_are_skipped():
    assert BasicProperties.decode(b"\x10\x01\x00\x00\x02") == BasicProperties(delivery_mode=2)
    assert read_delivery_mode(b"\x00" * 12 + b"\x10\x01\x00\x00\x02") == 2


@pytest.mark.parametrize("octets", [b"\x80\x00\x05ab", b"\x10\x00", b"\x00", b"\x00\x00\x01"])
def test_malformed_properties(octets):
    with pytest.raises(codec.DECODE_ERRORS):
        BasicProperties.decode(octets)


@pytest.mark.parametrize("props", [
    BasicProperties(), BasicProperties(priority=7), BasicProperties(delivery_mode=2, priority=3),
    BasicProperties(content_type="text/plain", content_encoding="gzip", headers={"a": [1, "x"]},
                    delivery_mode=2, priority=9, expiration="100"),
    BasicProperties(headers={"k": "v"}, priority=0),
])
def test_fast_readers_agree_with_the_full_decode(props):
    payload = encode_content_header(60, 0, props)
    assert read_delivery_mode(payload) == (props.delivery_mode or 0)
    assert read_priority(payload) == (props.priority or 0)


@settings(max_examples=300)
@given(properties, st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=3))
def test_the_publish_check_agrees_with_the_decoder(props, mutations):
    """properties_decode (every publish's check, building nothing) is True exactly where
    BasicProperties.decode succeeds, for valid and mutated content headers."""
    header = bytearray(encode_content_header(60, 3, props))
    for at, octet in mutations:
        at = 12 + at % max(1, len(header) - 12)  # the properties, not class/weight/size
        if at < len(header):
            header[at] = octet
    try:
        BasicProperties.decode(bytes(header), 12)
        decodes = True
    except codec.DECODE_ERRORS:
        decodes = False
    assert properties_decode(bytes(header)) == decodes
