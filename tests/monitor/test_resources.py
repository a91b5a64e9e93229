"""The resource monitor (actors/monitor/resources.py) against the real machine: the node's memory
counted once across forked processes, a memory alarm raised and cleared by memory this test really
allocates and frees, and a disk alarm on a small tmpfs this test mounts (as root; otherwise on the
test's own filesystem, with a limit set from its measured free space), filled and emptied for real."""
from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from structlog.testing import capture_logs

from actors.messages.alarms import MemoryUse, WatchMemory
from actors.monitor.node_memory import NodeMemory
from actors.monitor.resources import ResourceMonitor, free_disk_bytes
from actors.runtime.address import Address
from effects import AlarmCleared, AlarmSet
from flow.alarms import AbsoluteLimit, DiskAlarm, RelativeLimit
from tests.waiting import async_until

MIB = 1024 * 1024
NODE = "warren@test"
FORKED_NODE = r"""
import json, os, sys
block = bytearray(b"\x01") * (64 * 1024 * 1024)  # written, so every page is resident
child = os.fork()
if child == 0:
    sys.stdin.read()
    os._exit(0)
open(os.path.join(sys.argv[1], "ready"), "w").write(json.dumps({"pid": os.getpid()}))
print("ready", child, flush=True)
sys.stdin.read()
os.waitpid(child, 0)
"""


def test_the_node_is_counted_once_across_processes_that_share_pages(tmp_path):
    """A "node" of two forked processes sharing 64 MiB: their RSS counts it twice, their PSS once."""
    proc = subprocess.Popen([sys.executable, "-c", FORKED_NODE, str(tmp_path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        _, child = proc.stdout.readline().split()
        footprint = NodeMemory(str(tmp_path))
        pss = footprint.pss(now=0.0)
        pids = sorted(p.pid for p in footprint._procs)
        assert pids == sorted([proc.pid, int(child)])
        rss = sum(psutil.Process(pid).memory_info().rss for pid in pids)
        assert rss > 2 * 64 * MIB  # each process maps the whole block
        assert 64 * MIB < pss < 64 * MIB + (rss - 2 * 64 * MIB)  # the block once, plus what is private
    finally:
        proc.communicate("")


def test_a_memory_alarm_is_raised_by_memory_really_used_and_cleared_when_it_is_freed(tmp_path):
    """Before the node is ready the footprint is this process: allocate 256 MiB above a limit set
    128 MiB over what it uses now, then free them."""
    alarms: list[Any] = []

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        baseline = NodeMemory(str(tmp_path)).pss(loop.time())
        monitor = ResourceMonitor(NODE, str(tmp_path), AbsoluteLimit(baseline + 128 * MIB), AbsoluteLimit(0),
                                  on_alarm=alarms.append)
        monitor.start()
        try:
            assert alarms == [] and not monitor.memory.alarmed
            block = bytearray(b"\x01") * (256 * MIB)
            await async_until(lambda: alarms, "the memory alarm", 20.0)
            assert alarms == [AlarmSet("memory", NODE)] and monitor.memory.used_bytes > baseline + 128 * MIB
            del block
            await async_until(lambda: len(alarms) == 2, "the memory alarm to clear", 20.0)
            assert alarms[1] == AlarmCleared("memory", NODE)
            assert monitor.status()["memory"]["alarm"] is False
        finally:
            monitor.stop()
    asyncio.run(scenario())


@pytest.fixture
def small_fs(tmp_path) -> Iterator[tuple[Path, int | None]]:
    """A 16 MiB tmpfs (its size), or when it cannot be mounted a directory of the test's filesystem (None)."""
    mount = tmp_path / "fs"
    mount.mkdir()
    if os.geteuid() == 0 and subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)],
                                            capture_output=True).returncode == 0:
        try:
            yield mount, 16 * MIB
        finally:
            subprocess.run(["umount", str(mount)], check=True)
    else:
        yield mount, None


def fill(path: Path, size: int) -> None:
    with open(path, "wb") as f:
        for _ in range(size // MIB):
            f.write(b"\0" * MIB)
        f.flush()
        os.fsync(f.fileno())


def test_a_disk_alarm_is_raised_by_filling_the_filesystem_and_cleared_by_emptying_it(small_fs):
    data_dir, size = small_fs
    free = free_disk_bytes(str(data_dir))
    stat = os.statvfs(data_dir)
    assert free == stat.f_bavail * stat.f_frsize  # the space available to this user, as df -kP
    if size is not None:
        assert size - MIB < free <= size
        limit, filler = AbsoluteLimit("8MB"), 10 * MIB  # 16 MiB - 10 MiB is below 8 MB
    else:
        limit, filler = AbsoluteLimit(free - 64 * MIB), 128 * MIB
    alarms: list[Any] = []

    async def scenario() -> None:
        # checks at least every 0.5 s while the alarm is in force (RabbitMQ's set_max_check_interval)
        monitor = ResourceMonitor(NODE, str(data_dir), RelativeLimit(1.0), limit, on_alarm=alarms.append,
                                  disk=DiskAlarm(NODE, max_interval_ms=500))
        with capture_logs() as logs:
            monitor.start()
        assert [e["event"] for e in logs if "disk" in e["event"].lower()][:2] == [
            f"Enabling free disk space monitoring (disk free space: {free}, total memory: "
            f"{psutil.virtual_memory().total})",
            f"Disk free limit set to {monitor.disk.limit_bytes // 1000000}MB"]
        try:
            assert alarms == []
            fill(data_dir / "filler", filler)
            await async_until(lambda: alarms, "the disk alarm", 20.0)
            assert alarms == [AlarmSet("disk", NODE)]
            assert monitor.status()["disk"]["free"] < monitor.disk.limit_bytes
            (data_dir / "filler").unlink()
            await async_until(lambda: len(alarms) == 2, "the disk alarm to clear", 20.0)
            assert alarms[1] == AlarmCleared("disk", NODE)
        finally:
            monitor.stop()
    asyncio.run(scenario())


def test_changing_a_limit_at_run_time_rechecks_at_once(tmp_path):
    alarms: list[Any] = []

    async def scenario() -> None:
        monitor = ResourceMonitor(NODE, str(tmp_path), RelativeLimit(1.0), AbsoluteLimit(0), on_alarm=alarms.append)
        monitor.start()
        try:
            monitor.set_memory_limit(RelativeLimit(0.0))  # 0 blocks every publisher
            assert alarms == [AlarmSet("memory", NODE)]
            monitor.set_disk_limit(AbsoluteLimit(10 ** 18))
            assert alarms[1:] == [AlarmSet("disk", NODE)]
            monitor.set_memory_limit(RelativeLimit(1.0))
            assert alarms[2:] == [AlarmCleared("memory", NODE)]
        finally:
            monitor.stop()
    asyncio.run(scenario())


def test_a_data_dir_that_cannot_be_read_keeps_the_alarm_as_it_was(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    alarms: list[Any] = []

    async def scenario() -> None:
        monitor = ResourceMonitor(NODE, str(gone), RelativeLimit(1.0), AbsoluteLimit(10 ** 18),
                                  on_alarm=alarms.append, disk=DiskAlarm(NODE, max_interval_ms=200))
        monitor.start()
        try:
            assert alarms == [AlarmSet("disk", NODE)]
            shutil.rmtree(gone)
            with capture_logs() as logs:
                await async_until(lambda: any("failed to retrieve" in e["event"] for e in logs), "a failed read", 20.0)
            assert monitor.status()["disk"] == {"limit": 10 ** 18, "free": None, "alarm": True}
            assert alarms == [AlarmSet("disk", NODE)]
        finally:
            monitor.stop()
    asyncio.run(scenario())


def test_a_watcher_hears_the_node_memory_now_after_every_check_and_when_the_limit_changes(tmp_path):
    """The queue hosts' paging reads the node's memory from here: one reading per node."""
    used = [100]
    told: list[tuple[Address, Any]] = []

    class Runtime:  # the monitor's only use of its runtime here: sending to the watcher
        def send(self, to: Address, msg: Any, sender: Address) -> None:
            told.append((to, msg))

    async def scenario() -> None:
        monitor = ResourceMonitor(NODE, str(tmp_path), AbsoluteLimit(1000), AbsoluteLimit(0), on_alarm=lambda e: None,
                                  memory_used=lambda now_s: used[0], runtime=Runtime())
        monitor.start()
        try:
            watcher = Address("queue0", "housekeeping")
            monitor.receive(watcher, WatchMemory())
            assert told == [(watcher, MemoryUse(limit_bytes=1000, used_bytes=100))]
            used[0] = 300
            await async_until(lambda: len(told) == 2, "the next memory check", 20.0)
            assert told[1] == (watcher, MemoryUse(limit_bytes=1000, used_bytes=300))
            monitor.set_memory_limit(AbsoluteLimit(2000))
            assert told[2:] == [(watcher, MemoryUse(limit_bytes=2000, used_bytes=300))]
        finally:
            monitor.stop()
    asyncio.run(scenario())
