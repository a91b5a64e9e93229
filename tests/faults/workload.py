"""The workload: publishers with confirms and consumers with manual acks (aio-pika), spread over the
nodes and a few queues, recording what happened into a `History` for the checker.

Every publisher publishes persistent messages whose body is a unique id (`queue/publisher/seq`), one
at a time, each awaited with a time-out: an ack makes the id confirmed, a nack (or a return)
nacked, a time-out or a broken connection leaves it indeterminate (it may or may not be in the
queue). Every consumer consumes one queue with a prefetch and acks each delivery after recording
it. A client that meets any error (connection or channel closed, consumer cancelled by the broker,
a time-out, a refused connect) closes what it had and reconnects to the next node after a short
back-off, as Jepsen's clients do. Publishers and consumers start on different nodes, so most
messages cross the cluster. Everything runs on one asyncio loop in a thread of its own; the
history's lists are only appended to, and read after the workload stopped. A stream's consumers
read it from "first" each time they (re)connect, so they see its messages again (duplicates, which
the checker allows).
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Awaitable, Callable

import aio_pika
import aiormq

publish_timeout_s = 10.0
connect_timeout_s = 5.0
backoff_s = 0.5
prefetch = 50
cancel_poll_s = 0.5


@dataclass
class History:
    """What the clients saw; times are seconds since `t0` (time.monotonic())."""

    t0: float = field(default_factory=time.monotonic)
    published: dict[str, str] = field(default_factory=dict)       # id -> queue, for every attempt
    sent: dict[str, float] = field(default_factory=dict)          # id -> when its publish left (latencies)
    confirmed: dict[str, float] = field(default_factory=dict)     # id -> when its ack came
    nacked: set[str] = field(default_factory=set)
    indeterminate: set[str] = field(default_factory=set)          # timed out or connection lost
    consumed: list[tuple[str, float]] = field(default_factory=list)  # every delivery, duplicates too
    drained: list[str] = field(default_factory=list)              # what the final drain got
    errors: list[tuple[float, str, str]] = field(default_factory=list)  # (when, client, error)

    def now(self) -> float:
        return time.monotonic() - self.t0


class Workload:
    def __init__(self, urls: dict[str, str], queues: list[str], history: History, *, publishers: int = 4,
                 consumers: int = 4, rate: float = 100.0, queue_args: dict | None = None,
                 streams: frozenset[str] = frozenset()) -> None:
        self.urls = urls
        self.nodes = list(urls)
        self.queues = queues
        self.history = history
        self.publishers = publishers
        self.consumers = consumers
        self.interval_s = 1.0 / rate if rate > 0 else 0.0
        self.queue_args = queue_args or {}
        self.streams = streams  # stream queues: their consumers read from "first" on every (re)connect
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="workload", daemon=True)
        self._tasks: dict[str, list[asyncio.Task]] = {"publish": [], "consume": []}
        self._stopping: dict[str, asyncio.Event] = {}

    # -- control from the campaign's thread ---------------------------------------------------
    def start(self) -> None:
        for name in ("aiormq", "aio_pika"):  # a broken connection is expected here; the history records it
            logging.getLogger(name).setLevel(logging.CRITICAL)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._spawn(), self._loop).result()

    def stop_publishers(self) -> None:
        self._stop("publish")

    def stop_consumers(self) -> None:
        self._stop("consume")

    def close(self) -> None:
        """Stop whatever still runs, then the loop."""
        for kind in ("publish", "consume"):
            if not self._stopping[kind].is_set():
                self._stop(kind)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _stop(self, kind: str) -> None:
        async def stop() -> None:
            self._stopping[kind].set()
            await asyncio.gather(*self._tasks[kind], return_exceptions=True)
        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(publish_timeout_s * 3)

    async def _spawn(self) -> None:
        self._stopping = {"publish": asyncio.Event(), "consume": asyncio.Event()}
        for i in range(self.publishers):
            self._tasks["publish"].append(asyncio.create_task(self._publisher(i)))
        for i in range(self.consumers):
            self._tasks["consume"].append(asyncio.create_task(self._consumer(i)))

    # -- clients -----------------------------------------------------------------------------
    async def _reconnecting(self, client: str, offset: int, stop: asyncio.Event,
                            session: Callable[[aio_pika.abc.AbstractConnection], Awaitable[None]]) -> None:
        """Run `session` on a connection until `stop`; after any error, the next node, after a back-off."""
        attempt = 0
        while not stop.is_set():
            conn = None
            try:
                node = self.nodes[(offset + attempt) % len(self.nodes)]
                conn = await asyncio.wait_for(aio_pika.connect(self.urls[node]), connect_timeout_s)
                await session(conn)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                self.history.errors.append((self.history.now(), client, f"{type(e).__name__}: {e}"[:300]))
                attempt += 1
                await asyncio.sleep(backoff_s)
            finally:
                await _close(conn)

    async def _publisher(self, i: int) -> None:
        h, stop = self.history, self._stopping["publish"]
        queue = self.queues[i % len(self.queues)]
        client = f"p{i}"
        seq = 0

        async def session(conn: aio_pika.abc.AbstractConnection) -> None:
            nonlocal seq
            channel = await conn.channel(publisher_confirms=True, on_return_raises=True)
            while not stop.is_set():
                seq += 1
                mid = f"{queue}/{client}/{seq}"
                h.published[mid] = queue
                h.sent[mid] = h.now()
                message = aio_pika.Message(mid.encode(), delivery_mode=aio_pika.DeliveryMode.PERSISTENT)
                try:
                    result = await channel.default_exchange.publish(message, queue, timeout=publish_timeout_s)
                except aio_pika.exceptions.DeliveryError:
                    h.nacked.add(mid)
                    await asyncio.sleep(backoff_s)  # the queue is out of reach: do not spin on nacks
                    continue
                except BaseException:
                    h.indeterminate.add(mid)
                    raise
                if isinstance(result, aiormq.spec.Basic.Ack):
                    h.confirmed[mid] = h.now()
                else:
                    h.indeterminate.add(mid)
                if self.interval_s:
                    await asyncio.sleep(self.interval_s)  # the workload's rate, not a synchronisation

        await self._reconnecting(client, i, stop, session)

    async def _consumer(self, i: int) -> None:
        h, stop = self.history, self._stopping["consume"]
        queue_name = self.queues[i % len(self.queues)]

        async def on_message(message: aio_pika.abc.AbstractIncomingMessage) -> None:
            h.consumed.append((message.body.decode(errors="replace"), h.now()))
            await message.ack()

        async def session(conn: aio_pika.abc.AbstractConnection) -> None:
            channel = await conn.channel()
            await channel.set_qos(prefetch_count=prefetch)
            queue = await channel.get_queue(queue_name, ensure=True)
            tag = await queue.consume(on_message, arguments={"x-stream-offset": "first"}
                                      if queue_name in self.streams else None)
            underlay = await channel.get_underlay_channel()
            # a broker's basic.cancel (the queue's node went away) or a closed channel ends it
            while not stop.is_set() and not channel.is_closed and tag in underlay.consumers:
                try:
                    await asyncio.wait_for(stop.wait(), cancel_poll_s)
                except asyncio.TimeoutError:
                    pass
            if not stop.is_set():
                raise ConnectionError("consumer cancelled or channel closed")

        await self._reconnecting(f"c{i}", i + 1, stop, session)


async def _close(conn: aio_pika.abc.AbstractConnection | None) -> None:
    if conn is None:
        return
    try:
        await asyncio.wait_for(conn.close(), connect_timeout_s)
    except Exception:
        pass  # it is broken already: that is why it is being closed
