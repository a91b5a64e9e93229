"""Other real clients against a real node: pika's SelectConnection, kombu and aio-pika."""
from __future__ import annotations

import asyncio
import os
import uuid

import pika
import pytest

pytestmark = pytest.mark.integration


def test_pika_select_connection_publish_confirm_consume(node):
    q = "sel-" + uuid.uuid4().hex[:8]
    state = {"confirmed": 0, "consumed": []}
    total = 20

    def on_open(conn):
        conn.channel(on_open_callback=on_channel)

    def on_channel(ch):
        ch.confirm_delivery(lambda frame: on_confirm(ch, frame))
        ch.queue_declare(q, callback=lambda _: start(ch))

    def start(ch):
        ch.basic_consume(q, lambda c, m, p, b: on_message(c, m, b))
        for i in range(total):
            ch.basic_publish("", q, b"%d" % i)

    def on_confirm(ch, frame):
        # multiple=True covers every earlier tag
        state["confirmed"] = frame.method.delivery_tag
        maybe_done(ch)

    def on_message(ch, method, body):
        state["consumed"].append(body)
        ch.basic_ack(method.delivery_tag)
        maybe_done(ch)

    def maybe_done(ch):
        if state["confirmed"] == total and len(state["consumed"]) == total:
            ch.connection.close()

    conn = pika.SelectConnection(pika.URLParameters(node.url), on_open_callback=on_open)
    conn.ioloop.call_later(30, conn.ioloop.stop)  # a deadline, in case the broker misbehaves
    conn.add_on_close_callback(lambda *a: conn.ioloop.stop())
    conn.ioloop.start()
    assert state["confirmed"] == total
    assert state["consumed"] == [b"%d" % i for i in range(total)]


def test_kombu_producer_and_simple_queue(node):
    import kombu
    name = "kombu-" + uuid.uuid4().hex[:8]
    with kombu.Connection(f"amqp://guest:guest@127.0.0.1:{node.port}//") as conn:
        exchange = kombu.Exchange(name, type="direct")
        queue = kombu.Queue(name, exchange, routing_key="rk")
        with conn.Producer() as producer:
            producer.publish({"hello": "world"}, exchange=exchange, routing_key="rk", declare=[queue],
                             serializer="json", confirm=True)
        with conn.SimpleQueue(queue) as sq:
            msg = sq.get(timeout=10)
            assert msg.payload == {"hello": "world"}
            msg.ack()


def test_py_amqp_deleting_the_queue_it_consumes_from_gets_delete_ok_then_the_cancel(node):
    """RabbitMQ's order: queue_delete returns; the basic.cancel comes after it (py-amqp raised
    ConsumerCancelled inside queue_delete when it came first)."""
    import amqp
    name = "pyamqp-" + uuid.uuid4().hex[:8]
    with amqp.Connection(f"127.0.0.1:{node.port}") as conn:
        ch = conn.channel()
        ch.queue_declare(name)
        ch.basic_publish(amqp.Message(b"x"), routing_key=name)
        tag = ch.basic_consume(name, callback=lambda message: None, no_ack=False)
        assert ch.queue_delete(name) == 0  # the message was delivered, unacked: not ready
        with pytest.raises(amqp.exceptions.ConsumerCancelled, match=tag):
            conn.drain_events(timeout=10)


@pytest.fixture
def aio_url(request):
    """WARREN_AMQP_URL=amqp://guest:guest@127.0.0.1:PORT/%2F runs the aio-pika tests against any broker."""
    return os.environ.get("WARREN_AMQP_URL") or request.getfixturevalue("node").url


def test_aio_pika_publish_consume_with_confirms(aio_url):
    import aio_pika

    async def run():
        conn = await aio_pika.connect_robust(aio_url)
        async with conn:
            ch = await conn.channel(publisher_confirms=True)
            await ch.set_qos(prefetch_count=10)
            q = await ch.declare_queue("", exclusive=True)
            for i in range(25):
                await ch.default_exchange.publish(aio_pika.Message(body=b"%d" % i), routing_key=q.name)
            got = []
            async with q.iterator() as it:
                async for message in it:
                    async with message.process():
                        got.append(message.body)
                    if len(got) == 25:
                        break
            return got

    got = asyncio.run(asyncio.wait_for(run(), 30))
    assert got == [b"%d" % i for i in range(25)]


def test_publishes_in_flight_when_their_queue_is_deleted_are_all_confirmed(aio_url):
    """A queue deleted while publishes to it are on their way: RabbitMQ acks every one (those that
    reached the queue were dropped with it on purpose; the rest were unroutable, and aio-pika's
    mandatory publishes come back as returns before their acks), never a nack."""
    import aio_pika
    from aiormq.abc import DeliveredMessage
    from pamqp.commands import Basic

    name = "gone-" + uuid.uuid4().hex[:8]

    async def run():
        async with await aio_pika.connect(aio_url) as conn:
            pub, admin = await conn.channel(publisher_confirms=True), await conn.channel()
            queue = await admin.declare_queue(name, durable=True)
            body = aio_pika.Message(b"x" * 64, delivery_mode=aio_pika.DeliveryMode.PERSISTENT)
            sends = [asyncio.ensure_future(pub.default_exchange.publish(body, routing_key=name))
                     for _ in range(3000)]
            await sends[0]  # the queue has taken publishes; thousands more are on their way
            held = await queue.delete(if_unused=False, if_empty=False)
            done = await asyncio.gather(*sends, return_exceptions=True)
            return held.message_count, done

    held, done = asyncio.run(asyncio.wait_for(run(), 30))
    assert held > 0
    assert [x for x in done if not isinstance(x, (Basic.Ack, DeliveredMessage))] == []
