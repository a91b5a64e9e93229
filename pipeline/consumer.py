"""One AMQP consumer on a thread of its own, for the stream reader on the driver.

pika's BlockingConnection is not thread-safe, so one thread owns it: it consumes, hands every
delivery to `on_delivery` (on that thread) and keeps the connection's heartbeats going while Spark
runs a batch. Other threads reach the connection only through `add_callback_threadsafe` (acks, stop).
A failure of the connection or channel is kept and raised by `check()`: the query then fails, and
the broker requeues whatever was not acked.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

import pika
import structlog

log = structlog.get_logger("pipeline.consumer")
poll_s = 0.2
start_timeout_s = 30.0
stop_timeout_s = 30.0
ack_timeout_s = 30.0

Delivery = Callable[[Any, pika.BasicProperties, bytes], None]


class ConsumerFailed(RuntimeError):
    pass


class QueueConsumer:
    def __init__(self, url: str, queue: str, prefetch: int, on_delivery: Delivery,
                 arguments: dict[str, Any] | None = None) -> None:
        self.url, self.queue, self.prefetch = url, queue, prefetch
        self.arguments = arguments  # basic.consume's (a stream's x-stream-offset)
        self._on_delivery = on_delivery
        self._connection: pika.BlockingConnection | None = None
        self._channel: Any = None
        self._stopping = False
        self._error: BaseException | None = None
        self._consuming = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"amqp-consumer-{queue}", daemon=True)

    def start(self) -> None:
        self._thread.start()
        if not self._consuming.wait(start_timeout_s):
            raise ConsumerFailed(f"no consumer on queue {self.queue!r} after {start_timeout_s:g} s")
        self.check()

    def check(self) -> None:
        if self._error is not None:
            raise ConsumerFailed(f"consumer on queue {self.queue!r} failed: {self._error}") from self._error

    def ack(self, delivery_tag: int) -> None:
        """Ack every delivery up to `delivery_tag` (multiple=true), from any thread; returns once the
        ack is written to the socket (the process may be ended right after)."""
        self.check()
        sent = threading.Event()

        def send() -> None:
            self._channel.basic_ack(delivery_tag=delivery_tag, multiple=True)  # flushes the socket
            sent.set()
        self._connection.add_callback_threadsafe(send)
        deadline = time.monotonic() + ack_timeout_s
        while not sent.wait(poll_s):
            self.check()
            if time.monotonic() > deadline:
                raise ConsumerFailed(f"ack of queue {self.queue!r} not sent within {ack_timeout_s:g} s")

    def stop(self) -> None:
        """Close the connection (acks asked for before are sent first) and wait for the thread."""
        if not self._thread.is_alive():
            return
        self._stopping = True
        if self._connection is not None:
            try:
                self._connection.add_callback_threadsafe(lambda: None)  # wake the loop now
            except Exception:  # the connection is already gone; the thread is ending
                pass
        self._thread.join(stop_timeout_s)

    def _run(self) -> None:
        try:
            self._connection = pika.BlockingConnection(pika.URLParameters(self.url))
            self._channel = self._connection.channel()
            self._channel.basic_qos(prefetch_count=self.prefetch)
            self._channel.basic_consume(self.queue, self._deliver, arguments=self.arguments)
            log.info("pipeline.consuming", queue=self.queue, prefetch=self.prefetch)
            self._consuming.set()
            while not self._stopping:
                self._connection.process_data_events(time_limit=poll_s)
            self._connection.close()
        except BaseException as e:  # kept for check(); the thread must not die silently
            self._error = e
            log.warning("pipeline.consumer_failed", queue=self.queue, error=str(e))
            self._consuming.set()

    def _deliver(self, _channel: Any, method: Any, props: pika.BasicProperties, body: bytes) -> None:
        self._on_delivery(method, props, body)
