"""A small asyncio AMQP 0-9-1 client connection with one channel, built for throughput.

Theory of operation: `AmqpProtocol` is a raw asyncio.Protocol.  Outgoing frames are queued with
`send()` and written with one `writelines` per event-loop turn; every `data_received` is cut into all
the frames it completes (framing.FrameSplitter) and dispatched in order.  Methods are encoded and
decoded by pika.spec.  Content (basic.deliver / basic.return) is assembled just far enough to know
the message is complete and to read the timestamp in its first 8 body bytes; properties are never
decoded because the tool does not use them.

The protocol calls a `Handler` for everything asynchronous: deliveries, confirms, returns,
connection.blocked/unblocked, consumer cancellation and a close by the broker.  Synchronous methods
(channel.open, queue.declare ...) go through `call()`, which waits for the reply of the same class.
Heartbeats are sent every half interval whatever the traffic; missed server heartbeats are not
detected (a benchmark run is watched by a person).
Only channel 1 is used; the tool opens one connection per producer and consumer, as PerfTest does.
"""

from __future__ import annotations

import asyncio
import time
import urllib.parse
from dataclasses import dataclass
from typing import Protocol

import structlog
from pika import spec

from bench.perf import framing

LOG = structlog.get_logger(__name__)
CHANNEL = 1
FRAME_MAX_WANTED = 131072
WRITE_BUFFER_HIGH_BYTES = 4 << 20
WRITE_BUFFER_LOW_BYTES = 1 << 20
CLIENT_PROPERTIES = {
    "product": "warren perf",
    "platform": "Python asyncio",
    "capabilities": {
        "publisher_confirms": True,
        "basic.nack": True,
        "consumer_cancel_notify": True,
        "connection.blocked": True,
        "authentication_failure_close": True,
    },
}
CONTENT_METHODS = (spec.Basic.Deliver, spec.Basic.Return, spec.Basic.GetOk)


class BrokerClosed(Exception):
    """The broker closed the connection or the channel; carries its reply code and text."""

    def __init__(self, code: int, text: str, scope: str) -> None:
        super().__init__(f"{scope} closed by broker: {code} {text}")
        self.code, self.text, self.scope = code, text, scope


class Handler(Protocol):
    def on_deliver(self, delivery_tag: int, timestamp_ns: int | None, now_ns: int) -> None: ...
    def on_confirm(self, delivery_tag: int, multiple: bool, ack: bool) -> None: ...
    def on_return(self) -> None: ...
    def on_blocked(self, blocked: bool) -> None: ...
    def on_closed(self, error: BaseException) -> None: ...


@dataclass(frozen=True)
class Uri:
    host: str
    port: int
    user: str
    password: str
    vhost: str


def parse_uri(uri: str) -> Uri:
    """amqp://user:pass@host:port/vhost, RabbitMQ's URI spec (vhost percent-encoded, '/' by default)."""
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme != "amqp":
        raise ValueError(f"only amqp:// URIs are supported, got {uri!r}")
    path = parts.path[1:] if parts.path.startswith("/") else parts.path
    return Uri(host=parts.hostname or "localhost", port=parts.port or 5672,
               user=urllib.parse.unquote(parts.username or "guest"),
               password=urllib.parse.unquote(parts.password or "guest"),
               vhost=urllib.parse.unquote(path) if parts.path else "/")


class AmqpProtocol(asyncio.Protocol):
    def __init__(self, uri: Uri, handler: Handler, heartbeat_s: int) -> None:
        self.uri, self.handler, self.heartbeat_wanted_s = uri, handler, heartbeat_s
        self.loop = asyncio.get_running_loop()
        self.splitter = framing.FrameSplitter()
        self.opened: asyncio.Future[None] = self.loop.create_future()
        self.writable = asyncio.Event()
        self.writable.set()
        self.frame_max = FRAME_MAX_WANTED
        self.closed: BaseException | None = None
        self._transport: asyncio.Transport | None = None
        self._pending: list[bytes] = []
        self._waiter: tuple[type, asyncio.Future] | None = None
        self._content: spec.amqp_object.Method | None = None
        self._content_left = 0
        self._content_ts: int | None = None
        self._content_first = False
        self._now_ns = 0
        self._heartbeat: asyncio.TimerHandle | None = None
        self._closing = False

    # -- output -----------------------------------------------------------------------------
    def send(self, data: bytes) -> None:
        if not self._pending:
            self.loop.call_soon(self._flush)
        self._pending.append(data)

    def send_method(self, method: spec.amqp_object.Method, channel: int = CHANNEL) -> None:
        self.send(framing.encode_method(channel, method))

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        if self._transport is not None and not self._transport.is_closing():
            self._transport.writelines(pending)

    async def call(self, method: spec.amqp_object.Method, channel: int = CHANNEL):
        """Send a synchronous method and wait for its reply (a method of the same class)."""
        assert self._waiter is None, "one synchronous call at a time"
        self._raise_if_closed()
        future = self.loop.create_future()
        self._waiter = (type(method).__qualname__.split(".")[0], future)
        self.send_method(method, channel)
        try:
            return await future
        finally:
            self._waiter = None

    def _raise_if_closed(self) -> None:
        if self.closed is not None:
            raise self.closed

    # -- asyncio.Protocol -------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        transport.set_write_buffer_limits(WRITE_BUFFER_HIGH_BYTES, WRITE_BUFFER_LOW_BYTES)
        transport.write(b"AMQP\x00\x00\x09\x01")

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
        self._fail(exc or ConnectionError("connection closed"))

    def data_received(self, data: bytes) -> None:
        self._now_ns = time.time_ns()
        try:
            frames = self.splitter.feed(data)
        except framing.FrameError as exc:
            self._fail(exc)
            self._transport.close()
            return
        for frame_type, channel, payload in frames:
            if frame_type == 3:
                self._on_body(payload)
            elif frame_type == 1:
                self._on_method(channel, framing.decode_method(payload))
            elif frame_type == 2:
                self._content_left = framing.body_size(payload)
                self._content_first = True
                if self._content_left == 0:
                    self._on_content()
            # frame type 8 (heartbeat) needs no answer

    # -- input ------------------------------------------------------------------------------
    def _on_body(self, payload: bytes) -> None:
        if self._content_first:
            self._content_first = False
            self._content_ts = (framing.body_timestamp(payload)
                                if len(payload) >= framing.TIMESTAMP_BYTES else None)
        self._content_left -= len(payload)
        if self._content_left <= 0:
            self._on_content()

    def _on_content(self) -> None:
        method, self._content = self._content, None
        if isinstance(method, spec.Basic.Deliver):
            self.handler.on_deliver(method.delivery_tag, self._content_ts, self._now_ns)
        elif isinstance(method, spec.Basic.Return):
            self.handler.on_return()
        self._content_ts = None

    def _on_method(self, channel: int, method: spec.amqp_object.Method) -> None:
        if isinstance(method, CONTENT_METHODS):
            self._content = method
        elif isinstance(method, spec.Basic.Ack):
            self.handler.on_confirm(method.delivery_tag, method.multiple, True)
        elif isinstance(method, spec.Basic.Nack):
            self.handler.on_confirm(method.delivery_tag, method.multiple, False)
        elif isinstance(method, spec.Connection.Blocked):
            self.handler.on_blocked(True)
        elif isinstance(method, spec.Connection.Unblocked):
            self.handler.on_blocked(False)
        elif isinstance(method, spec.Connection.Close):
            self.send_method(spec.Connection.CloseOk(), 0)
            self._fail(BrokerClosed(method.reply_code, method.reply_text, "connection"))
        elif isinstance(method, spec.Channel.Close):
            self.send_method(spec.Channel.CloseOk(), channel)
            self._fail(BrokerClosed(method.reply_code, method.reply_text, "channel"))
        elif isinstance(method, spec.Basic.Cancel):
            self._fail(BrokerClosed(0, "consumer cancelled by broker (basic.cancel)", "consumer"))
        elif isinstance(method, spec.Connection.Start):
            self._on_start(method)
        elif isinstance(method, spec.Connection.Tune):
            self._on_tune(method)
        elif isinstance(method, spec.Connection.OpenOk):
            self.opened.set_result(None)
        elif self._waiter is not None and type(method).__qualname__.startswith(self._waiter[0] + "."):
            if not self._waiter[1].done():
                self._waiter[1].set_result(method)
        else:
            LOG.warning("perf.unexpected_method", method=method.NAME, channel=channel)

    def _on_start(self, method: spec.Connection.Start) -> None:
        # PLAIN is what every RabbitMQ-compatible broker offers; a refusal arrives as connection.close.
        response = f"\0{self.uri.user}\0{self.uri.password}"
        self.send_method(spec.Connection.StartOk(client_properties=CLIENT_PROPERTIES,
                                                 mechanism="PLAIN", response=response), 0)

    def _on_tune(self, method: spec.Connection.Tune) -> None:
        self.frame_max = min(method.frame_max or FRAME_MAX_WANTED, FRAME_MAX_WANTED)
        heartbeat = (min(method.heartbeat, self.heartbeat_wanted_s)
                     if method.heartbeat and self.heartbeat_wanted_s else 0)
        self.send_method(spec.Connection.TuneOk(channel_max=method.channel_max or 2047,
                                                frame_max=self.frame_max, heartbeat=heartbeat), 0)
        self.send_method(spec.Connection.Open(virtual_host=self.uri.vhost), 0)
        if heartbeat:
            self._schedule_heartbeat(heartbeat / 2)

    def _schedule_heartbeat(self, interval_s: float) -> None:
        def beat() -> None:
            self.send(framing.encode_heartbeat())
            self._heartbeat = self.loop.call_later(interval_s, beat)
        self._heartbeat = self.loop.call_later(interval_s, beat)

    def _fail(self, error: BaseException) -> None:
        if self.closed is not None:
            return
        self.closed = error
        for future in (self.opened, self._waiter[1] if self._waiter else None):
            if future is not None and not future.done():
                future.set_exception(error)
        self.writable.set()
        if not self._closing:
            self.handler.on_closed(error)

    # -- lifecycle --------------------------------------------------------------------------
    async def close(self, timeout_s: float = 5.0) -> None:
        """Close politely (connection.close, wait for close-ok or the socket to end)."""
        self._closing = True
        if self.closed is None and self._transport is not None:
            self._waiter = ("Connection", self.loop.create_future())
            self.send_method(spec.Connection.Close(reply_code=200, reply_text="bye",
                                                   class_id=0, method_id=0), 0)
            try:
                await asyncio.wait_for(self._waiter[1], timeout_s)
            except (asyncio.TimeoutError, BrokerClosed, OSError):
                pass  # the socket is closed below either way
            self._waiter = None
        if self._heartbeat is not None:
            self._heartbeat.cancel()
        if self._transport is not None:
            self._transport.close()


async def connect(uri: Uri, handler: Handler, heartbeat_s: int = 60,
                  timeout_s: float = 10.0) -> AmqpProtocol:
    """Open a connection and channel 1; raises BrokerClosed or OSError on failure."""
    loop = asyncio.get_running_loop()
    _, protocol = await asyncio.wait_for(
        loop.create_connection(lambda: AmqpProtocol(uri, handler, heartbeat_s), uri.host, uri.port),
        timeout_s)
    await asyncio.wait_for(protocol.opened, timeout_s)
    await asyncio.wait_for(protocol.call(spec.Channel.Open()), timeout_s)
    return protocol
