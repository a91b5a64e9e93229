"""The quorum host's member table: what it writes reads back, starts and deletes are appended (one
record each, the table written whole again only once garbage outweighs it), a torn last write is
cut, and damage before it is an error, never "empty"."""
from __future__ import annotations

import struct

import pytest

from actors.quorum import member_table
from actors.quorum.member_table import CorruptMemberTable, MemberSpec, MemberTable, added, decode, encode, removed
from persist.disk import RealDisk

SPECS = [MemberSpec("a1", "/", "orders", ("n1", "n2", "n3"), {"x-queue-type": "quorum", "x-max-length": 5}, 17),
         MemberSpec("b2", "vh", "jobs", ("n2",), {}, 0)]
PATH = "members.table"
HEADER = len(encode([]))


def flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 1]) + data[at + 1:]


def test_a_table_reads_back_as_written():
    data = encode(SPECS)
    back, valid, records = decode(data)
    assert back == SPECS and [s.arguments for s in back] == [s.arguments for s in SPECS]
    assert (valid, records) == (len(data), 2)
    assert decode(encode([]))[0] == []


def test_records_appended_after_the_table_add_and_remove_rows_in_order():
    extra = MemberSpec("c3", "/", "more", ("n1",), {}, 5)
    data = encode(SPECS) + removed(["a1"]) + added([extra]) + added([SPECS[0]])
    assert decode(data)[0] == [SPECS[1], extra, SPECS[0]]


@pytest.mark.parametrize("tear", [
    lambda tail: tail[:-1],                       # the last record cut short
    lambda tail: tail[:3],                        # its header cut short
    lambda tail: flip(tail, len(tail) - 1),       # whole, but not all of it reached the disk
    lambda tail: bytes(len(tail)),                # zero fill where it was to go
])
def test_a_torn_last_record_is_left_out(tear):
    table = encode(SPECS)
    specs, valid, _ = decode(table + tear(removed(["a1"])))
    assert specs == SPECS and valid == len(table)


@pytest.mark.parametrize("damage", [
    lambda b: flip(b, HEADER + 8),                # the first record's payload, records after it
    lambda b: b"XXXX" + b[4:],                    # not a table
    lambda b: b[:2],
    lambda b: b"",
])
def test_damage_before_the_last_record_is_an_error(damage):
    with pytest.raises(CorruptMemberTable):
        decode(damage(encode(SPECS) + removed(["b2"])))


def test_starts_and_deletes_append_and_survive_a_reload(tmp_path):
    disk = RealDisk(str(tmp_path))
    table = MemberTable(disk, PATH)
    assert table.load() == []
    table.add(SPECS)
    size = disk.size(PATH)
    table.remove(["a1"])
    assert disk.size(PATH) > size  # appended, not written again
    assert MemberTable(RealDisk(str(tmp_path)), PATH).load() == [SPECS[1]]


def test_the_table_is_written_whole_again_once_garbage_outweighs_it(tmp_path, monkeypatch):
    monkeypatch.setattr(member_table, "garbage_max", 4)
    disk = RealDisk(str(tmp_path))
    table = MemberTable(disk, PATH)
    table.load()
    for i in range(10):
        table.add([MemberSpec(f"u{i}", "/", f"q{i}", ("n1",))])
        table.remove([f"u{i}"])
    table.add(SPECS)
    _, _, records = decode(disk.read_file(PATH))
    assert records <= len(SPECS) + 4
    assert MemberTable(RealDisk(str(tmp_path)), PATH).load() == SPECS


def test_a_torn_tail_is_cut_on_load_and_the_table_goes_on_from_there(tmp_path):
    disk = RealDisk(str(tmp_path))
    disk.open(PATH)
    disk.append(PATH, encode(SPECS) + removed(["a1"])[:-2])
    table = MemberTable(disk, PATH)
    assert table.load() == SPECS
    assert disk.size(PATH) == len(encode(SPECS))
    table.remove(["b2"])
    assert MemberTable(RealDisk(str(tmp_path)), PATH).load() == [SPECS[0]]


def test_a_table_of_another_version_is_an_error_not_an_empty_table():
    """Only version 2 (CRC-32C framed records) is read; version 1 was never released."""
    with pytest.raises(CorruptMemberTable):
        decode(struct.pack("<4sB", b"WQMT", 1) + encode(SPECS)[5:])

