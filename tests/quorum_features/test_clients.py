"""kombu and aio-pika against quorum queues, on one node and on three: declare with their own
queue arguments, confirmed publishes, consuming with acks, requeue with x-delivery-count, a
reject-publish queue's nack, dead-lettering, and global QoS refused."""
from __future__ import annotations

import asyncio

import pytest

from tests.waiting import async_until

pytestmark = pytest.mark.integration

QQ = {"x-queue-type": "quorum"}


def kombu_url(url: str) -> str:
    return url.replace("/%2F", "//")


def test_kombu_confirmed_publish_consume_and_requeue(broker, name):
    import kombu
    queue = kombu.Queue(name, durable=True, queue_arguments={**QQ, "x-delivery-limit": 3})
    with kombu.Connection(kombu_url(broker.publish_url), transport_options={"confirm_publish": True}) as conn:
        with conn.Producer() as producer:
            for i in range(10):
                producer.publish({"n": i}, routing_key=name, declare=[queue], serializer="json")
    with kombu.Connection(kombu_url(broker.consume_url)) as conn:
        with conn.SimpleQueue(queue) as sq:
            sq.consumer.qos(prefetch_count=1)  # else all ten are with the client before the requeue
            first = sq.get(timeout=10)
            assert first.payload == {"n": 0} and not first.delivery_info["redelivered"]
            first.requeue()
            again = sq.get(timeout=10)  # back near the head: a delivery limit is set
            assert again.payload == {"n": 0} and again.delivery_info["redelivered"]
            assert again.headers["x-delivery-count"] == 1
            again.ack()
            rest = []
            for _ in range(9):
                m = sq.get(timeout=10)
                m.ack()
                rest.append(m.payload["n"])
            assert rest == list(range(1, 10))


def test_kombu_reject_publish_nacks_the_publish(broker, name):
    import amqp
    import kombu
    queue = kombu.Queue(name, durable=True, queue_arguments={**QQ, "x-max-length": 1,
                                                               "x-overflow": "reject-publish"})
    with kombu.Connection(kombu_url(broker.publish_url), transport_options={"confirm_publish": True}) as conn:
        with conn.Producer() as producer:
            producer.publish(b"1", routing_key=name, declare=[queue])
            producer.publish(b"2", routing_key=name)  # goes over the limit: still taken
            with pytest.raises(amqp.exceptions.MessageNacked):
                producer.publish(b"3", routing_key=name)


def run(coro, timeout_s: float = 30):
    return asyncio.run(asyncio.wait_for(coro, timeout_s))


def test_aio_pika_confirms_consume_and_dead_lettering(broker, name):
    import aio_pika

    async def main():
        pub = await aio_pika.connect_robust(broker.publish_url)
        con = await aio_pika.connect_robust(broker.consume_url)
        async with pub, con:
            pch = await pub.channel(publisher_confirms=True)
            dead = await pch.declare_queue(name + "-dead", durable=True, arguments=QQ)
            await pch.declare_queue(name, durable=True, arguments={
                **QQ, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dead.name,
                "x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish"})
            for i in range(20):
                await pch.default_exchange.publish(aio_pika.Message(body=b"%d" % i), routing_key=name)
            cch = await con.channel()
            await cch.set_qos(prefetch_count=5)
            queue = await cch.get_queue(name, ensure=False)
            got = []
            async with queue.iterator() as it:
                async for message in it:
                    got.append(message.body)
                    if message.body == b"7":
                        await message.reject(requeue=False)  # dead-lettered, at least once
                    else:
                        await message.ack()
                    if len(got) == 20:
                        break
            async def dead_lettered():  # the worker confirms the copy: poll the target for it
                return await (await cch.get_queue(dead.name, ensure=False)).get(timeout=10, fail=False)
            dead_got = await async_until(dead_lettered, "the dead-lettered copy", 15.0)
            await dead_got.ack()
            return got, dead_got.body, dead_got.headers["x-death"][0]["reason"]

    got, dead_body, reason = run(main())
    assert got == [b"%d" % i for i in range(20)]
    assert (dead_body, reason) == (b"7", "rejected")


def test_aio_pika_global_qos_consume_is_refused(broker, name):
    import aio_pika
    import aiormq

    async def main():
        conn = await aio_pika.connect(broker.declare_url)
        try:
            ch = await conn.channel()
            queue = await ch.declare_queue(name, durable=True, arguments=QQ)
            await ch.set_qos(prefetch_count=3, global_=True)
            async def ignore(_message: aio_pika.abc.AbstractIncomingMessage) -> None:
                pass
            with pytest.raises(aiormq.exceptions.ConnectionNotImplemented) as closed:
                await queue.consume(ignore)
            return str(closed.value)
        finally:
            if not conn.is_closed:
                await conn.close()

    assert run(main()).endswith(f"NOT_IMPLEMENTED - queue '{name}' in vhost '/' does not support global qos")
