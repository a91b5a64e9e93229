"""The queue index on real files: embedding, segments, recovery terms, torn tails."""
import random

import pytest

from persist.classic.queue_index import TERMS_FILE, QueueIndex
from tests.classic_store.crashdisk import CrashDisk

N = 4  # entries per segment


@pytest.fixture
def disk(tmp_path):
    d = CrashDisk(str(tmp_path))
    yield d
    d.close()


def opened(disk, **kw) -> tuple[QueueIndex, object]:
    index = QueueIndex(disk, "q", segment_entries=N)
    return index, index.recover(**kw)


def pub(seq, persistent=True, payload=b"m", expiry=None):
    """A PUB record of 10 bytes (header + body), 7 of them body."""
    return (seq, persistent, None if payload else b"guid%d" % seq, 10,
            (payload[:1], payload[1:]) if payload else None, 7, expiry)


def read_all(index, lo, hi):
    out = []
    while lo < hi:
        found, lo = index.read(lo, hi)
        out += found
    return out


def test_segments_are_files_of_n_entries_and_embedded_bodies_read_back(disk):
    index, _ = opened(disk)
    locs = index.publish([pub(s, payload=b"body%d" % s) for s in range(10)])
    assert disk.listdir("q") == ["0.idx", "1.idx", "2.idx"]
    assert index.read_bodies([locs[9], locs[0]]) == [b"body9", b"body0"]
    found, nxt = index.read(2, 10)
    assert [f[0] for f in found] == [2, 3] and nxt == 4
    assert found[0][4] == locs[2]


def test_a_fully_acked_segment_is_deleted_at_sync(disk):
    index, _ = opened(disk)
    index.publish([pub(s) for s in range(6)])
    index.ack([(s, True, 10, 7) for s in range(4)] + [(4, True, 10, 7)])
    index.sync()
    assert disk.listdir("q") == ["1.idx"]
    assert [f[0] for f in read_all(index, 0, 6)] == [5]


def test_the_segment_the_next_publish_goes_to_is_kept_while_empty_and_dropped_at_recovery(disk):
    index, _ = opened(disk)
    index.publish([pub(s) for s in range(6)])
    index.ack([(s, True, 10, 7) for s in range(6)])
    index.sync()
    assert disk.listdir("q") == ["1.idx"]  # seq 6 goes to segment 1: a drained queue keeps its file
    index.publish([pub(6)])
    index.ack([(6, True, 10, 7)])
    index.sync()
    assert disk.listdir("q") == ["1.idx"]
    disk.crash(random.Random(1))
    again, r = opened(disk)
    assert (r.messages, r.next_seq) == (0, 7) and disk.listdir("q") == []


def test_an_empty_segment_the_next_publish_goes_to_is_cut_back_once_it_holds_more_than_the_bound(disk, monkeypatch):
    monkeypatch.setattr("persist.classic.queue_index.empty_head_bytes_max", 100)
    index, _ = opened(disk)
    index.publish([pub(0)])
    index.ack([(0, True, 10, 7)])
    index.sync()
    small = disk.size("q/0.idx")
    assert 0 < small <= 100  # under the bound: left as it is
    index.publish([pub(1), pub(2)])
    index.ack([(1, True, 10, 7), (2, True, 10, 7)])
    index.sync()
    assert disk.listdir("q") == ["0.idx"] and disk.size("q/0.idx") == 0  # past it: cut back
    locs = index.publish([pub(3, payload=b"body3")])
    assert index.read_bodies(locs) == [b"body3"]  # offsets start again from the cut
    index.close()
    again, r = opened(disk)
    assert (r.messages, r.next_seq) == (1, 4)
    assert [f[0] for f in read_all(again, r.lo, r.next_seq)] == [3]


def test_records_are_written_at_sync_and_before_a_read_and_early_past_the_bound(disk, monkeypatch):
    index, _ = opened(disk)
    locs = index.publish([pub(0, payload=b"body0"), pub(1, payload=b"body1")])
    index.deliver([0])
    assert disk.size("q/0.idx") == 0  # gathered, not written
    assert index.read_bodies([locs[1]]) == [b"body1"]  # a read writes them out first
    index.publish([pub(2)])
    index.sync()
    size = disk.size("q/0.idx")
    disk.crash(random.Random(1))
    assert disk.size("q/0.idx") == size  # everything the sync covered survives
    again, r = opened(disk)
    assert [f[0] for f in read_all(again, r.lo, r.next_seq)] == [0, 1, 2]
    monkeypatch.setattr("persist.classic.queue_index.pending_bytes_max", 60)
    again.publish([pub(s) for s in range(3, 8)])  # ~40 bytes a record
    assert disk.size("q/1.idx") > 0  # written without a sync once past the bound


def test_clean_stop_uses_recovery_terms_and_keeps_delivered_flags(disk):
    index, _ = opened(disk)
    index.publish([pub(s) for s in range(6)] + [pub(6, persistent=False)])
    index.deliver([1, 2])
    index.ack([(2, True, 10, 7)])
    index.close()
    again, r = opened(disk)
    assert r.clean and (r.messages, r.bytes, r.body_bytes, r.next_seq) == (5, 50, 35, 7)
    assert not disk.exists(f"q/{TERMS_FILE}")
    found = read_all(again, r.lo, r.next_seq)
    assert [(f[0], f[5]) for f in found] == [(0, False), (1, True), (3, False), (4, False),
                                              (5, False)]  # the transient 6 is gone


def test_crash_cuts_a_torn_tail_and_marks_everything_delivered(disk, capsys):
    index, _ = opened(disk)
    index.publish([pub(s) for s in range(3)])
    index.sync()
    index.publish([pub(s) for s in range(3, 6)])
    index.ack([(0, True, 10, 7)])
    disk.crash(random.Random(3), torn=True)
    again, r = opened(disk)
    assert not r.clean
    found = read_all(again, r.lo, r.next_seq)
    seqs = [f[0] for f in found]
    assert seqs[:3] == [0, 1, 2]  # synced ones survive; the unsynced ack was lost
    # unsynced appends to different segment files survive or not independently
    assert seqs == sorted(set(seqs)) and set(seqs) <= set(range(6)) and all(f[5] for f in found)
    if r.torn_bytes:
        assert "queue_index_torn_tail_cut" in capsys.readouterr().out


def test_entries_whose_store_body_is_missing_are_dropped(disk):
    index, _ = opened(disk)
    index.publish([pub(0, payload=None), pub(1, payload=None), pub(2)])
    index.sync()
    disk.crash(random.Random(0))
    again, r = opened(disk, check_guid=lambda g: g != b"guid1")
    assert (r.messages, r.dropped) == (2, 1)
    assert [f[0] for f in read_all(again, r.lo, r.next_seq)] == [0, 2]


def test_expiry_and_body_size_round_trip_through_a_clean_stop_without_reading_a_segment(disk):
    index, _ = opened(disk)
    index.publish([pub(0, expiry=0), pub(1), pub(2, expiry=1_700_000_000_123, payload=None),
                   pub(3, expiry=5), pub(4, persistent=False, expiry=9)])
    index.ack([(3, True, 10, 7)])
    index.close()
    reads = []
    read = disk.read
    disk.read = lambda path, *a: reads.append(path) or read(path, *a)
    again, r = opened(disk)
    assert r.clean and not [p for p in reads if p.endswith(".idx")]  # the terms were enough
    assert (r.messages, r.bytes, r.body_bytes) == (3, 30, 21)
    found = read_all(again, r.lo, r.next_seq)
    # seq, body size, expiry: an expiry of 0 is kept (it is not "none")
    assert [(f[0], f[6], f[7]) for f in found] == [(0, 7, 0), (1, 7, None), (2, 7, 1_700_000_000_123)]


def test_expiry_and_body_bytes_survive_a_crash_recovered_by_scan(disk):
    index, _ = opened(disk)
    index.publish([pub(s, expiry=1000 + s if s % 2 else None) for s in range(6)])
    index.ack([(1, True, 10, 7)])
    index.sync()
    disk.crash(random.Random(1))
    again, r = opened(disk)
    assert not r.clean
    assert (r.messages, r.bytes, r.body_bytes) == (5, 50, 35)
    found = read_all(again, r.lo, r.next_seq)
    assert [(f[0], f[7]) for f in found] == [(0, None), (2, None), (3, 1003), (4, None), (5, 1005)]
    again.ack([(3, True, 10, 7)])
    again.close()
    _, r = opened(disk)
    assert (r.messages, r.body_bytes) == (4, 28)
