"""The queue host's housekeeping: its storage's clock, once every `housekeeping_interval_s`.

Each round (`tick`): recover the host's storage as soon as the registry snapshot allows
(QueueManager.ensure_recovered); let the paging policy (flow/paging.py) decide from the node's
memory, then apply what it returns to every pageable queue of the storage
(persist/classic/host_storage.py); let non-durable queues that paged drop their emptied index
segments; run one GC pass over the message store. When the host's loop ends (asyncio cancels the
task at shutdown) the storage is closed cleanly, so the next start trusts its clean files.

The node's memory is the resource monitor's reading (actors/monitor/resources.py), which it sends
as `MemoryUse` after every check (once a second) and when the limit changes: one reading of the
node's processes' smaps per node instead of one more per queue host (each ~1 % of a CPU, almost
all in the kernel), and paging and the memory alarm see the same figure. Until the first reading
arrives the policy is not asked.

A shell: the decisions are the policy's and the storage engine's; this module owns the clock and
the task.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import structlog

from actors.messages.alarms import MemoryUse
from effects import CutRamTargets, LiftRamTargets, Log
from effects.interpreter import Interpreter
from flow.paging import PagingPolicy
from persist.classic.host_storage import HostStorage, ram_messages

log = structlog.get_logger("warren.queue.storage")

housekeeping_interval_s = 1.0
_running: set[asyncio.Task] = set()  # the loop holds tasks weakly: a started one lives here


class Housekeeping:
    """One queue host's rounds over its storage. `threshold_bytes` is where paging starts. As an
    actor it takes the node's `MemoryUse` (actors/messages/alarms.py): the node's memory for the
    next rounds, and a limit that paging then starts at `paging_ratio` of."""

    def __init__(self, storage: HostStorage, threshold_bytes: int,
                 ensure_recovered: Callable[[], None] = lambda: None, policy: PagingPolicy | None = None,
                 paging_ratio: float = 0.5, paged: Callable[[], None] = lambda: None) -> None:
        self.storage = storage
        self.threshold_bytes = threshold_bytes
        self.paging_ratio = paging_ratio
        self.used_bytes: int | None = None  # the node's memory at its monitor's last check
        self.ensure_recovered = ensure_recovered
        self.paged = paged  # every queue's RAM target changed (their stats rows with it)
        self.policy = policy or PagingPolicy()
        self.run_effects = Interpreter({CutRamTargets: self._cut, LiftRamTargets: self._lift, Log: self._log})

    def tick(self) -> None:
        """One round (see the module docstring)."""
        self.ensure_recovered()
        storage = self.storage
        if not storage.recovered:
            return
        if self.used_bytes is not None:
            self.run_effects(self.policy.observe(self.used_bytes, self.threshold_bytes))
        storage.flush_transient()
        storage.collect_garbage()

    def receive(self, sender: Any, msg: MemoryUse) -> None:
        self.threshold_bytes = int(msg.limit_bytes * self.paging_ratio)
        self.used_bytes = msg.used_bytes

    def start(self) -> asyncio.Task:
        """Run the rounds on the running loop until it ends; then close the storage."""
        task = asyncio.get_running_loop().create_task(self._run())
        _running.add(task)
        task.add_done_callback(_running.discard)
        return task

    async def _run(self) -> None:
        try:
            while True:
                await asyncio.sleep(housekeeping_interval_s)
                self.tick()
        finally:
            if self.storage.recovered:
                self.storage.close()

    # -- the paging policy's effects -------------------------------------------------------------
    def _cut(self, e: CutRamTargets) -> None:
        for p in self.storage.pageables():
            p.set_ram_target(e.target(ram_messages(p)))
        self.paged()

    def _lift(self, _e: LiftRamTargets) -> None:
        for p in self.storage.pageables():
            p.set_ram_target(None)
        self.paged()

    def _log(self, e: Log) -> None:
        getattr(log, e.level)(e.event, host=self.storage.host, **dict(e.fields))
