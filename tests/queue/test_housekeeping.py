"""The queue host's housekeeping (actors/queue/housekeeping.py) over real files: a round before the
storage is recovered does nothing else, the paging policy's effects reach every pageable queue and
its log names the host, the task closes the storage cleanly when the loop ends."""
from __future__ import annotations

import asyncio

from structlog.testing import capture_logs

from actors.messages.alarms import MemoryUse
from actors.queue.housekeeping import Housekeeping
from persist.classic.backed import BackedReady
from actors.queue.core import ClassicQueue
from persist.classic.host_storage import HostStorage
from persist.disk import RealDisk
from persist.classic.message import Message
from tests.queue.test_durable_queue import CH, PERSISTENT, published, storage_at


def test_a_round_before_recovery_asks_for_it_and_does_nothing_else(tmp_path):
    s = HostStorage(RealDisk(str(tmp_path), sync_method="none"), "queue0", embed_below=4096,
                    file_size_limit=1 << 20, placed_here=lambda v, n: True)
    asked = []
    housekeeping = Housekeeping(s, 100, ensure_recovered=lambda: asked.append(True))
    housekeeping.receive(None, MemoryUse(limit_bytes=200, used_bytes=400))
    with capture_logs() as events:
        housekeeping.tick()
    assert asked == [True] and not s.recovered and not events  # no paging decided
    Housekeeping(s, 100, ensure_recovered=lambda: s.recover([])).tick()
    assert s.recovered


def test_no_paging_is_decided_before_the_first_reading_of_the_node_memory(tmp_path):
    s = storage_at(str(tmp_path), keep=[])
    backing, _ = s.open_queue("/", "a", lazy=False)
    ClassicQueue("/", "a", ready=BackedReady(backing)).publish(CH, [published(i) for i in range(1, 11)])
    housekeeping = Housekeeping(s, threshold_bytes=0)  # any reading would page
    housekeeping.tick()
    assert backing.vq.ram_max_messages is None
    housekeeping.receive(None, MemoryUse(limit_bytes=0, used_bytes=1))
    housekeeping.tick()
    assert backing.vq.ram_max_messages is not None


def test_paging_reaches_every_queue_and_logs_its_changes_with_the_host(tmp_path):
    s = storage_at(str(tmp_path), keep=[])
    cores = []
    for name in ("a", "b"):
        backing, _ = s.open_queue("/", name, lazy=False)
        cores.append(ClassicQueue("/", name, ready=BackedReady(backing)))
    (spill,) = s.open_transient_queue("/", "t", lazy=False)
    cores.append(ClassicQueue("/", "t", ready=spill))
    for core, n in zip(cores, (100, 50, 10)):
        core.publish(CH, [published(i, persistent=False) for i in range(1, n + 1)])
    housekeeping = Housekeeping(s, 200)
    with capture_logs() as events:
        housekeeping.receive(None, MemoryUse(limit_bytes=400, used_bytes=400))  # paging from 200
        housekeeping.tick()  # factor 200 / 400 x 0.8 = 0.4
        assert [s.backings[("/", n)].vq.ram_max_messages for n in ("a", "b")] == [40, 20]
        assert spill.stats().ram_messages == 4
        housekeeping.receive(None, MemoryUse(limit_bytes=400, used_bytes=100))
        housekeeping.tick()
        assert [s.backings[("/", n)].vq.ram_max_messages for n in ("a", "b")] == [None, None]
    paging = [(e["event"], e["host"], e["used"], e["threshold"]) for e in events if "paging" in e["event"]]
    assert paging == [("queue_storage.paging_started", "queue0", 400, 200),
                      ("queue_storage.paging_stopped", "queue0", 100, 200)]


def test_the_task_closes_the_storage_cleanly_when_the_loop_ends(tmp_path):
    s = storage_at(str(tmp_path), keep=[])
    backing, _ = s.open_queue("/", "q", lazy=False)
    backing.publish([Message(0, False, "", "q", PERSISTENT, b"m")])  # a queue's directory: its first write

    async def host() -> None:
        task = Housekeeping(s, 100).start()
        await asyncio.sleep(0)  # one loop turn (not a timing wait): the task is running
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    asyncio.run(host())
    assert (tmp_path / "msg_stores" / "queue0" / "persistent" / "clean.dat").exists()
    assert list((tmp_path / "queues").glob("*/clean.terms"))
