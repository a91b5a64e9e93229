"""Record framing: the longest valid prefix is kept and what follows is described, never trusted."""

import pytest
from crc32c import crc32c
from hypothesis import given, strategies as st

from persist.classic.records import FRAME_BYTES, decode_message, encode_message, frame, frame_parts, scan

A, B = frame(b"alpha"), frame(b"bravo!")

CASES = [
    # (buffer, payloads found, valid bytes, cut reason)
    (b"", [], 0, None),
    (A + B, [b"alpha", b"bravo!"], len(A) + len(B), None),
    (A + B[:3], [b"alpha"], len(A), "short header"),
    (A + B[:-1], [b"alpha"], len(A), "short record"),
    (A + b"\x00" * 12, [b"alpha"], len(A), "bad length"),  # zero fill
    (A + B[:4] + b"\xff\xff\xff\x7f" + B[8:], [b"alpha"], len(A), "bad length"),
    (A[:-1] + bytes([A[-1] ^ 1]) + B, [], 0, "bad crc"),
]


@pytest.mark.parametrize("buf, payloads, valid, reason", CASES)
def test_scan_keeps_the_valid_prefix(buf, payloads, valid, reason):
    spans, valid_bytes, cut = scan(buf)
    assert [buf[s:s + n] for s, n in spans] == payloads
    assert valid_bytes == valid
    if reason is None:
        assert cut is None
    else:
        assert cut.reason == reason and cut.offset == valid and cut.size == len(buf) - valid


@given(st.lists(st.binary(min_size=1, max_size=50), max_size=8), st.integers(0, 400))
def test_any_truncation_yields_a_prefix_of_the_records(payloads, cut_at):
    buf = b"".join(frame(p) for p in payloads)
    cut_at = min(cut_at, len(buf))
    spans, valid, _cut = scan(buf[:cut_at])
    found = [buf[s:s + n] for s, n in spans]
    assert found == payloads[:len(found)]
    assert valid == sum(FRAME_BYTES + len(p) for p in found) <= cut_at


@given(st.text(max_size=20), st.text(max_size=20), st.binary(max_size=30), st.binary(max_size=30))
def test_message_payload_round_trips(exchange, routing_key, header, body):
    assert decode_message(encode_message(exchange, routing_key, header, body)) == (
        exchange, routing_key, header, body)


def test_frame_parts_is_frame_in_pieces_with_the_parts_untouched():
    body = bytes(range(256)) * 64
    parts = frame_parts(b"\x05guid!", b"head", body)
    assert b"".join(parts) == frame(b"\x05guid!", b"head", body)
    assert parts[-1] is body  # handed to the gathered write as it is, never copied


def test_records_carry_crc32c():
    payload = b"alpha"
    assert frame(payload)[:4] == crc32c(payload).to_bytes(4, "little")
