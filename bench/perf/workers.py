"""Producer and consumer processes: one AMQP connection each, driven by asyncio.

Each worker process talks to the parent over a multiprocessing Pipe:
  worker -> parent: ("ready", name), ("stats", name, counters, consume_delta, confirm_delta) when
                    asked and once more at the end, ("error", name, reply_code, text), ("done", name)
  parent -> worker: ("go",) to start publishing, ("report",) for stats, ("stop",) to finish.
The parent asks every worker for stats at once each second, so a sample covers the same interval
for all of them.
A producer publishes bursts of pre-encoded messages while the confirm window, the socket's write
buffer, connection.blocked and the rate allow, and records publish->confirm latency per message
(each burst shares its send time); a consumer records publish->consume latency and acks
(every `multi_ack` messages, multiple=true when that is above 1).  Timestamps are time.time_ns()
(CLOCK_REALTIME) because producer and consumer are different processes; monotonic clocks are not
comparable across processes.
"""

from __future__ import annotations

import asyncio
import collections
import signal
import time
from multiprocessing.connection import Connection

from pika import spec

from bench.perf import framing, pacing
from bench.perf.config import Config
from wire.confirm_tracker import ConfirmTracker
from bench.perf.connection import AmqpProtocol, BrokerClosed, connect, parse_uri
from bench.perf.histogram import Histogram
from bench.perf.stats import COUNTERS, GAUGES

BURST_MESSAGES_MAX = 256
RATE_SLEEP_MAX_S = 0.01


class Worker:
    """What producers and consumers share: the pipe to the parent, counters, stop and errors."""

    def __init__(self, cfg: Config, name: str, pipe: Connection) -> None:
        self.cfg, self.name, self.pipe = cfg, name, pipe
        self.counters = dict.fromkeys(COUNTERS + GAUGES, 0)
        self.hist = Histogram()  # publish -> consume (a consumer's)
        self.confirm_hist = Histogram()  # publish -> confirm (a producer's)
        self.go = asyncio.Event()
        self.stop = asyncio.Event()
        self.wake = asyncio.Event()
        self.error: BaseException | None = None
        self.proto: AmqpProtocol | None = None

    # Handler callbacks a worker does not care about.
    def on_deliver(self, delivery_tag: int, timestamp_ns: int | None, now_ns: int) -> None:
        pass

    def on_confirm(self, delivery_tag: int, multiple: bool, ack: bool) -> None:
        pass

    def on_return(self) -> None:
        self.counters["returned"] += 1

    def on_blocked(self, blocked: bool) -> None:
        pass

    def on_closed(self, error: BaseException) -> None:
        self.error = error
        self._halt()

    def _halt(self) -> None:
        self.stop.set()
        self.go.set()
        self.wake.set()
        if self.proto is not None:
            self.proto.writable.set()

    def _on_command(self) -> None:
        try:
            command = self.pipe.recv()
        except (EOFError, OSError):
            asyncio.get_running_loop().remove_reader(self.pipe.fileno())
            command = ("stop",)  # the parent is gone
        if command[0] == "go":
            self.go.set()
        elif command[0] == "report":
            self.report()
        elif command[0] == "stop":
            self._halt()

    def report(self) -> None:
        self._tell(("stats", self.name, dict(self.counters), self.hist.take(), self.confirm_hist.take()))

    def _tell(self, message: tuple) -> None:
        try:
            self.pipe.send(message)
        except OSError:
            pass  # the parent is gone; the worker is finishing anyway

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        loop.add_reader(self.pipe.fileno(), self._on_command)
        try:
            self.proto = await connect(parse_uri(self.cfg.uri), self, self.cfg.heartbeat_s)
            await self.prepare()
            self._tell(("ready", self.name))
            await self.work()
        except (BrokerClosed, OSError, asyncio.TimeoutError) as exc:
            self.error = self.error or exc
        finally:
            loop.remove_reader(self.pipe.fileno())  # a no-op if the parent's end already closed
        self.report()
        if self.proto is not None:
            await self.proto.close()
        if self.error is not None:
            code = self.error.code if isinstance(self.error, BrokerClosed) else 0
            self._tell(("error", self.name, code, str(self.error) or repr(self.error)))
            return 1
        self._tell(("done", self.name))
        return 0

    async def prepare(self) -> None:
        raise NotImplementedError

    async def work(self) -> None:
        raise NotImplementedError


class Producer(Worker):
    def __init__(self, cfg: Config, name: str, pipe: Connection, exchange: str,
                 routing_key: str) -> None:
        super().__init__(cfg, name, pipe)
        self.exchange, self.routing_key = exchange, routing_key
        self.tracker = ConfirmTracker()
        self.bursts: collections.deque[tuple[int, int, int]] = collections.deque()  # first, last, sent ns
        self.blocked = False

    async def prepare(self) -> None:
        if self.cfg.confirm:
            await self.proto.call(spec.Confirm.Select())
        self.template = framing.publish_template(
            1, self.exchange, self.routing_key, self.cfg.size, self.proto.frame_max,
            self.cfg.persistent, self.cfg.mandatory)

    def on_confirm(self, delivery_tag: int, multiple: bool, ack: bool) -> None:
        settled = self.tracker.settle(delivery_tag, multiple)
        self.counters["confirmed" if ack else "nacked"] += settled
        self._settled_bursts(time.time_ns())
        self.wake.set()

    def _settled_bursts(self, now_ns: int) -> None:
        """Record the confirm latency of each message of every burst settled up to its last message
        (a message settled ahead of an older unsettled one counts once that one is settled too)."""
        bursts, low = self.bursts, self.tracker.low
        while bursts and bursts[0][1] < low:
            first, last, sent_ns = bursts.popleft()
            self.confirm_hist.record((now_ns - sent_ns) // 1000, last - first + 1)

    def on_blocked(self, blocked: bool) -> None:
        self.blocked = blocked
        self.counters["blocked"] = int(blocked)
        self.wake.set()

    async def work(self) -> None:
        await self.go.wait()
        cfg, proto, tracker, counters = self.cfg, self.proto, self.tracker, self.counters
        started_ns = time.monotonic_ns()
        phases = cfg.rates or ((cfg.rate, 0.0),)
        phase_started, sent = 0, 0  # messages sent in the current phase
        while not self.stop.is_set():
            n = BURST_MESSAGES_MAX
            if cfg.confirm:
                n = min(n, cfg.confirm - tracker.outstanding)
            if self.blocked or n <= 0:
                self.wake.clear()
                await self.wake.wait()
                continue
            if not proto.writable.is_set():
                await proto.writable.wait()
                continue
            rate, started = pacing.phase_at(phases, time.monotonic_ns() - started_ns)
            if started != phase_started:
                phase_started, sent = started, 0
            if rate:
                elapsed_ns = time.monotonic_ns() - started_ns - phase_started
                n = min(n, pacing.due(rate, elapsed_ns, sent, BURST_MESSAGES_MAX))
                if n == 0:
                    wait_s = pacing.wait_ns(rate, elapsed_ns, sent) / 1e9
                    await asyncio.sleep(min(wait_s, RATE_SLEEP_MAX_S))
                    continue
            now_ns = time.time_ns()
            proto.send(self.template.frames(now_ns) * n)
            sent += n
            counters["published"] += n
            if cfg.confirm:
                self.bursts.append((tracker.published + 1, tracker.published + n, now_ns))
            tracker.publish(n)
            await asyncio.sleep(0)
        await self._await_confirms()

    async def _await_confirms(self) -> None:
        """After stop, give outstanding confirms up to drain_s to arrive, so totals add up."""
        if not self.cfg.confirm or self.error is not None:
            return
        deadline = time.monotonic() + self.cfg.drain_s
        while self.tracker.outstanding and self.error is None:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self.wake.clear()
            try:
                await asyncio.wait_for(self.wake.wait(), left)
            except asyncio.TimeoutError:
                return


class Consumer(Worker):
    def __init__(self, cfg: Config, name: str, pipe: Connection, queue: str) -> None:
        super().__init__(cfg, name, pipe)
        self.queue = queue
        self.unacked = 0
        self.last_tag = 0

    async def prepare(self) -> None:
        if self.cfg.prefetch:
            await self.proto.call(spec.Basic.Qos(prefetch_count=self.cfg.prefetch))
        await self.proto.call(spec.Basic.Consume(queue=self.queue, no_ack=self.cfg.auto_ack,
                                                    arguments=self.cfg.consumer_args or None))

    def on_deliver(self, delivery_tag: int, timestamp_ns: int | None, now_ns: int) -> None:
        self.counters["consumed"] += 1
        if timestamp_ns is not None:
            self.hist.record((now_ns - timestamp_ns) // 1000)
        if self.cfg.auto_ack:
            return
        self.unacked += 1
        self.last_tag = delivery_tag
        if self.unacked >= self.cfg.multi_ack:
            self.proto.send_method(spec.Basic.Ack(delivery_tag, multiple=self.cfg.multi_ack > 1))
            self.unacked = 0

    async def work(self) -> None:
        await self.stop.wait()
        if self.unacked and self.error is None:
            self.proto.send_method(spec.Basic.Ack(self.last_tag, multiple=True))
            self.unacked = 0


def worker_main(role: str, name: str, cfg: Config, pipe: Connection, target: tuple[str, str]) -> None:
    """Process entry point. target is (exchange, routing_key) for producers, (queue, "") else."""
    # Ctrl-C goes to the whole process group; the parent alone decides how to stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    async def main() -> int:
        if role == "producer":
            return await Producer(cfg, name, pipe, *target).run()
        return await Consumer(cfg, name, pipe, target[0]).run()

    raise SystemExit(asyncio.run(main()))
