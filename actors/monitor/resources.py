"""The node's resource monitor: its memory, counted once across its processes, and the free space on
its data dir's filesystem, each checked when its alarm core asks (flow/alarms.py).

A shell: the limits, the alarm decisions, the log texts and the check intervals are the cores'.
This module owns the measurements (psutil, statvfs), the event loop's timers and an `Interpreter`
that carries the cores' effects out: `StartTimer` and `Log` as every actor's (ActorEffects), and
`AlarmSet` / `AlarmCleared` to `on_alarm`; in a node, `tell_relay` makes that a `ResourceAlarm` to
the node's alarm relay (relay.py), which tells every node of the cluster. As an actor (the node
host's "resource_monitor") it answers `WatchMemory` from queue hosts with `MemoryUse` (the limit and
the node's memory), now, after every memory check and whenever the limit changes: their paging
follows warrenctl set_vm_memory_high_watermark and this one reading of the node's memory.

Measurements:
- memory: PSS summed over the node's processes. A node is several processes (its main process,
  the Thespian admin, the host processes) that share pages, the interpreter's above all; RSS summed
  over them counts a shared page once per process that maps it, PSS charges each of them its
  share, so the sum counts it once (`NodeMemory`, node_memory.py: the queue hosts
  page by this reading);
- disk: the space available to the node's user on the data dir's filesystem (statvfs f_bavail,
  what `df -kP` reports and RabbitMQ reads); a failed read is logged and reported as unknown;
- total RAM: psutil's (MemTotal in /proc/meminfo, RabbitMQ's source on Linux).
Each measurement runs on the loop. Measured on an idle node of 8 processes: RSS summed 279 MiB,
PSS summed 79 MiB (bench/idle_memory.py); one PSS reading 3.5 ms (smaps_rollup, once a second);
statvfs a few µs.
"""
from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable
from typing import Any

import psutil
import structlog

from actors.messages.alarms import MemoryUse, ResourceAlarm, WatchMemory
from actors.messages.runtime import Undelivered
from actors.monitor.node_memory import NodeMemory
from actors.runtime.address import Address
from actors.runtime.effects import ActorEffects
from effects import AlarmCleared, AlarmSet
from effects.interpreter import Interpreter
from flow.alarms import DISK_CHECK_TIMER, MEMORY_CHECK_TIMER, DiskAlarm, Limit, MemoryAlarm

log = structlog.get_logger("warren.monitor")

AlarmHook = Callable[[AlarmSet | AlarmCleared], None]


def tell_relay(runtime: Any, me: Address, relay: Address) -> AlarmHook:
    """The hook of a node's monitor: its alarm changes go to the node's alarm relay."""
    def on_alarm(e: AlarmSet | AlarmCleared) -> None:
        runtime.send(relay, ResourceAlarm(e.node, e.resource, type(e) is AlarmSet), sender=me)
    return on_alarm


def free_disk_bytes(path: str) -> int | None:
    """Bytes available to this user on `path`'s filesystem; None (and a warning) when unreadable."""
    try:
        return shutil.disk_usage(path).free
    except OSError as e:
        log.warning(f"Free disk space monitoring failed to retrieve the amount of available space: {e}", path=path)
        return None


class ResourceMonitor:
    """A node's memory and disk alarms on the running loop. `start` inside the loop; `set_memory_limit`
    and `set_disk_limit` for warrenctl; `stop` cancels the checks; as an actor, `receive` takes
    `WatchMemory`."""

    def __init__(self, node: str, data_dir: str, memory_limit: Limit, disk_limit: Limit, *, on_alarm: AlarmHook,
                 memory: MemoryAlarm | None = None, disk: DiskAlarm | None = None,
                 memory_used: Callable[[float], int] | None = None,
                 total_memory: Callable[[], int] = lambda: psutil.virtual_memory().total,
                 runtime: Any = None, me: Address = Address("node", "resource_monitor")) -> None:
        self.data_dir = data_dir
        self.memory_limit = memory_limit
        self.disk_limit = disk_limit
        self.memory = memory or MemoryAlarm(node)
        self.disk = disk or DiskAlarm(node)
        self.memory_used = memory_used or NodeMemory(data_dir).pss
        self.total_memory = total_memory
        self.runtime = runtime
        self.me = me
        self.memory_watchers: dict[Address, None] = {}
        self._effects = ActorEffects(runtime, me, on_timer=self._on_timer)
        self.run_effects = Interpreter(self._effects.handlers()).extend({AlarmSet: on_alarm, AlarmCleared: on_alarm})

    def start(self) -> None:
        total = self.total_memory()
        self.run_effects(self.memory.start(self.memory_limit, total, self._used()))
        self.run_effects(self.disk.start(self.disk_limit, total, free_disk_bytes(self.data_dir)))

    def stop(self) -> None:
        self._effects.cancel_all()

    def set_memory_limit(self, limit: Limit) -> None:
        """rabbitmqctl set_vm_memory_high_watermark: the RAM is looked at again, and the memory."""
        self.memory_limit = limit
        self.run_effects(self.memory.configure(limit, self.total_memory(), self._used()))
        self._tell_watchers()

    def set_disk_limit(self, limit: Limit) -> None:
        """rabbitmqctl set_disk_free_limit: checked at once against the free space now."""
        self.disk_limit = limit
        self.run_effects(self.disk.configure(limit, self.total_memory(), free_disk_bytes(self.data_dir)))

    def status(self) -> dict:
        """For warrenctl status: each resource's limit, its use now (memory) or at the last check
        (disk), and its alarm."""
        memory, disk = self.memory, self.disk
        return {"memory": {"limit": memory.limit_bytes, "used": self._used(), "alarm": memory.alarmed},
                "disk": {"limit": disk.limit_bytes, "free": disk.free_bytes, "alarm": disk.alarmed}}

    def management_facts(self) -> dict:
        """The node's resources as the management API's node object names them (the last checks)."""
        memory, disk = self.memory, self.disk
        return {"mem_used": memory.used_bytes, "mem_limit": memory.limit_bytes, "mem_alarm": memory.alarmed,
                "disk_free": disk.free_bytes or 0, "disk_free_limit": disk.limit_bytes, "disk_free_alarm": disk.alarmed}

    def receive(self, sender: Address, msg: Any) -> None:
        """A queue host's housekeeping watches the node's memory and its limit (for paging)."""
        if type(msg) is WatchMemory:
            self.memory_watchers[sender] = None
            self._tell(sender)
        elif type(msg) is not Undelivered:  # a watcher's host restarting watches again
            log.warning("monitor.unexpected_message", kind=type(msg).__name__, sender=str(sender))

    def _tell(self, watcher: Address) -> None:
        self.runtime.send(watcher, MemoryUse(self.memory.limit_bytes, self.memory.used_bytes), sender=self.me)

    def _tell_watchers(self) -> None:
        for watcher in self.memory_watchers:
            self._tell(watcher)

    def _used(self) -> int:
        return self.memory_used(asyncio.get_running_loop().time())

    def _on_timer(self, name: str) -> None:
        if name == MEMORY_CHECK_TIMER:
            self.run_effects(self.memory.check(self._used()))
            self._tell_watchers()
        elif name == DISK_CHECK_TIMER:
            self.run_effects(self.disk.check(free_disk_bytes(self.data_dir)))
