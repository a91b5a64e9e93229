"""The queue host's housekeeping: its storage's clock, once every `housekeeping_interval_s`.

Each round (`tick`): recover the host's storage as soon as the registry snapshot allows
(QueueManager.ensure_recovered); sample the node's memory (`NodeMemory`, psutil: counted as the
node's resource monitor counts it for the memory alarm) and let the paging
policy (flow/paging.py) decide, then apply what it returns to every pageable queue of the storage
(persist/classic/host_storage.py); let non-durable queues that paged drop their emptied index
segments; run one GC pass over the message store. When the host's loop ends (asyncio cancels the
task at shutdown) the storage is closed cleanly, so the next start trusts its clean files.

The memory sample is taken on a worker thread (`_run`): reading smaps_rollup of the node's
processes costs ~3.5 ms on a quiet machine and tens of ms on a busy one, almost all of it in the
kernel with the GIL released, and on the loop it held every delivery of the host behind it once a
second. The round itself then runs on the loop with that figure.

A shell: the decisions are the policy's and the storage engine's; this module owns the clock,
psutil and the task.
"""
from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil
import structlog

from actors.messages.alarms import MemoryLimit
from effects import CutRamTargets, LiftRamTargets, Log
from effects.interpreter import Interpreter
from flow.paging import PagingPolicy
from persist.classic.host_storage import HostStorage, ram_messages

log = structlog.get_logger("warren.queue.storage")

housekeeping_interval_s = 1.0
_running: set[asyncio.Task] = set()  # the loop holds tasks weakly: a started one lives here


class NodeMemory:
    """The node's memory counted once: PSS summed over every process running the node's command line
    (its main process, whose pid is in <data_dir>/ready, the Thespian admin and logger, the
    supervisor and the hosts); this process alone until the node is ready. The processes share
    pages, the interpreter's above all: RSS summed over them would count a shared page once per
    process that maps it, PSS charges each of them its share.

    Finding them walks every process on the machine (~5 ms), so the set is kept and walked again
    only when one of them is gone (a restarted host has a new pid) or `rescan_interval_s` passed.
    One reading (smaps_rollup of each process) costs ~3.5 ms for a node of 8 processes."""

    rescan_interval_s = 30.0

    def __init__(self, data_dir: str) -> None:
        self.data_dir = data_dir
        self._procs: list[psutil.Process] = []
        self._found_at = float("-inf")

    def pss(self, now: float) -> int:
        if now - self._found_at >= self.rescan_interval_s:
            self._find(now)
        sizes = [_pss(p) for p in self._procs]
        if None in sizes:
            self._found_at = float("-inf")  # one of them is gone (a host restarted): walk again next time
        return sum(size for size in sizes if size is not None)

    def _find(self, now: float) -> None:
        try:
            cmdline = psutil.Process(json.loads(Path(self.data_dir, "ready").read_text())["pid"]).cmdline()
            self._procs = [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == cmdline]
            self._found_at = now
        except (OSError, ValueError, KeyError, psutil.Error):
            self._procs = [psutil.Process()]  # not ready yet: look again next time


def _pss(process: psutil.Process) -> int | None:
    try:
        return process.memory_full_info().pss
    except psutil.Error:
        return None


class Housekeeping:
    """One queue host's rounds over its storage. `memory_used(now_s)` is the node's memory in
    bytes (NodeMemory.pss in a node); `threshold_bytes` is where paging starts. As an actor it
    takes the node's `MemoryLimit` (actors/messages/alarms.py): paging then starts at
    `paging_ratio` x that limit."""

    def __init__(self, storage: HostStorage, threshold_bytes: int, memory_used: Callable[[float], int],
                 ensure_recovered: Callable[[], None] = lambda: None, policy: PagingPolicy | None = None,
                 paging_ratio: float = 0.5) -> None:
        self.storage = storage
        self.threshold_bytes = threshold_bytes
        self.paging_ratio = paging_ratio
        self.memory_used = memory_used
        self.ensure_recovered = ensure_recovered
        self.policy = policy or PagingPolicy()
        self.run_effects = Interpreter({CutRamTargets: self._cut, LiftRamTargets: self._lift, Log: self._log})

    def tick(self, now_s: float, used_bytes: int | None = None) -> None:
        """One round (see the module docstring); `used_bytes`: the node's memory if sampled
        already, else sampled here."""
        self.ensure_recovered()
        storage = self.storage
        if not storage.recovered:
            return
        used = self.memory_used(now_s) if used_bytes is None else used_bytes
        self.run_effects(self.policy.observe(used, self.threshold_bytes))
        storage.flush_transient()
        storage.collect_garbage()

    def receive(self, sender: Any, msg: MemoryLimit) -> None:
        self.threshold_bytes = int(msg.limit_bytes * self.paging_ratio)

    def start(self) -> asyncio.Task:
        """Run the rounds on the running loop until it ends; then close the storage."""
        task = asyncio.get_running_loop().create_task(self._run())
        _running.add(task)
        task.add_done_callback(_running.discard)
        return task

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        sampler = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memory-sample")
        try:
            while True:
                await asyncio.sleep(housekeeping_interval_s)
                now = loop.time()
                used = await loop.run_in_executor(sampler, self.memory_used, now) if self.storage.recovered else None
                self.tick(now, used)
        finally:
            sampler.shutdown(wait=False)
            if self.storage.recovered:
                self.storage.close()

    # -- the paging policy's effects -------------------------------------------------------------
    def _cut(self, e: CutRamTargets) -> None:
        for p in self.storage.pageables():
            p.set_ram_target(e.target(ram_messages(p)))

    def _lift(self, _e: LiftRamTargets) -> None:
        for p in self.storage.pageables():
            p.set_ram_target(None)

    def _log(self, e: Log) -> None:
        getattr(log, e.level)(e.event, host=self.storage.host, **dict(e.fields))
