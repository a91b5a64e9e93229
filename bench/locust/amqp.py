"""An AMQP client for locust users: pika's BlockingConnection (cooperative under locust's gevent), each
operation reported through locust's request event so its statistics, CSVs and web UI show them.

Request types (the `name` is the scenario's label, e.g. the queue kind):
- publish:  basic.publish with confirms (mandatory), publish to basic.ack; a nack, a return
            (unroutable) or a closed channel is a failure.
- consume:  publish to deliver, from the publisher's clock (header `sent_ns`, time.time_ns(); users
            run on one machine), counted when the consumer acks the delivery.
- rpc:      a request to a server queue with reply-to amq.rabbitmq.reply-to (direct reply-to),
            publish to the reply with the same correlation id; no reply in time is a failure.
- serve:    the RPC server's handling of one request (consume to reply published).
- declare:  queue.declare round trips (the many-small-queues scenario declares its queues).
- fill:     one transaction of up to 1000 publishes that fills the long queue before it runs.
"""
from __future__ import annotations

import time
import uuid
from typing import Any, Callable

import pika
from pika.exceptions import AMQPError

sent_header = "sent_ns"
direct_reply_to = "amq.rabbitmq.reply-to"


class AmqpClient:
    def __init__(self, url: str, fire: Callable[..., None]) -> None:
        self._fire = fire
        self.connection = pika.BlockingConnection(pika.URLParameters(url))
        self.channel = self.connection.channel()
        self._replies: dict[str, Any] = {}

    def report(self, request_type: str, name: str, started_s: float, length: int,
               exception: BaseException | None = None) -> None:
        self._fire(request_type=request_type, name=name, response_time=(time.perf_counter() - started_s) * 1000,
                   response_length=length, exception=exception, context={})

    # ------------------------------------------------------------ topology
    def declare(self, queue: str, name: str | None = None, **kwargs: Any) -> None:
        """queue.declare; reported as a `declare` request when `name` is given."""
        started = time.perf_counter()
        try:
            self.channel.queue_declare(queue, **kwargs)
        except AMQPError as e:
            if name is None:
                raise
            self.report("declare", name, started, 0, e)
            raise
        if name is not None:
            self.report("declare", name, started, 0)

    # ------------------------------------------------------------ publishing
    def confirm(self) -> None:
        self.channel.confirm_delivery()

    def publish(self, name: str, exchange: str, routing_key: str, body: bytes, persistent: bool = False,
                **properties: Any) -> None:
        """One publish, waiting for its confirm (the channel must be in confirm mode)."""
        headers = {sent_header: time.time_ns(), **properties.pop("headers", {})}
        props = pika.BasicProperties(headers=headers, delivery_mode=2 if persistent else None, **properties)
        started = time.perf_counter()
        try:
            self.channel.basic_publish(exchange, routing_key, body, props, mandatory=True)
        except AMQPError as e:  # NackError, UnroutableError, a closed channel
            self.report("publish", name, started, len(body), e)
            return
        self.report("publish", name, started, len(body))

    def fill(self, name: str, queue: str, body: bytes, n: int, batch: int = 1000) -> None:
        """Put `n` messages into `queue` in transactions of `batch` (a commit-ok means routed), on a
        channel of their own; each commit is reported as a `fill` request."""
        channel = self.connection.channel()
        channel.tx_select()
        props = pika.BasicProperties(headers={sent_header: time.time_ns()})
        for first in range(0, n, batch):
            started = time.perf_counter()
            count = min(batch, n - first)
            for _ in range(count):
                channel.basic_publish("", queue, body, props)
            channel.tx_commit()
            self.report("fill", name, started, count * len(body))
        channel.close()

    # ------------------------------------------------------------ consuming
    def consume(self, queue: str, name: str, prefetch: int) -> None:
        """Consume `queue` with manual acks; every delivery is acked, then reported as `consume`."""
        self.channel.basic_qos(prefetch_count=prefetch)

        def deliver(ch: Any, method: Any, props: pika.BasicProperties, body: bytes) -> None:
            ch.basic_ack(method.delivery_tag)
            sent = (props.headers or {}).get(sent_header)
            if sent is None:
                self._fire(request_type="consume", name=name, response_time=0, response_length=len(body),
                           exception=ValueError(f"a delivery from {queue!r} has no {sent_header} header"),
                           context={})
                return
            self._fire(request_type="consume", name=name, response_time=(time.time_ns() - sent) / 1e6,
                       response_length=len(body), exception=None, context={})
        self.channel.basic_consume(queue, deliver)

    def pump(self, seconds: float) -> None:
        """Let deliveries (and heartbeats) in for `seconds`."""
        self.connection.process_data_events(time_limit=seconds)

    # ------------------------------------------------------------ RPC
    def serve(self, queue: str, name: str, prefetch: int) -> None:
        """Answer every request on `queue`: the body back to its reply-to, with its correlation id."""
        self.channel.basic_qos(prefetch_count=prefetch)

        def handle(ch: Any, method: Any, props: pika.BasicProperties, body: bytes) -> None:
            started = time.perf_counter()
            ch.basic_publish("", props.reply_to, body, pika.BasicProperties(correlation_id=props.correlation_id))
            ch.basic_ack(method.delivery_tag)
            self.report("serve", name, started, len(body))
        self.channel.basic_consume(queue, handle)

    def rpc_ready(self) -> None:
        def reply(_ch: Any, _method: Any, props: pika.BasicProperties, body: bytes) -> None:
            self._replies[props.correlation_id] = body
        self.channel.basic_consume(direct_reply_to, reply, auto_ack=True)

    def rpc(self, name: str, routing_key: str, body: bytes, timeout_s: float) -> None:
        """A request and its reply over direct reply-to (rpc_ready first)."""
        correlation = uuid.uuid4().hex
        started = time.perf_counter()
        self.channel.basic_publish("", routing_key, body, pika.BasicProperties(
            reply_to=direct_reply_to, correlation_id=correlation))
        deadline = started + timeout_s
        while correlation not in self._replies:
            left = deadline - time.perf_counter()
            if left <= 0:
                self.report("rpc", name, started, 0, TimeoutError(f"no reply within {timeout_s:g} s"))
                return
            self.connection.process_data_events(time_limit=min(left, 0.1))
        answer = self._replies.pop(correlation)
        error = None if answer == body else ValueError("the reply is not the request's body")
        self.report("rpc", name, started, len(answer), error)

    def close(self) -> None:
        if self.connection.is_open:
            self.connection.close()
