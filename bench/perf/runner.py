"""The parent process: declare, start the worker processes, print a line a second, summarise.

Order of a run: declare the exchange/queue (unless --predeclared) on a setup connection; start the
consumers and wait until all are consuming; start the producers, wait until all are connected, then
tell them "go" and start the clock.  At --time the producers stop (and wait for their outstanding
confirms); the consumers keep going until they have received what was published (less returns and
nacks) or made no progress for --drain seconds; then they stop too.  A server-named queue is deleted at
the end.  Any error a worker reports (connection refused, channel/connection closed by the broker with
its reply code and text) ends the run and the exit status is non-zero.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import sys
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait

import structlog
from pika import spec

from bench.perf.config import Config
from bench.perf.connection import BrokerClosed, connect, parse_uri
from bench.perf.stats import Aggregator, format_sample, format_summary
from bench.perf.workers import worker_main

LOG = structlog.get_logger(__name__)
READY_TIMEOUT_S = 30.0
DONE_TIMEOUT_S = 15.0
JOIN_TIMEOUT_S = 5.0
REPORT_TIMEOUT_S = 0.5
DRAIN_POLL_S = 0.1
EXIT_OK, EXIT_BROKER_ERROR = 0, 2


@dataclass(frozen=True)
class Topology:
    exchange: str
    routing_key: str
    queue: str
    delete_queue: bool


class _SetupHandler:
    def on_deliver(self, *args) -> None: ...
    def on_confirm(self, *args) -> None: ...
    def on_return(self) -> None: ...
    def on_blocked(self, blocked: bool) -> None: ...
    def on_closed(self, error: BaseException) -> None: ...


async def declare(cfg: Config) -> Topology:
    proto = await connect(parse_uri(cfg.uri), _SetupHandler(), 0)
    try:
        queue = cfg.queue
        if not cfg.predeclared:
            if cfg.exchange:
                # amq.* names are reserved: RabbitMQ refuses to declare them, so check they exist.
                await proto.call(spec.Exchange.Declare(
                    exchange=cfg.exchange, exchange_type="direct", durable=cfg.durable,
                    passive=cfg.exchange.startswith("amq.")))
            ok = await proto.call(spec.Queue.Declare(queue=cfg.queue, durable=cfg.durable,
                                                     arguments=cfg.queue_args or None))
            queue = ok.queue
        routing_key = cfg.routing_key or queue
        if cfg.exchange and not cfg.predeclared:
            await proto.call(spec.Queue.Bind(queue=queue, exchange=cfg.exchange,
                                             routing_key=routing_key))
    finally:
        await proto.close()
    return Topology(cfg.exchange, routing_key, queue, delete_queue=not cfg.queue and not cfg.predeclared)


async def delete_queue(cfg: Config, queue: str) -> None:
    proto = await connect(parse_uri(cfg.uri), _SetupHandler(), 0)
    try:
        await proto.call(spec.Queue.Delete(queue=queue))
    finally:
        await proto.close()


@dataclass
class Fleet:
    """The worker processes and what they have said."""

    agg: Aggregator
    procs: dict[str, multiprocessing.process.BaseProcess] = field(default_factory=dict)
    pipes: dict[str, Connection] = field(default_factory=dict)
    ready: set[str] = field(default_factory=set)
    asked: set[str] = field(default_factory=set)
    done: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)

    def start(self, ctx, role: str, name: str, cfg: Config, target: tuple[str, str]) -> None:
        parent_end, child_end = ctx.Pipe()
        proc = ctx.Process(target=worker_main, args=(role, name, cfg, child_end, target),
                           name=f"perf-{name}", daemon=True)
        proc.start()
        child_end.close()
        self.procs[name], self.pipes[name] = proc, parent_end

    def poll(self, timeout_s: float) -> None:
        live = [p for n, p in self.pipes.items() if n not in self.done]
        for pipe in wait(live, max(timeout_s, 0)) if live else []:
            name = next(n for n, p in self.pipes.items() if p is pipe)
            try:
                message = pipe.recv()
            except (EOFError, OSError):
                if name not in self.done:
                    self.errors.append(f"{name}: worker process exited unexpectedly")
                    self.done.add(name)
                continue
            self._handle(message)

    def _handle(self, message: tuple) -> None:
        kind, name = message[0], message[1]
        if kind == "ready":
            self.ready.add(name)
        elif kind == "stats":
            self.agg.update(name, *message[2:])
            self.asked.discard(name)
        elif kind == "error":
            _, _, code, text = message
            self.errors.append(f"{name}: {text}")
            print(f"error: {name}: {text}", file=sys.stderr, flush=True)
            self.done.add(name)
        elif kind == "done":
            self.done.add(name)

    def send(self, names: list[str], command: tuple) -> None:
        for name in names:
            if name in self.pipes and name not in self.done:
                try:
                    self.pipes[name].send(command)
                except (BrokenPipeError, OSError):
                    pass  # the worker is gone; poll() reports it

    def wait_for(self, names: list[str], reached: set[str], timeout_s: float) -> bool:
        """Wait until every named worker is in `reached` (or done); False on timeout or error."""
        deadline = time.monotonic() + timeout_s
        while True:
            waiting = [n for n in names
                       if n in self.pipes and n not in reached and n not in self.done]
            if not waiting:
                return not self.errors
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.poll(min(left, 0.5))

    def collect(self, timeout_s: float) -> None:
        """Ask every live worker for its counters and wait (bounded) for the answers."""
        live = [n for n in self.pipes if n not in self.done]
        self.asked = set(live)
        self.send(live, ("report",))
        deadline = time.monotonic() + timeout_s
        while self.asked - self.done and time.monotonic() < deadline:
            self.poll(deadline - time.monotonic())

    def reap(self) -> None:
        for proc in self.procs.values():
            proc.join(JOIN_TIMEOUT_S)
            if proc.is_alive():
                proc.terminate()
                proc.join(JOIN_TIMEOUT_S)


def run(cfg: Config) -> int:
    try:
        topo = asyncio.run(declare(cfg))
    except (BrokerClosed, OSError, asyncio.TimeoutError) as exc:
        print(f"error: setup: {exc or repr(exc)}", file=sys.stderr)
        return EXIT_BROKER_ERROR
    print(f"queue {topo.queue!r}, exchange {topo.exchange!r}, routing key {topo.routing_key!r}; "
          f"{cfg.producers} producer(s), {cfg.consumers} consumer(s)", flush=True)
    ctx = multiprocessing.get_context("spawn")
    fleet = Fleet(Aggregator(cfg.warmup_s))
    consumers = [f"consumer-{i}" for i in range(cfg.consumers)]
    producers = [f"producer-{i}" for i in range(cfg.producers)]
    try:
        _measure(cfg, ctx, fleet, topo, consumers, producers)
    except KeyboardInterrupt:
        print("interrupted, stopping", file=sys.stderr)
    finally:
        _shut_down(cfg, fleet, producers, consumers)
    if topo.delete_queue:
        try:
            asyncio.run(delete_queue(cfg, topo.queue))
        except (BrokerClosed, OSError, asyncio.TimeoutError) as exc:
            LOG.warning("perf.queue_delete_failed", queue=topo.queue, error=str(exc))
    summary = fleet.agg.summary()
    print(format_summary(summary), flush=True)
    if cfg.json_path:
        with open(cfg.json_path, "w") as f:
            json.dump({"config": cfg.to_dict(), "queue": topo.queue, "samples": fleet.agg.samples,
                       "summary": summary, "errors": fleet.errors}, f, indent=1)
    if fleet.errors:
        print(f"run failed: {'; '.join(fleet.errors)}", file=sys.stderr)
    return EXIT_BROKER_ERROR if fleet.errors else EXIT_OK


def _measure(cfg: Config, ctx, fleet: Fleet, topo: Topology, consumers: list[str],
             producers: list[str]) -> None:
    for name in consumers:
        fleet.start(ctx, "consumer", name, cfg, (topo.queue, ""))
    if not fleet.wait_for(consumers, fleet.ready, READY_TIMEOUT_S):
        if not fleet.errors:
            fleet.errors.append("consumers not ready in time")
        return
    for name in producers:
        fleet.start(ctx, "producer", name, cfg, (topo.exchange, topo.routing_key))
    if not fleet.wait_for(producers, fleet.ready, READY_TIMEOUT_S):
        if not fleet.errors:
            fleet.errors.append("producers not ready in time")
        return
    fleet.send(producers, ("go",))
    started = time.monotonic()
    last_sample = 0.0
    while not fleet.errors:
        elapsed = time.monotonic() - started
        if cfg.time_s and elapsed >= cfg.time_s:
            break
        next_tick = last_sample + 1.0
        if cfg.time_s:
            next_tick = min(next_tick, cfg.time_s)
        fleet.poll(next_tick - elapsed)
        elapsed = time.monotonic() - started
        if elapsed >= next_tick:
            fleet.collect(REPORT_TIMEOUT_S)
            print(format_sample(fleet.agg.sample(elapsed)), flush=True)
            last_sample = elapsed


def _shut_down(cfg: Config, fleet: Fleet, producers: list[str], consumers: list[str]) -> None:
    fleet.send(producers, ("stop",))
    fleet.wait_for(producers, fleet.done, cfg.drain_s + DONE_TIMEOUT_S)
    if producers and consumers and not fleet.errors:
        _drain(cfg, fleet)
    fleet.send(consumers, ("stop",))
    fleet.wait_for(consumers, fleet.done, DONE_TIMEOUT_S)
    fleet.reap()


def _drain(cfg: Config, fleet: Fleet) -> None:
    """Let consumers catch up with what was published, while they keep making progress."""
    progress_at, consumed = time.monotonic(), -1
    while not fleet.errors:
        totals = fleet.agg.totals()
        if totals["consumed"] >= totals["published"] - totals["returned"] - totals["nacked"]:
            return
        if totals["consumed"] != consumed:
            progress_at, consumed = time.monotonic(), totals["consumed"]
        elif time.monotonic() - progress_at > cfg.drain_s:
            return
        fleet.poll(DRAIN_POLL_S)
        fleet.collect(REPORT_TIMEOUT_S)
