"""Record encoding and the scanner: round trips, cut reasons, and fuzzed corruption."""
from __future__ import annotations

import pytest
from crc32c import crc32c
from hypothesis import given, settings, strategies as st

from persist.wal.records import ENTRY, HEADER_BYTES, MEMBER_META, SNAPSHOT, TRUNCATE, decode_meta, \
    decode_snapshot, encode, encode_meta, encode_run, encode_snapshot, scan
from raft.log import Entry

ROUND_TRIPS = [
    # (type, index, term, payload, member)
    (ENTRY, 1, 1, b"", b""),
    (ENTRY, 2**64 - 1, 2**64 - 1, b"\x00" * 1000, b"queue-a@node1"),
    (TRUNCATE, 17, 0, b"", "q\u00e9".encode()),
    (SNAPSHOT, 9, 3, b"state", b""),
    (MEMBER_META, 1, 4, b"=n2", b""),
]


@pytest.mark.parametrize("rtype,index,term,payload,member", ROUND_TRIPS)
def test_round_trip(rtype, index, term, payload, member):
    data = encode(rtype, index, term, payload, member)
    result = scan(data)
    assert result.cut is None and result.valid_bytes == len(data) == HEADER_BYTES + len(member) + len(payload)
    (rec,) = result.records
    assert (rec.type, rec.index, rec.term, rec.payload, rec.member.encode()) == \
        (rtype, index, term, payload, member)


def test_meta_and_snapshot_helpers():
    assert decode_meta(scan(encode_meta(7, "n2", 40)).records[0]) == (7, "n2", 40)
    assert decode_meta(scan(encode_meta(7, None, 1)).records[0]) == (7, None, 1)
    assert decode_snapshot(scan(encode_snapshot(9, 2, 10, b"s")).records[0]) == (9, 2, 10, b"s")


def _two() -> bytes:
    return encode(ENTRY, 1, 1, b"abc", b"m") + encode(ENTRY, 2, 1, b"defg", b"m")


CUTS = [
    # (how the buffer is damaged, reason reported, records kept)
    (lambda b: b[:-1], "short record", 1),
    (lambda b: b[:len(b) - 4 - HEADER_BYTES - 1 + 3], "short header", 1),
    (lambda b: b + b"\x00" * 40, "bad crc", 2),
    (lambda b: b[:-1] + bytes([b[-1] ^ 1]), "bad crc", 1),
    (lambda b: b[:HEADER_BYTES + 4] + b"\xff" * 30, "bad length", 1),
]


@pytest.mark.parametrize("damage,reason,kept", CUTS)
def test_scan_cuts_and_says_why(damage, reason, kept):
    buf = damage(_two())
    result = scan(buf)
    assert len(result.records) == kept
    assert result.cut is not None and result.cut.reason == reason
    assert result.cut.offset == result.valid_bytes and result.cut.size == len(buf) - result.valid_bytes


def test_records_carry_crc32c_of_everything_after_it():
    """The one checksum on disk (classic storage's framing too): CRC-32C, not zlib's CRC-32."""
    rec = encode(ENTRY, 7, 3, b"payload", b"member")
    assert rec[:4] == crc32c(rec[4:]).to_bytes(4, "little")
    run = b"".join(encode_run([Entry(1, 1, b"a"), Entry(2, 1, b"bc")], b"m"))
    assert run[:4] == crc32c(run[4:]).to_bytes(4, "little")


def test_bad_type_with_good_crc_is_cut():
    rec = bytearray(encode(ENTRY, 1, 1, b"x"))
    rec[4] = 99
    rec[:4] = crc32c(bytes(rec[4:])).to_bytes(4, "little")
    result = scan(bytes(rec))
    assert result.records == [] and result.cut.reason == "bad type"


entries = st.lists(st.tuples(st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1),
                             st.binary(max_size=64), st.text(max_size=8)), max_size=8)


@settings(max_examples=200, deadline=None)
@given(entries, st.data())
def test_random_corruption_never_raises_only_cuts(items, data):
    clean = [encode(ENTRY, i, t, p, m.encode()) for i, t, p, m in items]
    buf = bytearray(b"".join(clean))
    action = data.draw(st.sampled_from(["flip", "truncate", "garbage", "none"]))
    if action == "flip" and buf:
        pos = data.draw(st.integers(0, len(buf) - 1))
        buf[pos] ^= data.draw(st.integers(1, 255))
    elif action == "truncate":
        del buf[data.draw(st.integers(0, len(buf))):]
    elif action == "garbage":
        buf += data.draw(st.binary(min_size=1, max_size=64))
    result = scan(bytes(buf))
    # The valid prefix is always a prefix of the clean records, byte for byte.
    assert result.valid_bytes + (result.cut.size if result.cut else 0) == len(buf)
    assert bytes(buf[:result.valid_bytes]) == b"".join(clean[:len(result.records)])
    if action == "none":
        assert result.cut is None and len(result.records) == len(items)
