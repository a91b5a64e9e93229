"""Publish a stream of messages with publisher confirms, many in flight, and fail on any loss.

One connection and one channel in confirm mode (pika's SelectConnection, driven until the stream is
confirmed): at most `window_max` publishes are unconfirmed at a time. The run fails, with the reason
as the exception's text, when the broker nacks a publish, returns one (mandatory and unroutable:
RabbitMQ sends basic.return before the basic.ack of the same message), closes the channel or the
connection, or confirms nothing for `confirm_timeout_s`. A failed run may have delivered some of
its messages: the caller (a Spark task) is retried as a whole, so delivery is at-least-once.
"""
from __future__ import annotations

import time
from typing import Any, Iterable, Iterator

import pika
from pika.spec import Basic

from wire.confirm_tracker import ConfirmTracker
from pipeline.rows import Outgoing

timeout_check_s = 1.0


class PublishFailed(RuntimeError):
    pass


def publish_all(url: str, exchange: str, messages: Iterable[Outgoing], *, mandatory: bool = True,
                window_max: int = 1000, confirm_timeout_s: float = 60.0) -> int:
    """Publish `messages` to `exchange`; the number confirmed (all of them), or PublishFailed."""
    return _Run(url, exchange, iter(messages), mandatory, window_max, confirm_timeout_s).run()


class _Run:
    def __init__(self, url: str, exchange: str, messages: Iterator[Outgoing], mandatory: bool,
                 window_max: int, confirm_timeout_s: float) -> None:
        self.exchange, self.messages, self.mandatory = exchange, messages, mandatory
        self.window_max, self.confirm_timeout_s = window_max, confirm_timeout_s
        self.tracker = ConfirmTracker()
        self.exhausted = False
        self.failure: str | None = None
        self.finishing = False
        self.progress_at = time.monotonic()
        self.channel: Any = None
        self.connection = pika.SelectConnection(
            pika.URLParameters(url), on_open_callback=self._opened,
            on_open_error_callback=lambda _c, e: self._fail(f"cannot connect: {e}"),
            on_close_callback=self._closed)

    def run(self) -> int:
        self.connection.ioloop.call_later(timeout_check_s, self._check_timeout)
        self.connection.ioloop.start()
        if self.failure is not None:
            raise PublishFailed(self.failure)
        return self.tracker.published

    # ------------------------------------------------------------ connection events
    def _opened(self, connection: pika.SelectConnection) -> None:
        connection.channel(on_open_callback=self._channel_open)

    def _channel_open(self, channel: Any) -> None:
        self.channel = channel
        channel.add_on_close_callback(self._channel_closed)
        channel.add_on_return_callback(self._returned)
        channel.confirm_delivery(self._confirmed, callback=lambda _frame: self._pump())

    def _channel_closed(self, _channel: Any, reason: Exception) -> None:
        if not self.finishing:
            self._fail(f"channel closed: {reason}")

    def _closed(self, _connection: Any, reason: Exception) -> None:
        if not self.finishing and self.failure is None:
            self.failure = f"connection closed: {reason}"
        self.connection.ioloop.stop()

    # ------------------------------------------------------------ publishing
    def _pump(self) -> None:
        room = self.window_max - self.tracker.outstanding
        while room > 0 and not self.exhausted and self.failure is None:
            message = next(self.messages, None)
            if message is None:
                self.exhausted = True
                break
            self.channel.basic_publish(self.exchange, message.routing_key, message.body, message.properties,
                                       mandatory=self.mandatory)
            self.tracker.publish(1)
            room -= 1
        if self.exhausted and self.tracker.outstanding == 0:
            self._finish()

    def _confirmed(self, frame: Any) -> None:
        method = frame.method
        settled = self.tracker.settle(method.delivery_tag, method.multiple)
        self.progress_at = time.monotonic()
        if isinstance(method, Basic.Nack) and settled:
            self._fail(f"{settled} message(s) nacked by the broker (exchange {self.exchange!r})")
            return
        if self.failure is None:
            self._pump()

    def _returned(self, _channel: Any, method: Any, _props: Any, _body: bytes) -> None:
        self._fail(f"message returned as unroutable: {method.reply_code} {method.reply_text} "
                   f"(exchange {method.exchange!r}, routing key {method.routing_key!r})")

    def _check_timeout(self) -> None:
        if self.finishing:
            return
        if self.tracker.outstanding and time.monotonic() - self.progress_at > self.confirm_timeout_s:
            self._fail(f"no confirm for {self.confirm_timeout_s:g} s ({self.tracker.outstanding} unconfirmed)")
            return
        self.connection.ioloop.call_later(timeout_check_s, self._check_timeout)

    # ------------------------------------------------------------ ending
    def _fail(self, reason: str) -> None:
        if self.failure is None:
            self.failure = reason
        self._finish()

    def _finish(self) -> None:
        if self.finishing:
            return
        self.finishing = True
        if self.connection.is_open:
            self.connection.close()
        elif not self.connection.is_closing:
            self.connection.ioloop.stop()
