"""The pure WAL core: batches, written notifications, rollover decisions, replay and gaps."""
from __future__ import annotations

from raft.log import Entry
import pytest

from persist.wal.records import (ENTRY, RUN, TRUNCATE, BadRun, encode, encode_run, newer_hard_state,
                             run_entries, scan)
from persist.wal.core import Gap, MemberReplay, MemTable, WalCore


def es(lo: int, hi: int, term: int = 1) -> list[Entry]:
    return [Entry(i, term, b"c%d" % i) for i in range(lo, hi + 1)]


def test_one_batch_carries_every_member_and_reports_each_last_index():
    core = WalCore(max_size_bytes=1 << 20)
    core.submit("a", es(1, 3))
    core.submit("b", es(1, 1))
    core.submit("a", es(4, 5))
    batch = core.take_batch()
    assert batch.records == 6
    # one RUN record (one header, one CRC) per submit, each entry with its index and term
    records = scan(batch.data).records
    assert [(r.type, r.member, r.index) for r in records] == [(RUN, "a", 1), (RUN, "b", 1),
                                                               (RUN, "a", 4)]
    assert [[e for e in run_entries(r)] for r in records] == [es(1, 3), es(1, 1), es(4, 5)]
    assert core.written(batch) == {"a": 5, "b": 1}
    assert core.take_batch() is None


def test_hard_state_rides_in_the_batch_and_replays_newest_wins():
    core = WalCore(max_size_bytes=1 << 20)
    core.save_hard_state("a", 3, "n2")
    core.submit("a", es(1, 2))
    batch = core.take_batch()
    assert batch.hard == {"a": (3, "n2")} and batch.written == {"a": 2}
    core.save_hard_state("a", 4, None)
    later = core.take_batch()
    # whatever order the records are found in, the newer term wins, and a vote beats none
    for data in (batch.data + later.data, later.data + batch.data):
        replay = MemberReplay("a", 1, None, 0)
        for rec in scan(data).records:
            replay.apply(rec)
        assert replay.hard_state == (4, None)
    assert newer_hard_state((4, None), (4, "n1")) == (4, "n1")
    assert newer_hard_state((5, None), (4, "n1")) == (5, None)


def test_a_run_whose_entries_do_not_parse_is_refused():
    good = scan(b"".join(encode_run(es(1, 2), b"a"))).records[0]
    bad = scan(encode(RUN, 1, 0, good.payload[:-1], b"a")).records[0]  # valid CRC, short entry
    with pytest.raises(BadRun):
        run_entries(bad)


def test_truncation_only_batch_reports_the_index_below_the_cut():
    core = WalCore(max_size_bytes=1 << 20)
    core.submit("a", es(1, 5))
    core.written(core.take_batch())
    core.truncate("a", 3)
    batch = core.take_batch()
    assert [(r.type, r.index) for r in scan(batch.data).records] == [(TRUNCATE, 3)]
    assert core.written(batch) == {"a": 2}
    assert [e.index for e in core.memtable("a").items] == [1, 2]


def test_memtable_serves_entries_before_they_are_written():
    core = WalCore(max_size_bytes=1 << 20)
    core.submit("a", es(1, 3))
    assert core.memtable("a").slice(2, 10) == es(2, 3)


def test_rollover_is_decided_once_the_files_hold_max_size_and_freezes_the_memtables():
    core = WalCore(max_size_bytes=200)
    core.submit("a", es(1, 3))
    core.written(core.take_batch())
    assert not core.should_roll()
    core.submit("a", es(4, 10))
    assert not core.should_roll()  # pending records are not on disk yet
    core.written(core.take_batch())
    assert core.should_roll()
    core.start_roll()  # the tables freeze for the rollover; appends go on into fresh ones
    assert core.memtable("a").items == [] and core.bytes_since_roll == 0
    assert core.frozen["a"].slice(1, 11) == es(1, 10) and not core.should_roll()
    core.submit("a", es(11, 11))
    core.truncate("a", 9)  # a truncation cuts the frozen table too
    assert core.frozen["a"].last == 8 and core.memtable("a").items == []
    core.roll_done()
    assert core.frozen == {}


def test_memtable_truncate_and_drop_below_keep_byte_count():
    table = MemTable()
    table.append(es(1, 5))
    table.truncate_from(4)
    table.drop_below(2)
    assert (table.first, table.last, table.nbytes) == (2, 3, 4)
    table.truncate_from(1)
    assert (table.first, table.last, table.nbytes) == (1, None, 0)


def rec(index: int, term: int = 1, rtype: int = ENTRY):
    return scan(encode(rtype, index, term, b"x", b"m")).records[0]


def test_replay_new_entry_at_lower_index_replaces_the_tail():
    replay = MemberReplay("m", floor=1, seg_first=1, seg_last=10)
    for i in range(11, 14):
        replay.apply(rec(i))
    replay.apply(rec(8, term=2))  # Ra: writing index i drops i and above
    last, mem = replay.finish()
    assert (replay.seg_limit, last, mem.first) == (7, 8, 8)
    assert mem.items == [Entry(8, 2, b"x")]


def test_replay_reports_a_gap_instead_of_accepting_it():
    replay = MemberReplay("m", floor=1, seg_first=1, seg_last=10)
    replay.apply(rec(13))
    replay.apply(rec(14))
    assert replay.finish() == Gap("m", 11, 12, "before WAL entry 13")


def test_a_hole_closed_by_a_later_record_of_the_same_replay_is_no_gap():
    # A crash inside a rollover: segments already hold the file's result (cut down to 1), and
    # the old file, replayed again, writes 4..5 above the hole before truncating them away.
    replay = MemberReplay("m", floor=1, seg_first=1, seg_last=1)
    for r in (rec(4, rtype=TRUNCATE), rec(4), rec(5), rec(2, rtype=TRUNCATE), rec(2, term=2)):
        replay.apply(r)
    last, mem = replay.finish()
    assert last == 2 and mem.items == [Entry(2, 2, b"x")]


def test_replay_skips_below_floor_and_truncation_never_cuts_below_it():
    replay = MemberReplay("m", floor=6, seg_first=None, seg_last=0)
    replay.apply(rec(3))
    assert replay.finish()[0] == 5
    replay.apply(rec(6))
    replay.apply(rec(7))
    replay.apply(rec(2, rtype=TRUNCATE))
    last, mem = replay.finish()
    assert last == 5 and mem.items == []


def test_segments_starting_above_the_floor_are_a_gap():
    assert MemberReplay("m", 1, 5, 9).check_segments() == \
        Gap("m", 1, 4, "below the first segment (not covered by a snapshot)")
    assert MemberReplay("m", 5, 3, 9).check_segments() is None


def test_a_truncation_while_a_batch_is_in_flight_lowers_what_that_batch_reports():
    core = WalCore(max_size_bytes=1 << 20)
    core.submit("a", es(1, 5))
    core.submit("b", es(1, 2))
    in_flight = core.take_batch()  # being synced elsewhere (a thread, the WAL's process)
    core.truncate("a", 4)
    core.submit("a", es(4, 6, term=2))
    assert core.written(in_flight) == {"a": 3, "b": 2}  # not the replacing 4..6
    assert core.written(core.take_batch()) == {"a": 6}
