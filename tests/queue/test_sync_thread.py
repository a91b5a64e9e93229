"""The group commit's syncs off the event loop: a RealDisk that defers its syncs (persist/disk.py)
and the queue host's sync thread (actors/queue/sync_thread.py), on real files with real fdatasync."""
from __future__ import annotations

import asyncio
import threading

import pytest

from actors.messages.channel_queue import Confirm, Publish
from actors.messages.node import CreateQueue
from actors.queue.sync_thread import ThreadSyncs
from persist.classic.host_storage import HostStorage
from persist.disk import RealDisk
from tests.queue.test_durable_queue import host_with_manager, published
from tests.waiting import async_until

deadline_s = 30.0


def test_deferred_syncs_are_collected_not_done_and_survive_the_file_going_away(tmp_path):
    disk = RealDisk(str(tmp_path))
    disk.makedirs("d")
    disk.open("d/f")
    disk.append("d/f", b"record")
    with disk.deferring() as collected:
        disk.sync("d/f")
        disk.fsync_dir("d")
    assert len(collected) == 2 and disk.syncs == 2  # counted when asked for
    disk.remove("d/f")  # closes the disk's own descriptor: the collected duplicate stays valid
    collected.run()
    assert len(collected) == 0  # synced and closed
    disk.open("d/g")
    disk.sync("d/g")  # outside the block: done at once again
    assert disk.syncs == 3


def test_a_failure_inside_the_block_closes_what_was_collected(tmp_path):
    disk = RealDisk(str(tmp_path))
    disk.open("f")
    with pytest.raises(RuntimeError):
        with disk.deferring() as collected:
            disk.sync("f")
            raise RuntimeError("boom")
    assert len(collected) == 0
    with disk.deferring() as again:  # the disk is usable, and deferring again
        disk.sync("f")
    assert len(again) == 1
    again.run()


def test_a_disk_that_does_not_sync_collects_nothing(tmp_path):
    disk = RealDisk(str(tmp_path), sync_method="none")
    disk.open("f")
    with disk.deferring() as collected:
        disk.sync("f")
        disk.fsync_dir("")
    assert len(collected) == 0


class Collected:
    """Stands in for DeferredSyncs: records the thread its `run` ran on."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.ran_on: int | None = None

    def __len__(self) -> int:
        return self.n

    def run(self) -> None:
        self.ran_on = threading.get_ident()


def test_the_sync_thread_runs_the_syncs_off_the_loop_and_calls_back_on_it(tmp_path):
    async def scenario() -> None:
        syncs = ThreadSyncs(RealDisk(str(tmp_path)))
        loop_thread = threading.get_ident()
        done_on: list[int] = []
        collected = Collected(1)
        syncs.run(collected, lambda: done_on.append(threading.get_ident()))
        assert done_on == []  # not before the syncs ran
        await async_until(lambda: done_on, "the syncs' callback", deadline_s, every_s=0.001, raises=False)
        assert done_on == [loop_thread] and collected.ran_on not in (None, loop_thread)
        syncs.run(Collected(0), lambda: done_on.append(0))
        assert done_on == [loop_thread, 0]  # nothing to sync: done at once
    asyncio.run(scenario())


def test_a_durable_queue_on_a_real_disk_confirms_once_its_sync_thread_synced(tmp_path):
    async def scenario() -> None:
        s = HostStorage(RealDisk(str(tmp_path / "data")), "queue0", embed_below=4096, file_size_limit=1 << 20,
                        placed_here=lambda v, n: True)
        s.recover([])
        runtime, manager, channel, ch = await host_with_manager(tmp_path, s)
        manager.receive(ch, CreateQueue(1, "/", "q", False, {}, True))
        actor = manager.queues["q:/:q"]
        runtime.send(actor.address, Publish([published(1), published(2)]), sender=ch)
        for _ in range(3):
            await asyncio.sleep(0)  # turns end: the store's commit asks for its syncs, which run on the thread
        runtime.send(actor.address, Publish([published(3)]), sender=ch)  # taken while they run: the next commit's
        await async_until(lambda: len(channel.confirms) >= 2, "two confirms", deadline_s, every_s=0.001, raises=False)
        assert [c for c, _ in channel.confirms] == [Confirm(2), Confirm(3)]  # each after its sync, in order
        await runtime.close()
    asyncio.run(scenario())
