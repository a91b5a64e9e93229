"""The queue host's housekeeping (actors/queue/housekeeping.py) over real files: a round before the
storage is recovered does nothing else, the paging policy's effects reach every pageable queue and
its log names the host, the task closes the storage cleanly when the loop ends; and NodeMemory over
the real process table."""
from __future__ import annotations

import asyncio
import json
import os

import psutil
from structlog.testing import capture_logs

from actors.queue.housekeeping import Housekeeping, NodeMemory
from persist.classic.backed import BackedReady
from actors.queue.core import ClassicQueue
from persist.classic.host_storage import HostStorage
from persist.disk import RealDisk
from tests.queue.test_durable_queue import CH, published, storage_at


def test_a_round_before_recovery_asks_for_it_and_does_nothing_else(tmp_path):
    s = HostStorage(RealDisk(str(tmp_path), sync_method="none"), "queue0", embed_below=4096,
                    file_size_limit=1 << 20, placed_here=lambda v, n: True)
    asked = []

    def memory_used(now_s: float) -> int:
        raise AssertionError("memory sampled before the storage was recovered")
    Housekeeping(s, 100, memory_used, ensure_recovered=lambda: asked.append(True)).tick(now_s=1.0)
    assert asked == [True] and not s.recovered
    Housekeeping(s, 100, lambda now_s: 0, ensure_recovered=lambda: s.recover([])).tick(now_s=2.0)
    assert s.recovered


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
    used = [400]
    housekeeping = Housekeeping(s, 200, lambda now_s: used[0])
    with capture_logs() as events:
        housekeeping.tick(now_s=1.0)  # factor 200 / 400 x 0.8 = 0.4
        assert [s.backings[("/", n)].vq.ram_max_messages for n in ("a", "b")] == [40, 20]
        assert spill.stats().ram_messages == 4
        used[0] = 100
        housekeeping.tick(now_s=2.0)
        assert [s.backings[("/", n)].vq.ram_max_messages for n in ("a", "b")] == [None, None]
    paging = [(e["event"], e["host"], e["used"], e["threshold"]) for e in events if "paging" in e["event"]]
    assert paging == [("queue_storage.paging_started", "queue0", 400, 200),
                      ("queue_storage.paging_stopped", "queue0", 100, 200)]


def test_the_task_closes_the_storage_cleanly_when_the_loop_ends(tmp_path):
    s = storage_at(str(tmp_path), keep=[])
    s.open_queue("/", "q", lazy=False)

    async def host() -> None:
        task = Housekeeping(s, 100, lambda now_s: 0).start()
        await asyncio.sleep(0)  # one loop turn (not a timing wait): the task is running
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    asyncio.run(host())
    assert (tmp_path / "msg_stores" / "queue0" / "persistent" / "clean.dat").exists()
    assert list((tmp_path / "queues").glob("*/clean.terms"))


def test_node_memory_is_this_process_until_the_node_is_ready_then_every_process_of_its_command(tmp_path):
    me = psutil.Process()
    memory = NodeMemory(str(tmp_path))
    assert 0 < memory.pss(now=0.0) <= psutil.virtual_memory().total
    (tmp_path / "ready").write_text(json.dumps({"pid": os.getpid()}))
    pss = memory.pss(now=1.0)  # not found yet: looks again at once
    assert me.pid in [p.pid for p in memory._procs] and pss >= me.memory_full_info().pss // 2
    assert all(p.cmdline() == me.cmdline() for p in memory._procs if p.is_running())
