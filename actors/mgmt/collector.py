"""The node host's sampler: every `collect_statistics_interval` ms it asks every host for its
statistics (`CollectStats`, actors/messages/stats.py) and keeps the latest sample and the rates.

A shell. Which hosts it asks is a function it is given (today the node's queue hosts and the
connection hosts subscribed to it; in a cluster, every node's), and each is addressed as
`Address(host, REPORTER_NAME)`, so fanning out to other nodes is a longer list. A round ends when
every host answered, or when the interval has passed: a host that is restarting (its answer comes
back `Undelivered`) or slow is simply absent from that sample. The API and the metrics read the
latest sample and never wait for one, so a scrape or a listing costs the hosts nothing.
The node's own facts (`facts()`: pid, uptime, and its memory and disk as the node's resource
monitor last saw them, actors/monitor/resources.py, so the API shows the alarms that block
publishers, not a second reading of its own) are taken once per round, here; other nodes' come
with their node hosts' answers.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import structlog

from actors.messages.calls import Reply
from actors.messages.runtime import Undelivered
from actors.messages.stats import REPORTER_NAME, CollectStats
from actors.mgmt.rates import Rates
from actors.mgmt.sample import Sample, merge, rate_values
from actors.runtime.address import Address

log = structlog.get_logger("warren.mgmt")

COLLECTOR_NAME = "mgmt-stats"


class StatsCollector:
    def __init__(self, runtime: Any, hosts: Callable[[], list[str]], interval_ms: int, *,
                 facts: Callable[[], dict[str, Any]] = dict, name: str = COLLECTOR_NAME) -> None:
        self.runtime = runtime
        self.name = name
        self.address = Address(runtime.host, name)
        self.hosts = hosts
        self.interval_ms = interval_ms
        self.sample = Sample(0)
        self.rates = Rates()
        self.measure = facts
        self.facts: dict[str, Any] = facts()
        self._rid = 0
        self._waiting: dict[int, str] = {}
        self._answers: list[Any] = []
        self._done: asyncio.Event | None = None
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self.runtime.spawn(self.name, self)
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            try:
                await self.collect()
            except Exception:  # a bad answer must not stop the sampling
                log.exception("mgmt.sample_failed")
            await asyncio.sleep(self.interval_ms / 1000)

    async def collect(self) -> Sample:
        """One round: ask every host, wait for the answers (at most one interval), keep the sample."""
        at_ms = time.time_ns() // 1_000_000
        self._answers, self._waiting = [], {}
        self._done = asyncio.Event()
        for host in self.hosts():
            self._rid += 1
            self._waiting[self._rid] = host
            self.runtime.send(Address(host, REPORTER_NAME), CollectStats(self._rid), sender=self.address)
        if self._waiting:
            try:
                await asyncio.wait_for(self._done.wait(), self.interval_ms / 1000)
            except asyncio.TimeoutError:
                log.info("mgmt.sample_incomplete", missing=sorted(self._waiting.values()))
        self.sample = merge(at_ms, self._answers)
        self.rates.observe(at_ms, rate_values(self.sample))
        self.facts = self.measure()
        return self.sample

    def receive(self, sender: Address, msg: Any) -> None:
        if type(msg) is Reply and msg.rid in self._waiting:
            del self._waiting[msg.rid]
            if msg.ok:
                self._answers.append(msg.value)
        elif type(msg) is Undelivered and getattr(msg.msg, "rid", None) in self._waiting:
            del self._waiting[msg.msg.rid]
        if not self._waiting and self._done is not None:
            self._done.set()
