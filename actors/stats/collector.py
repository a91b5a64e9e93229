"""The node host's sampler: every `collect_statistics_interval` ms it asks every host for its
statistics (`CollectStats`, actors/messages/stats.py) and keeps the latest sample and the rates.

A shell. Which hosts it asks is a function it is given (today the node's queue hosts and the
connection hosts subscribed to it; in a cluster, every node's), and each is addressed as
`Address(host, REPORTER_NAME)`, so fanning out to other nodes is a longer list. A round ends when
every host answered, or when the interval has passed: a host that is restarting (its answer comes
back `Undelivered`) or slow is simply absent from that sample. The API and the metrics read the
latest sample and never wait for one, so a scrape or a listing costs the hosts nothing.
Queue and Raft rows come as changes since the host's last answer (actors/stats/deltas.py), kept
in `tables` (sample.py), so a round costs what changed; `changes=False` asks for every row each
time (warrenctl's on-demand listing, which must not depend on an earlier round).
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
from actors.stats.rates import Rates
from actors.stats.sample import HostTables, Sample, merge, rate_values
from actors.runtime.address import Address

log = structlog.get_logger("warren.mgmt")

COLLECTOR_NAME = "mgmt-stats"


class StatsCollector:
    def __init__(self, runtime: Any, hosts: Callable[[], list[str]], interval_ms: int, *,
                 facts: Callable[[], dict[str, Any]] = dict, name: str = COLLECTOR_NAME, changes: bool = True) -> None:
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
        # the hosts' queue rows as their answers of changes built them up (None: whole answers)
        self.tables: HostTables | None = HostTables() if changes else None
        self._others: set = set()  # last round's rate keys other than queues
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
        hosts = self.hosts()
        for host in hosts:
            self._rid += 1
            self._waiting[self._rid] = host
            epoch, since = self.tables.since(host) if self.tables is not None else ("", -1)
            self.runtime.send(Address(host, REPORTER_NAME), CollectStats(self._rid, epoch, since), sender=self.address)
        if self._waiting:
            try:
                await asyncio.wait_for(self._done.wait(), self.interval_ms / 1000)
            except asyncio.TimeoutError:
                log.info("mgmt.sample_incomplete", missing=sorted(self._waiting.values()))
        if self.tables is None:
            self.sample = merge(at_ms, self._answers)
            self.rates.observe(at_ms, rate_values(self.sample))
        else:
            self._changes(at_ms, hosts)
        self.facts = self.measure()
        return self.sample

    def _changes(self, at_ms: int, hosts: list[str]) -> None:
        """This round's answers applied to the hosts' tables; rates of what changed only."""
        tables = self.tables
        assert tables is not None
        changed: dict[tuple[str, str], dict[str, Any]] = {}
        gone: set[tuple[str, str]] = set()
        tables.keep_only(hosts)
        for answer in self._answers:
            tables.apply(answer, changed, gone)
        self.sample = merge(at_ms, self._answers, tables)
        values = rate_values(self.sample, changed)
        others = {key for key in values if key[0] != "queue"}  # channels, exchanges, vhosts, the node
        gone_keys = {("queue", *key) for key in gone if key not in self.sample.queues} | (self._others - others)
        self._others = others
        self.rates.update(at_ms, values, gone_keys)

    def receive(self, sender: Address, msg: Any) -> None:
        if type(msg) is Reply and msg.rid in self._waiting:
            del self._waiting[msg.rid]
            if msg.ok:
                self._answers.append(msg.value)
        elif type(msg) is Undelivered and getattr(msg.msg, "rid", None) in self._waiting:
            del self._waiting[msg.msg.rid]
        if not self._waiting and self._done is not None:
            self._done.set()
