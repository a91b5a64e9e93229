"""The host storage (persist/classic/host_storage.py) over the simulated disk, through crashes: what a
flush made durable comes back and nothing else, a deleted queue stays deleted, a crash in the
middle of a declare leaves nothing recovery misreads, and the transient tree is wiped at start."""
from __future__ import annotations

import random

import pytest

from persist.classic.host_storage import HostStorage, queue_dir
from persist.classic.message import Message
from tests.sim.simdisk import SimCrash, SimDisk
from wire.properties import BasicProperties, encode_content_header

PERSISTENT = encode_content_header(60, 0, BasicProperties(delivery_mode=2))
A, B = ("/", "a"), ("/", "b")


def storage(disk: SimDisk, keep) -> HostStorage:
    s = HostStorage(disk, "queue0", embed_below=64, file_size_limit=1 << 16, placed_here=lambda v, n: True)
    s.recover(keep)
    return s


def messages(ids, size: int = 100) -> list[Message]:
    return [Message(i, False, "", "q", PERSISTENT, b"%d:" % i + b"m" * size) for i in ids]


def ready_ids(s: HostStorage, key) -> list[int]:
    backing, _ = s.open_queue(*key, lazy=False)
    return [m[0] for m in backing.fetch(1000)]


def test_flushed_messages_survive_a_crash_and_unflushed_ones_do_not():
    disk = SimDisk(random.Random(7))
    s = storage(disk, [A])
    backing, next_id = s.open_queue(*A, lazy=False)
    assert next_id == 0
    backing.publish(messages(range(0, 3)) + messages(range(3, 5), size=10))  # bodies in the store, and embedded
    assert backing.flush() == [0, 1, 2, 3, 4]
    backing.publish(messages([5, 6]))  # never flushed
    disk.crash()
    s = storage(disk, [A])
    assert ready_ids(s, A) == [0, 1, 2, 3, 4]


def test_a_deleted_queue_stays_deleted_and_one_gone_from_the_registry_is_deleted_at_recovery():
    disk = SimDisk(random.Random(7))
    s = storage(disk, [A, B])
    for key in (A, B):
        backing, _ = s.open_queue(*key, lazy=False)
        backing.publish(messages([0]))
        backing.flush()
    s.delete_queue(*A)
    disk.crash()
    assert disk.listdir("queues") == [queue_dir(*B).split("/")[1]]
    s = storage(disk, [])  # b was deleted while the host was down
    assert disk.listdir("queues") == []
    disk.crash()
    assert disk.listdir("queues") == []


@pytest.mark.parametrize(("sync_points", "recovered"), [(0, set()), (1, set()), (2, {A}), (3, {A})])
def test_a_crash_during_a_declare_leaves_no_queue_or_a_whole_one(sync_points, recovered):
    """A declare's sync points: queue.name's content, its rename (the queue's directory), the queues
    directory; the crash comes at one of them (or in the next declare's first): recovery finds no
    queue, or the named, empty queue, once queue.name's rename was durable."""
    disk = SimDisk(random.Random(7))
    s = storage(disk, [A])
    disk.arm_crash(sync_points)
    with pytest.raises(SimCrash):
        s.open_queue(*A, lazy=False)
        s.open_queue(*B, lazy=False)
    disk.crash()
    s = storage(disk, [A])
    assert set(s._recovered) == recovered
    assert ready_ids(s, A) == []
    backing, _ = s.open_queue(*B, lazy=False)  # a declare after the crash works
    assert backing.fetch(1) == []


def test_what_non_durable_queues_paged_out_is_wiped_at_the_next_start():
    disk = SimDisk(random.Random(7))
    s = storage(disk, [])
    (spill,) = s.open_transient_queue(*A, lazy=True)
    spill.extend(messages(range(10)), 0)
    assert disk.listdir("transient_queues/queue0") != []
    disk.crash()
    storage(disk, [])
    assert disk.listdir("transient_queues/queue0") == []
