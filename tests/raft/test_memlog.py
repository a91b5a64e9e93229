"""MemoryLog: the simulated disk's contract (unsynced writes are lost on a crash)."""
from raft import Entry, MemoryLog


def entries(lo, hi, term=1):
    return [Entry(i, term, b"x%d" % i) for i in range(lo, hi + 1)]


def test_crash_loses_unsynced_entries_only():
    log = MemoryLog()
    log.append(entries(1, 3))
    assert log.sync() == 3
    log.append(entries(4, 5))
    log.save_hard_state(2, "b")
    log.crash()
    assert log.last_index_term() == (3, 1)
    assert log.written_index() == 3
    assert log.hard_state() == (2, "b")


def test_stale_written_notification_does_not_cover_replaced_entries():
    log = MemoryLog()
    log.append(entries(1, 3))
    upto = log.sync()
    log.truncate_from(3)
    log.append(entries(3, 3, term=2))
    log.set_written(upto)
    assert log.written_index() == 2


def test_entries_half_open_and_byte_limit():
    log = MemoryLog()
    log.append(entries(1, 5))
    assert [e.index for e in log.entries(2, 4)] == [2, 3]
    assert [e.index for e in log.entries(2, 6, max_bytes=5)] == [2, 3]
    assert [e.index for e in log.entries(2, 6, max_bytes=1)] == [2]


def test_snapshot_and_compaction_keep_live_entries():
    log = MemoryLog()
    log.append(entries(1, 6))
    log.sync()
    log.install_snapshot(4, 1, b"snap")
    assert log.term_at(4) == 1 and log.last_index_term() == (6, 1)
    log.compact_below(3)
    assert log.term_at(2) is None and log.term_at(3) == 1
    log.compact_below(10)  # never past snapshot + 1
    assert log.term_at(5) == 1 and log.term_at(4) == 1


def test_snapshot_not_matching_discards_log():
    log = MemoryLog()
    log.append(entries(1, 3))
    log.install_snapshot(7, 3, b"s")
    assert log.last_index_term() == (7, 3)
    assert log.written_index() == 7
    log.crash()
    assert log.last_index_term() == (7, 3) and log.snapshot_data() == b"s"
