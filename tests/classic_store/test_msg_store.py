"""The shared message store on real files: refcounts, rolling files, GC, recovery."""
import random

import pytest

from persist.classic.msg_store import CLEAN_FILE, MsgStore
from persist.disk import RealDisk
from tests.classic_store.crashdisk import CrashDisk

LIMIT = 1000


def opened(disk, transient=False) -> MsgStore:
    store = MsgStore(disk, "store", transient=transient, file_size_limit=LIMIT)
    store.open()
    return store


@pytest.fixture
def disk(tmp_path):
    d = CrashDisk(str(tmp_path))
    yield d
    d.close()


def guid(i: int) -> bytes:
    return b"g%07d" % i


def rdq_files(disk) -> list[str]:
    return [n for n in disk.listdir("store") if n.endswith(".rdq")]


def test_a_message_routed_to_several_queues_is_stored_once(disk):
    store = opened(disk)
    store.write([(guid(1), b"x" * 100)])
    store.write([(guid(1), b"x" * 100), (guid(1), b"x" * 100)])
    assert store.sync() == [guid(1)] * 3
    s = store.summary()
    assert s.messages == 1 and s.live_bytes < 200
    store.remove([guid(1), guid(1)])
    assert store.read([guid(1)]) == [b"x" * 100] and store.summary().garbage_bytes == 0
    store.remove([guid(1)])
    assert not store.contains(guid(1)) and store.summary().live_bytes == 0


def test_files_roll_at_the_size_limit_and_reads_come_back(disk):
    store = opened(disk)
    store.write([(guid(i), bytes([i]) * 300) for i in range(10)])
    assert len(rdq_files(disk)) == 4  # three 311-byte records fit in 1000 bytes
    assert all(disk.size(f"store/{n}") <= LIMIT for n in rdq_files(disk))
    wanted = [guid(i) for i in (7, 0, 3)]
    assert store.read(wanted) == [bytes([i]) * 300 for i in (7, 0, 3)]


def test_a_batch_is_one_gathered_write_per_file_and_bodies_are_not_copied(disk, monkeypatch):
    """Group commit's write side: one writev per touched file, the callers' body objects among its
    pieces (16 KiB bodies go to the kernel as they are), and offsets that read back."""
    writes = []
    real = disk.append_parts
    monkeypatch.setattr(disk, "append_parts",
                        lambda path, parts: writes.append((path, list(parts))) or real(path, parts))
    store = opened(disk)
    bodies = [bytes([i]) * 300 for i in range(5)]  # 311-byte records: three per 1000-byte file
    store.write([(guid(i), (b"head", body)) for i, body in enumerate(bodies)])
    assert [path for path, _ in writes] == ["store/0.rdq", "store/1.rdq"]
    assert all(any(part is body for _, parts in writes for part in parts) for body in bodies)
    assert store.read([guid(i) for i in range(5)]) == [b"head" + body for body in bodies]


def test_gc_deletes_garbage_files_and_merges_neighbours(disk):
    store = opened(disk)
    store.write([(guid(i), bytes([i]) * 300) for i in range(12)])  # files 0..3 hold 3 each
    store.remove([guid(i) for i in (0, 1, 2)])  # file 0: all garbage
    store.remove([guid(i) for i in (3, 4, 6, 7)])  # files 1, 2: 1 live of 3 each
    before = sum(disk.size(f"store/{n}") for n in rdq_files(disk))
    assert store.collect_garbage() == 2
    s = store.summary()
    assert (s.files_deleted, s.gc_runs, s.files) == (1, 1, 2)
    after = sum(disk.size(f"store/{n}") for n in rdq_files(disk))
    assert after == s.disk_bytes and after < before - 5 * 300
    assert store.read([guid(5), guid(8), guid(11)]) == [bytes([i]) * 300 for i in (5, 8, 11)]


def test_clean_stop_saves_the_index_and_the_next_start_deletes_it(disk):
    store = opened(disk)
    store.write([(guid(i), b"%d" % i * 50) for i in range(5)])
    store.write([(guid(1), b"1" * 50)])
    store.remove([guid(2)])
    store.close()
    again = opened(disk)
    assert not again.recovering and not disk.exists(f"store/{CLEAN_FILE}")
    assert again.summary() == store.summary()
    again.remove([guid(1)])
    assert again.contains(guid(1))  # its refcount of 2 survived


def test_crash_recovery_scans_cuts_the_torn_tail_and_needs_references(disk, capsys):
    store = opened(disk)
    store.write([(guid(i), b"a" * 100) for i in range(3)])
    store.sync()
    store.write([(guid(3), b"b" * 100)])
    disk.crash(random.Random(1), torn=True)
    again = opened(disk)
    assert again.recovering
    assert "msg_store_torn_tail_cut" in capsys.readouterr().out
    assert [again.contains(guid(i)) for i in range(4)] == [True, True, True, False]
    assert again.add_ref(guid(0)) and not again.add_ref(guid(9))
    assert again.finish_recovery() == 2
    assert again.summary().messages == 1 and again.read([guid(0)]) == [b"a" * 100]


def test_the_transient_store_starts_empty(disk):
    store = opened(disk, transient=True)
    store.write([(guid(1), b"t" * 10)])
    store.close()
    assert opened(disk, transient=True).summary().messages == 0


def test_real_fdatasync_path_works(tmp_path):
    disk = RealDisk(str(tmp_path))
    store = opened(disk)
    store.write([(guid(1), b"z" * 10)])
    assert store.sync() == [guid(1)] and disk.syncs >= 1
    disk.close()
