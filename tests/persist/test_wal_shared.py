"""One WAL, members in several processes (persist/wal/writer.py's members-only mode, and
persist/wal/files.py as the WAL's own process runs it): each quorum host recovers only its own
members and never touches the files, a rollover runs in every host before the old files go, and a
batch written twice (sent again to a restarted WAL) replays to the same log."""
from __future__ import annotations

from persist.wal.core import Batch
from persist.wal.files import WalFiles
from persist.wal.writer import WalWriter
from raft.log import Entry
from tests.sim.simdisk import SimDisk


def es(lo: int, hi: int, term: int = 1) -> list[Entry]:
    return [Entry(i, term, b"%d" % i * 4) for i in range(lo, hi + 1)]


def host(disk: SimDisk, k: int, keep: set[str]) -> WalWriter:
    writer = WalWriter(disk, 1 << 30, 4, members_dir="members" if k == 0 else f"members{k}", own_files=False)
    writer.recover(keep=keep.__contains__)
    return writer


def owner(disk: SimDisk) -> WalFiles:
    files = WalFiles(disk, prealloc_bytes=512)
    files.replay(cut=True, apply=lambda _record: None)
    files.start_after_recovery()
    return files


def ship(files: WalFiles, writer: WalWriter) -> Batch:
    """What a host's WalClient and the WAL process do with one batch: send, write, sync, ack."""
    batch = writer.take_batch()
    assert batch is not None
    records = b"".join(batch.parts)
    files.write([records], len(records))
    files.sync()
    writer.durable(batch)
    return batch


def test_each_host_recovers_only_its_members_and_leaves_the_files_as_they_are() -> None:
    disk = SimDisk()
    files = owner(disk)
    h0, h1 = host(disk, 0, {"a"}), host(disk, 1, {"b"})
    h0.member("a").append(es(1, 3))
    h1.member("b").append(es(1, 5, term=2))
    ship(files, h0)
    ship(files, h1)
    assert h0.logs["a"].written_index() == 0 and h0.logs["a"]._synced_upto == 3
    before = {n: disk.read(f"wal/{n}") for n in files.names()}
    r0, r1 = host(disk, 0, {"a"}), host(disk, 1, {"b"})
    assert set(r0.logs) == {"a"} and set(r1.logs) == {"b"}
    assert [e.index for e in r0.logs["a"].entries(1, 10)] == [1, 2, 3]
    assert r1.logs["b"].last_index_term() == (5, 2)
    assert {n: disk.read(f"wal/{n}") for n in files.names()} == before  # read, never cut or started


def test_a_rollover_runs_in_every_host_then_the_old_files_go() -> None:
    disk = SimDisk()
    files = owner(disk)
    h0, h1 = host(disk, 0, {"a"}), host(disk, 1, {"b"})
    h0.member("a").append(es(1, 6))
    h1.member("b").append(es(1, 9))
    ship(files, h0)
    ship(files, h1)
    files.roll()  # the WAL process: a new file, then WalRoll to every host
    for writer, member in ((h0, "a"), (h1, "b")):
        writer.start_member_roll()
        writer.core.save_hard_state(member, 3, None)  # hard states into the new file
        ship(files, writer)
        while not writer.roll_step():
            pass
    h1.member("b").append(es(10, 11, term=3))  # appends go on into the new file
    ship(files, h1)
    assert files.remove_old() == 1 and len(files.names()) == 1
    r0, r1 = host(disk, 0, {"a"}), host(disk, 1, {"b"})
    assert [e.index for e in r0.logs["a"].entries(1, 20)] == list(range(1, 7))
    assert [e.index for e in r1.logs["b"].entries(1, 20)] == list(range(1, 12))
    assert r0.logs["a"].hard_state() == (3, None)
    assert r1.logs["b"].segments.limit == 9  # 1..9 from the segments, 10..11 from the WAL


def test_batches_sent_again_to_a_restarted_wal_replay_to_the_same_log() -> None:
    disk = SimDisk()
    files = owner(disk)
    h1 = host(disk, 1, {"b"})
    log = h1.member("b")
    log.append(es(1, 4))
    first = h1.take_batch()
    log.truncate_from(3)  # a follower's conflict, then the leader's entries
    log.append(es(3, 5, term=2))
    second = h1.take_batch()
    for batch in (first, second, first, second):  # both written, neither acked, both sent again
        records = b"".join(batch.parts)
        files.write([records], len(records))
    files.sync()
    recovered = host(disk, 1, {"b"}).logs["b"]
    assert [(e.index, e.term) for e in recovered.entries(1, 10)] == [(1, 1), (2, 1), (3, 2), (4, 2), (5, 2)]
