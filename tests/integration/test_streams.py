"""Stream queues through pika, warren beside RabbitMQ 3.10 (the oracle): the same answers.

Every case runs the same client script against both brokers and compares what the client saw:
the declare-ok or the close (code and text, channel or connection), and for consumers the bodies,
headers (x-stream-offset among them) and redelivered flags delivered. A consumer's case ends when
a marker published after it attached has arrived, so no case waits for something that must not
come. Each publish is confirmed one at a time, so every message is a chunk of its own on both
brokers ("last" is the newest chunk's first offset). One node (the suite's shared one) and one
oracle for the module.
"""
from __future__ import annotations

import itertools
import time
from typing import Any, Callable

import pika
import pytest

from tests.integration.oracle import start_oracle
from tests.waiting import until

pytestmark = pytest.mark.integration

STREAM = {"x-queue-type": "stream"}
_names = itertools.count()


@pytest.fixture(scope="module")
def brokers(node, tmp_path_factory):
    oracle = start_oracle(tmp_path_factory.mktemp("oracle"))
    yield {"warren": node.url, "rabbitmq": oracle.url}
    oracle.stop()


def answer(url: str, script: Callable[[Any], Any]) -> tuple:
    """What the client saw running `script(channel)`: ("ok", value) or the close it got."""
    conn = pika.BlockingConnection(pika.URLParameters(url))
    try:
        return ("ok", script(conn.channel()))
    except pika.exceptions.ChannelClosedByBroker as e:
        return ("channel", e.reply_code, e.reply_text)
    except pika.exceptions.ConnectionClosedByBroker as e:
        return ("connection", e.reply_code, e.reply_text)
    finally:
        if conn.is_open:
            conn.close()


def same(brokers: dict[str, str], script: Callable[[Any], Any]) -> tuple:
    got = {broker: answer(url, script) for broker, url in brokers.items()}
    assert got["warren"] == got["rabbitmq"], got
    return got["warren"]


def declare(name: str, args: dict | None = None, **flags: Any) -> Callable[[Any], Any]:
    def script(ch):
        ok = ch.queue_declare(name, arguments={**STREAM, **(args or {})}, **flags).method
        return ok.queue, ok.message_count, ok.consumer_count
    return script


def fresh() -> str:
    return f"stream-{next(_names)}-{time.monotonic_ns()}"


def filled(ch, name: str, n: int, args: dict | None = None) -> None:
    ch.queue_declare(name, durable=True, arguments={**STREAM, **(args or {})})
    ch.confirm_delivery()
    for i in range(n):
        ch.basic_publish("", name, f"m{i}".encode(), pika.BasicProperties(headers={"i": i}, content_type="text/plain"))


def read(name: str, offset: Any = None, *, prefetch: int = 50, before: int = 3) -> Callable[[Any], Any]:
    """Fill `name` with `before` messages, attach a consumer at `offset`, publish a marker, and
    return what arrived up to the marker."""
    def script(ch):
        filled(ch, name, before)
        ch.basic_qos(prefetch_count=prefetch)
        got = []

        def on(c, method, props, body):
            got.append((body.decode(), props.headers, props.content_type, method.redelivered))
            c.basic_ack(method.delivery_tag)
        ch.basic_consume(name, on, arguments={} if offset is None else {"x-stream-offset": offset})
        ch.basic_publish("", name, b"marker")
        until(lambda: ch.connection.process_data_events(0.02) or any(g[0] == "marker" for g in got),
              "the marker delivered")
        return got
    return script


@pytest.mark.parametrize("args, flags", [
    ({}, {}),  # non-durable
    ({}, {"durable": True, "exclusive": True}),
    ({}, {"durable": True, "auto_delete": True}),
    *[({"x-max-age": v}, {"durable": True}) for v in ("7D", "12h", "30m", "5s", "10Y", "1M", "7X", "0s", "-1s", "abc", 7)],
    *[({k: v}, {"durable": True}) for k, v in (
        ("x-max-length-bytes", 1000), ("x-max-length-bytes", -1), ("x-max-length-bytes", "a"),
        ("x-stream-max-segment-size-bytes", 1000), ("x-stream-max-segment-size-bytes", -1),
        ("x-initial-cluster-size", 0), ("x-initial-cluster-size", 3), ("x-queue-leader-locator", "balanced"),
        ("x-queue-leader-locator", "foo"), ("x-queue-leader-locator", 5), ("x-max-priority", 5),
        ("x-max-length", 5), ("x-message-ttl", 5), ("x-expires", 1000), ("x-dead-letter-exchange", "x"),
        ("x-overflow", "drop-head"), ("x-single-active-consumer", True), ("x-queue-mode", "lazy"),
        ("x-delivery-limit", 3), ("x-foo", 1))],
])
def test_declare(brokers, args, flags):
    name = fresh()
    same(brokers, declare(name, args, **flags))


def test_server_named_stream_is_refused(brokers):
    same(brokers, declare("", durable=True))


@pytest.mark.parametrize("redeclare", [
    lambda ch, name: ch.queue_declare(name, durable=True, arguments=STREAM).method.message_count,
    lambda ch, name: ch.queue_declare(name, durable=True).method.message_count,
    lambda ch, name: ch.queue_declare(name, durable=True, arguments={**STREAM, "x-max-age": "1D"}).method.queue,
    lambda ch, name: ch.queue_declare(name, passive=True).method.message_count,
], ids=["same", "classic", "other-max-age", "passive"])
def test_redeclare(brokers, redeclare):
    name = fresh()

    def script(ch):
        filled(ch, name, 3)
        return redeclare(ch, name)
    same(brokers, script)


def _qos(ch, prefetch: int = 0, global_prefetch: int = 0):
    if global_prefetch:
        ch.basic_qos(prefetch_count=global_prefetch, global_qos=True)
    if prefetch:
        ch.basic_qos(prefetch_count=prefetch)


@pytest.mark.parametrize("script", [
    lambda ch, name: ch.basic_get(name),
    lambda ch, name: ch.basic_get(name, auto_ack=True),
    lambda ch, name: ch.queue_purge(name).method.message_count,
    lambda ch, name: ch.basic_consume(name, lambda *a: None) and None,
    lambda ch, name: _qos(ch, 10) or ch.basic_consume(name, lambda *a: None, auto_ack=True) and None,
    lambda ch, name: _qos(ch, global_prefetch=10) or ch.basic_consume(name, lambda *a: None) and None,
    lambda ch, name: _qos(ch, 10, 10) or ch.basic_consume(name, lambda *a: None) and None,
    lambda ch, name: ch.queue_delete(name).method.message_count,
], ids=["get", "get-no-ack", "purge", "consume-without-qos", "consume-no-ack", "global-qos-only",
        "both-qos", "delete"])
def test_what_a_stream_refuses(brokers, script):
    name = fresh()

    def run(ch):
        filled(ch, name, 2)
        return script(ch, name)
    same(brokers, run)


@pytest.mark.parametrize("offset", [
    None, "first", "last", "next", 0, 2, 3, -1, "1Y", "10m", "7X", "0s", "foo", True, {"a": 1},
], ids=repr)
def test_consumer_offsets(brokers, offset):
    same(brokers, read(fresh(), offset))


def test_timestamp_offsets(brokers):
    import datetime
    for ts in (datetime.datetime(2000, 1, 1), datetime.datetime(2100, 1, 1)):
        same(brokers, read(fresh(), ts))


@pytest.mark.parametrize("settle", [
    lambda ch, tag: ch.basic_nack(tag, requeue=True),
    lambda ch, tag: ch.basic_nack(tag, requeue=False),
    lambda ch, tag: ch.basic_reject(tag, requeue=True),
    lambda ch, tag: ch.basic_reject(tag, requeue=False),
], ids=["nack-requeue", "nack", "reject-requeue", "reject"])
def test_nack_and_reject_are_refused(brokers, settle):
    name = fresh()

    def script(ch):
        filled(ch, name, 2)
        ch.basic_qos(prefetch_count=5)
        tags = []
        ch.basic_consume(name, lambda c, m, p, b: tags.append(m.delivery_tag), arguments={"x-stream-offset": "first"})
        until(lambda: ch.connection.process_data_events(0.02) or len(tags) == 2, "two deliveries")
        settle(ch, tags[0])
        ch.queue_declare(name, passive=True)  # a round trip: the refusal, if any, comes first
        return tags
    same(brokers, script)


def test_acks_only_give_credit_back(brokers):
    """prefetch 2: two deliveries until acked, then the next two; nothing is removed (a second
    consumer reads all five from first)."""
    name = fresh()

    def script(ch):
        filled(ch, name, 5)
        ch.basic_qos(prefetch_count=2)
        got = []
        ch.basic_consume(name, lambda c, m, p, b: got.append((m.delivery_tag, b)), arguments={"x-stream-offset": "first"})
        until(lambda: ch.connection.process_data_events(0.02) or len(got) == 2, "two deliveries")
        ch.queue_declare(name, passive=True)
        ch.connection.process_data_events(0)
        held = len(got)  # still 2: no credit until an ack
        ch.basic_ack(got[-1][0], multiple=True)
        until(lambda: ch.connection.process_data_events(0.02) or len(got) == 4, "two more after the ack")
        other = ch.connection.channel()
        other.basic_qos(prefetch_count=10)
        again = []
        other.basic_consume(name, lambda c, m, p, b: again.append(b), arguments={"x-stream-offset": "first"})
        until(lambda: ch.connection.process_data_events(0.02) or len(again) == 5, "a second reader's five")
        return held, [b for _, b in got], again
    same(brokers, script)


def test_many_consumers_read_the_same_messages(brokers):
    name = fresh()

    def script(ch):
        filled(ch, name, 4)
        readers = []
        for _ in range(3):
            c = ch.connection.channel()
            c.basic_qos(prefetch_count=100)
            got: list = []
            c.basic_consume(name, lambda cc, m, p, b, got=got: (got.append((b, p.headers["x-stream-offset"])),
                                                                   cc.basic_ack(m.delivery_tag)),
                            arguments={"x-stream-offset": "first"})
            readers.append(got)
        until(lambda: ch.connection.process_data_events(0.02) or all(len(g) == 4 for g in readers), "every reader's four")
        return readers
    same(brokers, script)


# -- kombu and aio-pika: the same semantics through the other Python clients ---------------------------

def kombu_answer(url: str, name: str) -> tuple:
    """kombu: declare with queue_arguments, publish with confirms, read from first with
    consumer_arguments; then basic.get, which the stream refuses (540, on the connection)."""
    import kombu
    with kombu.Connection(url, transport_options={"confirm_publish": True}) as conn:
        queue = kombu.Queue(name, durable=True, queue_arguments=STREAM, consumer_arguments={"x-stream-offset": 1})
        producer = conn.Producer()
        for i in range(4):
            producer.publish(f"k{i}", routing_key=name, declare=[queue], serializer="raw", headers={"i": i})
        got: list = []
        with conn.Consumer(queue, callbacks=[lambda body, msg: (got.append((body, msg.headers)), msg.ack())],
                           prefetch_count=10, accept=["text/plain", "application/data"]):
            _drain(conn, got, 3)
        try:
            queue.bind(conn.default_channel).get()
            refused = None
        except Exception as e:  # kombu raises the broker's close as a library error
            refused = (getattr(e, "reply_code", None) or getattr(e, "code", None), str(e).split(" - ")[-1][:60])
        return got, refused


def _drain(conn, got: list, n: int) -> None:
    import socket

    def step():
        try:
            conn.drain_events(timeout=0.05)
        except socket.timeout:
            pass
        return len(got) >= n
    until(step, f"{n} deliveries")


def test_kombu(brokers):
    name = fresh()
    answers = {b: kombu_answer(url, name) for b, url in brokers.items()}
    assert answers["warren"] == answers["rabbitmq"], answers
    assert [h["x-stream-offset"] for _, h in answers["warren"][0]] == [1, 2, 3]


async def aio_answer(url: str, name: str) -> tuple:
    """aio-pika: read from "first" on two consumers, then a nack, which the stream refuses."""
    import asyncio

    import aio_pika
    conn = await aio_pika.connect(url)
    try:
        ch = await conn.channel(publisher_confirms=True)
        queue = await ch.declare_queue(name, durable=True, arguments=STREAM)
        for i in range(3):
            await ch.default_exchange.publish(aio_pika.Message(f"a{i}".encode()), routing_key=name)
        await ch.set_qos(prefetch_count=10)
        seen: list = []
        done = asyncio.Event()

        async def on(msg):
            seen.append((msg.body, msg.headers["x-stream-offset"]))
            if len(seen) == 3:
                done.set()
                await msg.nack(requeue=True)
            else:
                await msg.ack()
        await queue.consume(on, arguments={"x-stream-offset": "first"})
        await asyncio.wait_for(done.wait(), 10)
        closed = asyncio.get_running_loop().create_future()
        conn.close_callbacks.add(lambda _c, exc: closed.done() or closed.set_result(exc))
        exc = await asyncio.wait_for(closed, 10)
        return seen, type(exc).__name__, str(exc)[:120]
    finally:
        if not conn.is_closed:
            await conn.close()


def test_aio_pika(brokers):
    import asyncio
    name = fresh()
    answers = {b: asyncio.run(aio_answer(url, name)) for b, url in brokers.items()}
    assert answers["warren"] == answers["rabbitmq"], answers
