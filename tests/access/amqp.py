"""The client side of the comparison cases: pika operations whose outcome is a plain value
(("ok", ...), ("channel", code, text), ("connection", code, text), ("refused", code, text) for a
connection the broker refused to open, ("tls", reason) for a failed TLS handshake), so the same
case run against RabbitMQ and warren can be compared with ==."""
from __future__ import annotations

import re
import ssl
import time
from typing import Any, Callable

import pika
from pika.credentials import ExternalCredentials
from pika.exceptions import AMQPConnectionError, ChannelClosedByBroker, ConnectionClosedByBroker

from tests.access.brokers import Broker

_CLOSED = re.compile(r"\((\d+)\) ['\"](.+?)['\"]\"?,?\)?$")
_TLS_REASON = re.compile(r"\[SSL: ([A-Z0-9_]+)\]")
GEN_NAME = re.compile(r"amq\.gen-[A-Za-z0-9_-]{22}")


def masked(text: str) -> str:
    """A server-named queue's name, which differs run to run, as amq.gen-*."""
    return GEN_NAME.sub("amq.gen-*", text)


def params(broker: Broker, user: str = "guest", password: str = "guest", vhost: str = "/", *,
           tls: ssl.SSLContext | None = None, external: bool = False, **kw: Any) -> pika.ConnectionParameters:
    creds = ExternalCredentials() if external else pika.PlainCredentials(user, password)
    if tls is None:
        return pika.ConnectionParameters("127.0.0.1", broker.port, vhost, creds, **kw)
    return pika.ConnectionParameters("localhost", broker.ssl_port, vhost, creds,
                                     ssl_options=pika.SSLOptions(tls, "localhost"), **kw)


def connect(broker: Broker, *args: Any, **kw: Any) -> pika.BlockingConnection | tuple:
    """A connection, or why it was refused: ("refused", code, text) or ("tls", alert)."""
    try:
        return pika.BlockingConnection(params(broker, *args, **kw))
    except (AMQPConnectionError, ssl.SSLError, ConnectionError) as e:
        return refusal(e)


def refusal(e: Exception) -> tuple:
    text = repr(e)
    tls = _TLS_REASON.search(text)
    if tls is not None:
        return ("tls", tls.group(1))
    closed = _CLOSED.search(str(e.args[0]) if e.args else text)
    if closed is not None:
        return ("refused", int(closed.group(1)), closed.group(2))
    if "StreamLostError" in text or "EOF" in text or "reset" in text.lower():
        return ("dropped",)
    return ("error", type(e).__name__)


def attempt(work: Callable[[], Any]) -> tuple:
    """("ok",) or how the broker closed the channel or the connection."""
    try:
        work()
        return ("ok",)
    except ChannelClosedByBroker as e:
        return ("channel", e.reply_code, masked(e.reply_text))
    except ConnectionClosedByBroker as e:
        return ("connection", e.reply_code, masked(e.reply_text))


def closed_by_broker(conn: pika.BlockingConnection, within_s: float = 10.0) -> tuple:
    """How the broker closes `conn` within `within_s` (("open",) if it does not)."""
    deadline = time.monotonic() + within_s
    try:
        while time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.1)
        return ("open",)
    except ConnectionClosedByBroker as e:
        return ("connection", e.reply_code, e.reply_text)


def publisher(conn: pika.BlockingConnection) -> Any:
    ch = conn.channel()
    ch.confirm_delivery()
    return ch


def close(conn: Any) -> None:
    if isinstance(conn, pika.BlockingConnection) and conn.is_open:
        conn.close()
