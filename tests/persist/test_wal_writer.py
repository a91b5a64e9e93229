"""The WAL writer and MemberLog over a simulated disk and real files."""
from __future__ import annotations

import random

import pytest
from structlog.testing import capture_logs

from persist.disk import RealDisk
from raft.log import Entry
from persist.wal.records import scan
from persist.wal.writer import LogGapError, WalWriter
from tests.sim.simdisk import SimCrash, SimDisk


def es(lo: int, hi: int, term: int = 1, size: int = 8) -> list[Entry]:
    return [Entry(i, term, bytes([i % 251]) * size) for i in range(lo, hi + 1)]


def open_writer(disk, **kw) -> WalWriter:
    kw.setdefault("wal_max_size_bytes", 1 << 20)
    kw.setdefault("segment_max_entries", 4)
    writer = WalWriter(disk, **kw)
    writer.recover()
    return writer


@pytest.fixture(params=["sim", "real"])
def disk(request, tmp_path):
    if request.param == "sim":
        yield SimDisk(random.Random(7))
        return
    real = RealDisk(str(tmp_path / "data"), sync_method="none")
    yield real
    real.close()


def test_one_flush_is_one_write_and_one_sync_for_many_members():
    disk = SimDisk()
    writer = open_writer(disk)
    logs = [writer.member(f"q{i}") for i in range(50)]
    syncs = disk.syncs
    for n, member_log in enumerate(logs):
        member_log.append(es(1, n % 3 + 1))
    written = writer.flush()
    assert disk.syncs == syncs + 1
    assert written == {f"q{n}": n % 3 + 1 for n in range(50)}
    assert writer.flush() == {} and disk.syncs == syncs + 1


def test_written_index_moves_only_after_the_flush():
    writer = open_writer(SimDisk())
    log = writer.member("q")
    log.append(es(1, 3))
    log.set_written(3)  # a notification that no sync has covered yet
    assert log.written_index() == 0
    for member, upto in writer.flush().items():
        writer.logs[member].set_written(upto)
    assert log.written_index() == 3


def test_stale_written_notification_does_not_mark_replacements_written():
    writer = open_writer(SimDisk())
    log = writer.member("q")
    log.append(es(1, 5))
    stale = writer.flush()["q"]
    log.truncate_from(4)
    log.append(es(4, 5, term=2))
    assert log.written_index() == 0
    log.set_written(stale)
    assert log.written_index() == 3  # 4 and 5 are the term-2 replacements, not yet synced


def test_rollover_moves_entries_to_segments_at_segment_boundaries_and_frees_memory(disk):
    writer = open_writer(disk, wal_max_size_bytes=400, segment_max_entries=4)
    a, b = writer.member("a"), writer.member("b")
    a.append(es(1, 10))
    b.append(es(1, 3))
    writer.flush()
    assert writer.rollovers == 1
    assert a.segments.files == [("00000001.segment", 1, 4), ("00000002.segment", 5, 8),
                                ("00000003.segment", 9, 10)]
    assert b.segments.files == [("00000001.segment", 1, 3)]
    assert writer.core.memtable("a").items == [] and writer.core.memtable("a").nbytes == 0
    assert disk.listdir("wal") == [writer.current_file.split("/")[1]]
    a.append(es(11, 22))
    b.append(es(4, 6))  # the WAL's runs are compact: this crosses 400 bytes again
    writer.flush()
    assert writer.rollovers == 2
    assert a.entries(1, 23) == es(1, 22)
    assert a.entries(3, 12) == es(3, 11)
    assert a.segments.files[2:] == [("00000003.segment", 9, 12), ("00000004.segment", 13, 16),
                                    ("00000005.segment", 17, 20), ("00000006.segment", 21, 22)]


def test_entries_respects_max_bytes_across_segments_and_memtable():
    writer = open_writer(SimDisk(), wal_max_size_bytes=300)
    log = writer.member("a")
    log.append(es(1, 6, size=10))
    writer.flush()
    log.append(es(7, 9, size=10))
    assert log.entries(1, 10, max_bytes=35) == es(1, 3, size=10)
    assert log.entries(5, 10, max_bytes=25) == es(5, 6, size=10)
    assert log.entries(5, 10, max_bytes=5) == es(5, 5, size=10)  # at least one
    assert log.entries(7, 10, max_bytes=0) == es(7, 7, size=10)


def test_recovery_after_clean_stop(disk):
    writer = open_writer(disk, wal_max_size_bytes=400)
    a, b = writer.member("q/a"), writer.member("q b")
    a.append(es(1, 12))
    a.save_hard_state(3, "n2")
    writer.flush()
    b.append(es(1, 2, term=2))
    a.append(es(13, 14, term=3))
    writer.flush()
    logs = open_writer(disk, wal_max_size_bytes=400).logs
    assert sorted(logs) == ["q b", "q/a"]
    assert logs["q/a"].entries(1, 100) == es(1, 12) + es(13, 14, term=3)
    assert logs["q/a"].hard_state() == (3, "n2")
    assert logs["q/a"].written_index() == 14
    assert logs["q b"].last_index_term() == (2, 2)


def test_recovery_keeps_copies_of_the_commands_above_the_floor_not_views_of_the_file(disk):
    """Recovery scans a WAL file with views into its buffer: an entry holding a view would keep
    the whole file in memory for as long as the entry lives."""
    writer = open_writer(disk, segment_max_entries=100)
    log = writer.member("q")
    log.append(es(1, 30, size=64))
    writer.flush()
    log.install_snapshot(20, 1, b"state@20")
    log.compact_below(21)
    writer.flush()
    recovered = open_writer(disk, segment_max_entries=100).logs["q"]
    assert recovered.first_index() == 21
    kept = recovered.entries(21, 100)
    assert kept == es(21, 30, size=64)
    assert all(type(e.command) is bytes for e in kept)


def test_crash_with_a_torn_tail_cuts_the_file_and_says_so():
    disk = SimDisk(random.Random(3))
    writer = open_writer(disk)
    log = writer.member("q")
    log.append(es(1, 3))
    writer.flush()
    log.append(es(4, 4, size=100))
    disk.arm_crash(0)
    with pytest.raises(SimCrash):
        writer.flush()
    path = writer.current_file
    disk.crash(torn=True)
    torn = scan(disk.read(path)).cut
    assert torn is not None and not torn.blank  # part of the batch, over the zeros written ahead
    with capture_logs() as events:
        logs = open_writer(disk).logs
    cut = [e for e in events if e["event"] == "wal_torn_tail_cut"]
    assert len(cut) == 1 and cut[0]["path"] == path and cut[0]["log_level"] == "warning"
    assert cut[0]["offset"] == torn.offset == disk.size(path)
    assert logs["q"].entries(1, 10) == es(1, 3)


def test_batches_overwrite_the_zeros_written_ahead_and_their_tail_is_no_torn_tail(disk):
    writer = open_writer(disk, prealloc_bytes=4096)
    path = writer.current_file
    assert disk.size(path) == 4096 and disk.read(path) == bytes(4096)
    log = writer.member("q")
    log.append(es(1, 3))
    writer.flush()
    assert disk.size(path) == 4096  # written in place
    log.append(es(4, 40, size=200))  # past the zeros: another stretch beyond the batch
    writer.flush()
    records_end = scan(disk.read(path)).valid_bytes
    assert disk.size(path) == records_end + 4096
    with capture_logs() as events:
        recovered = open_writer(disk, prealloc_bytes=4096)
    assert not [e for e in events if e["event"] == "wal_torn_tail_cut"]
    assert disk.size(path) == records_end  # the zeros after the records are cut, silently
    assert recovered.logs["q"].entries(1, 41) == es(1, 3) + es(4, 40, size=200)


def test_crash_without_sync_loses_the_unsynced_batch_only():
    disk = SimDisk()
    writer = open_writer(disk)
    log = writer.member("q")
    log.append(es(1, 3))
    writer.flush()
    log.append(es(4, 6))
    disk.crash()
    assert open_writer(disk).logs["q"].last_index_term() == (3, 1)


@pytest.mark.parametrize("sync_points", range(0, 9))
def test_crash_anywhere_in_a_rollover_loses_nothing_that_was_written(sync_points):
    disk = SimDisk(random.Random(sync_points))
    writer = open_writer(disk, wal_max_size_bytes=300, segment_max_entries=3)
    a, b = writer.member("a"), writer.member("b")
    a.append(es(1, 4))
    writer.flush()
    a.append(es(5, 9))
    b.append(es(1, 2))
    disk.arm_crash(sync_points)
    try:
        writer.flush()
        crashed_in_wal_sync = False
    except SimCrash:
        crashed_in_wal_sync = sync_points == 0
    disk.crash(torn=True)
    logs = open_writer(disk, wal_max_size_bytes=300, segment_max_entries=3).logs
    if crashed_in_wal_sync:
        assert logs["a"].entries(1, 20)[:4] == es(1, 4)
    else:
        assert logs["a"].entries(1, 20) == es(1, 9) and logs["b"].entries(1, 5) == es(1, 2)


def test_a_missing_segment_file_is_a_gap_reported_clearly():
    disk = SimDisk()
    writer = open_writer(disk, wal_max_size_bytes=200, segment_max_entries=2)
    log = writer.member("q")
    log.append(es(1, 8))
    writer.flush()
    disk.remove("members/q/00000002.segment")
    with capture_logs() as events, pytest.raises(LogGapError) as err:
        open_writer(disk, wal_max_size_bytes=200, segment_max_entries=2)
    assert err.value.gaps[0].missing_lo == 3 and err.value.gaps[0].missing_hi == 4
    assert "member 'q': log indices 3..4 missing between segment files" in str(err.value)
    assert [e["event"] for e in events if e["log_level"] == "error"] == ["raft_log_gap"]


def test_a_wal_that_skips_past_the_segments_is_a_gap():
    disk = SimDisk()
    writer = open_writer(disk, wal_max_size_bytes=200, segment_max_entries=2)
    log = writer.member("q")
    log.append(es(1, 8))
    writer.flush()
    log.append(es(9, 9))
    writer.flush()
    for name in disk.listdir("members/q"):
        if name.endswith(".segment") and name != "00000001.segment":
            disk.remove(f"members/q/{name}")
    with pytest.raises(LogGapError, match=r"indices 3\.\.8 missing before WAL entry 9"):
        open_writer(disk, wal_max_size_bytes=200, segment_max_entries=2)


@pytest.mark.parametrize("roll_between", [False, True])
def test_truncate_then_higher_term_entries_win_on_recovery(disk, roll_between):
    size = 250 if roll_between else 1 << 20
    writer = open_writer(disk, wal_max_size_bytes=size, segment_max_entries=3)
    log = writer.member("q")
    log.append(es(1, 8, term=1))
    writer.flush()
    log.truncate_from(5)
    log.append(es(5, 6, term=2))
    writer.flush()
    expected = es(1, 4) + es(5, 6, term=2)
    assert log.entries(1, 10) == expected
    recovered = open_writer(disk, wal_max_size_bytes=size, segment_max_entries=3).logs["q"]
    assert recovered.entries(1, 10) == expected
    assert recovered.last_index_term() == (6, 2)
    recovered.append(es(7, 7, term=2))


def test_truncation_alone_is_durable_after_flush():
    disk = SimDisk()
    writer = open_writer(disk, wal_max_size_bytes=150, segment_max_entries=3)
    log = writer.member("q")
    log.append(es(1, 8))
    writer.flush()
    assert writer.rollovers == 1
    log.truncate_from(2)
    writer.flush()
    disk.crash()
    recovered = open_writer(disk, wal_max_size_bytes=150, segment_max_entries=3).logs["q"]
    assert recovered.entries(1, 10) == es(1, 1)


def test_snapshot_compact_below_and_recovery(disk):
    writer = open_writer(disk, wal_max_size_bytes=300, segment_max_entries=3)
    log = writer.member("q")
    log.append(es(1, 12))
    writer.flush()
    log.append(es(13, 14))
    writer.flush()
    log.install_snapshot(10, 1, b"state@10")  # the log holds (10, 1): the suffix is kept
    assert log.snapshot_meta() == (10, 1) and log.entries(1, 3) == es(1, 2)
    log.compact_below(8)
    assert log.term_at(7) is None and log.term_at(8) == 1 and log.term_at(10) == 1
    assert [f for f, lo, hi in log.segments.files][0] == "00000003.segment"  # 7..9
    recovered = open_writer(disk, wal_max_size_bytes=300, segment_max_entries=3).logs["q"]
    assert recovered.snapshot_meta() == (10, 1) and recovered.snapshot_data() == b"state@10"
    assert recovered.first_index() == 8
    assert recovered.entries(8, 20) == es(8, 14)
    recovered.compact_below(50)  # clamped to snapshot index + 1
    assert recovered.first_index() == 11 and recovered.term_at(10) == 1


def test_snapshot_that_conflicts_discards_the_whole_log(disk):
    writer = open_writer(disk, wal_max_size_bytes=300, segment_max_entries=3)
    log = writer.member("q")
    log.append(es(1, 12))
    writer.flush()
    log.install_snapshot(6, 3, b"s")
    assert log.last_index_term() == (6, 3) and log.term_at(5) is None and log.written_index() == 6
    log.append(es(7, 8, term=3))
    writer.flush()
    recovered = open_writer(disk, wal_max_size_bytes=300, segment_max_entries=3).logs["q"]
    assert recovered.first_index() == 7 and recovered.entries(7, 20) == es(7, 8, term=3)
    assert recovered.last_index_term() == (8, 3)


def test_corrupt_snapshot_is_an_error_not_absence():
    from persist.wal.snapshots import CorruptStateFile
    disk = SimDisk()
    writer = open_writer(disk)
    writer.member("q").install_snapshot(3, 1, b"state")
    disk.flip_byte("members/q/snapshot", 30)
    with pytest.raises(CorruptStateFile):
        open_writer(disk)


def test_hard_state_is_a_wal_record_durable_with_the_next_flush_and_across_rollovers():
    disk = SimDisk(random.Random(5))
    writer = open_writer(disk, wal_max_size_bytes=300)
    log = writer.member("q")
    log.save_hard_state(2, "n1")
    assert log.hard_state() == (2, "n1") and log.durable_hard_state() == (0, None)
    assert not disk.exists("members/q/meta")  # no small file per vote
    writer.flush()
    assert log.durable_hard_state() == (2, "n1")
    log.save_hard_state(3, None)  # not flushed: a crash forgets it, nobody saw it
    disk.crash()
    writer = open_writer(disk, wal_max_size_bytes=300)
    log = writer.logs["q"]
    assert log.hard_state() == (2, "n1")
    log.save_hard_state(4, "n3")
    log.append(es(1, 12))
    writer.flush()  # rolls over: the old WAL files go, the hard state is carried into the new one
    assert writer.rollovers == 1
    disk.crash()
    assert open_writer(disk, wal_max_size_bytes=300).logs["q"].hard_state() == (4, "n3")


def spread_writer(disk) -> WalWriter:
    """A WAL that rolls over at 400 bytes (about 14 entries) and writes 3 entries of segments
    per flush."""
    writer = open_writer(disk, wal_max_size_bytes=400, segment_max_entries=4)
    writer.roll_step_bytes = 3 * 8
    return writer


def test_a_rollover_spreads_over_flushes_while_appends_and_reads_go_on(disk):
    writer = spread_writer(disk)
    a = writer.member("a")
    a.append(es(1, 20))
    writer.flush()
    assert writer.rolling and writer.rollovers == 0 and a.segments.limit == 3
    assert len(disk.listdir("wal")) == 2  # the old file stays until every table is in segments
    a.append(es(21, 22))
    writer.flush()
    assert a.segments.limit == 6
    assert a.entries(1, 23) == es(1, 22) and [a.term_at(i) for i in (3, 4, 21)] == [1, 1, 1]
    while writer.rolling:
        writer.flush()
    assert writer.rollovers == 1 and a.segments.limit == 20 and len(disk.listdir("wal")) == 1
    assert a.entries(1, 23) == es(1, 22) and a.entries(2, 23, max_bytes=20) == es(2, 3)


def test_a_crash_in_the_middle_of_a_spread_rollover_loses_nothing_written():
    disk = SimDisk(random.Random(3))
    writer = spread_writer(disk)
    a, b = writer.member("a"), writer.member("b")
    a.append(es(1, 20))
    b.append(es(1, 4))
    writer.flush()
    a.append(es(21, 22))
    writer.flush()
    assert writer.rolling
    disk.crash(torn=True)
    logs = open_writer(disk, wal_max_size_bytes=400, segment_max_entries=4).logs
    assert logs["a"].entries(1, 30) == es(1, 22) and logs["b"].entries(1, 30) == es(1, 4)


def test_truncation_and_compaction_during_a_spread_rollover(disk):
    writer = spread_writer(disk)
    a = writer.member("a")
    a.append(es(1, 20))
    writer.flush()
    writer.flush()
    assert writer.rolling and a.segments.limit == 6  # the frozen table holds 1..20
    a.truncate_from(5)  # a follower's conflict: 5.. go, from the segments and the frozen table
    a.append(es(5, 7, term=2))
    writer.flush()
    expected = es(1, 4) + es(5, 7, term=2)
    assert a.entries(1, 10) == expected
    a.install_snapshot(2, 1, b"state")
    a.compact_below(3)
    while writer.rolling:
        writer.flush()
    assert a.entries(3, 10) == expected[2:] and writer.rollovers == 1
    recovered = open_writer(disk, wal_max_size_bytes=400, segment_max_entries=4).logs["a"]
    assert recovered.first_index() == 3 and recovered.entries(3, 10) == expected[2:]


def test_forgetting_deleted_members_leaves_nothing_of_them_in_memory():
    """A quorum host that declares and deletes queues for an hour keeps no per-member entry of
    the deleted ones (the soak found the members' encoded names kept, one per queue ever deleted)."""
    disk = SimDisk()
    writer = open_writer(disk)
    writer.member("keep").append(es(1, 2))
    baseline = (len(writer.logs), len(writer.core.mem), len(writer.core._member_bytes))
    for n in range(100):
        writer.member(f"gone{n}").append(es(1, 3))
        writer.flush()
        writer.forget(f"gone{n}")
    assert (len(writer.logs), len(writer.core.mem), len(writer.core._member_bytes)) == baseline
    assert writer.member("keep").entries(1, 3) == es(1, 2)
