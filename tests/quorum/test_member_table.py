"""The quorum host's member table: what it writes reads back, and damage is an error, never "empty"."""
from __future__ import annotations

import pytest

from actors.quorum.member_table import CorruptMemberTable, MemberSpec, decode, encode

SPECS = [MemberSpec("a1", "/", "orders", ("n1", "n2", "n3"), {"x-queue-type": "quorum", "x-max-length": 5}, 17),
         MemberSpec("b2", "vh", "jobs", ("n2",), {}, 0)]


def test_a_table_reads_back_as_written():
    back = decode(encode(SPECS))
    assert back == SPECS and [s.arguments for s in back] == [s.arguments for s in SPECS]
    assert decode(encode([])) == []


@pytest.mark.parametrize("damage", [
    lambda b: b[:-1],                              # torn
    lambda b: b[:12] + bytes([b[12] ^ 1]) + b[13:],  # a flipped bit
    lambda b: b"XXXX" + b[4:],                     # not a table
    lambda b: b"",
])
def test_a_damaged_table_is_an_error(damage):
    with pytest.raises(CorruptMemberTable):
        decode(damage(encode(SPECS)))
