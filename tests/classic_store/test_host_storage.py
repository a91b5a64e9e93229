"""The host storage (persist/classic/host_storage.py) over the simulated disk, through crashes: what a
flush made durable comes back and nothing else, a deleted queue stays deleted, a declared queue
writes nothing until its first commit, a crash in that commit leaves nothing recovery misreads,
and the transient tree is wiped at start."""
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
    syncs = disk.syncs + disk.dir_syncs
    s.delete_queue(*A)
    assert disk.listdir("queues") == [queue_dir(*B).split("/")[1]]
    assert disk.syncs + disk.dir_syncs == syncs  # the removal synced nothing
    disk.crash()  # the removal was not synced: a's directory comes back, and no queue names it
    s = storage(disk, [B])
    assert disk.listdir("queues") == [queue_dir(*B).split("/")[1]] and ready_ids(s, B) == [0]
    s = storage(disk, [])  # b was deleted while the host was down
    assert disk.listdir("queues") == []
    disk.crash()
    storage(disk, [])
    assert disk.listdir("queues") == []


def test_declaring_a_queue_writes_nothing_until_it_holds_a_message():
    disk = SimDisk(random.Random(7))
    s = storage(disk, [A])
    syncs = disk.syncs + disk.dir_syncs
    backing, _ = s.open_queue(*A, lazy=False)
    levels, _ = s.open_priority_queue(*B, 3, lazy=False)
    assert disk.listdir("queues") == [] and disk.syncs + disk.dir_syncs == syncs
    s.delete_queue(*A)
    s.close()  # a clean stop of queues that never wrote leaves nothing either
    assert disk.listdir("queues") == []


# the syncs of a new queue's first commit: its queue.name, its directory, the queues directory,
# its first segment, the segment's name in the directory; then those of the next queue's
FIRST_COMMIT_SYNCS = 5


@pytest.mark.parametrize("sync_points", range(FIRST_COMMIT_SYNCS + 2))
def test_a_crash_in_a_new_queues_first_commit_leaves_no_queue_or_a_whole_one(sync_points):
    """A crash at any sync of the commit that made a new queue's directory: recovery finds no
    queue (its message was never confirmed) or the named queue; once the commit is done it holds
    the message; and the queue can be declared and used again either way."""
    disk = SimDisk(random.Random(7))
    s = storage(disk, [A, B])
    disk.arm_crash(sync_points)
    with pytest.raises(SimCrash):
        for key in (A, B):
            backing, _ = s.open_queue(*key, lazy=False)
            backing.publish(messages([0]))
            backing.flush()
    disk.crash()
    s = storage(disk, [A, B])
    ready = ready_ids(s, A)
    assert ready == ([0] if sync_points >= FIRST_COMMIT_SYNCS else ready) and ready in ([], [0])
    backing, next_id = s.open_queue(*B, lazy=False)  # declared again after the crash: it works
    backing.publish(messages([next_id]))
    assert backing.flush() == [next_id]
    disk.crash()
    assert next_id in ready_ids(storage(disk, [A, B]), B)


def test_what_non_durable_queues_paged_out_is_wiped_at_the_next_start():
    disk = SimDisk(random.Random(7))
    s = storage(disk, [])
    (spill,) = s.open_transient_queue(*A, lazy=True)
    spill.extend(messages(range(10)), 0)
    assert disk.listdir("transient_queues/queue0") != []
    disk.crash()
    storage(disk, [])
    assert disk.listdir("transient_queues/queue0") == []
