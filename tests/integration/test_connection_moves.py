"""Running connections move to their queue's connection host (actors/reader/mover.py): a real node
with two connection hosts, real clients, the hosts named by the connections' names in
`list_connections` ("n1@vm:conn0:<incarnation>.<n>": a moved connection gets a name on its new host)."""
from __future__ import annotations

import pika
import pytest

from tests.integration.alarm_support import ask, status
from tests.integration.nodes import module_node, queue_host
from tests.integration.raw_client import RawClient
from tests.waiting import until
from wire import methods as m

pytestmark = pytest.mark.integration  # starts real node processes


node = module_node("moves")


def hosts(node) -> list[str]:
    """The host serving each of the node's connections."""
    return sorted(row["name"].rsplit(":", 2)[1] for host in status(node)["connection_hosts"]
                  for row in ask(node, host, "list_connections"))


def test_a_steady_publisher_and_its_consumer_end_up_with_their_queue_and_lose_nothing(node):
    until(lambda: not hosts(node), "the node's readiness probe to be gone")
    queue = "moves-steady"
    there = queue_host(node, queue)
    consumer = pika.BlockingConnection(pika.URLParameters(node.url))
    publisher = pika.BlockingConnection(pika.URLParameters(node.url))
    try:
        cch = consumer.channel()
        cch.queue_declare(queue, durable=True)
        cch.basic_qos(prefetch_count=50)
        got: list[bytes] = []

        def on_message(ch, method, _props, body):
            got.append(body)
            ch.basic_ack(method.delivery_tag)
        cch.basic_consume(queue, on_message)
        pch = publisher.channel()
        pch.confirm_delivery()
        sent = 0

        def publish_some(n: int) -> list[str]:
            nonlocal sent
            for _ in range(n):  # each publish waits for its confirm: a slow, steady publisher
                pch.basic_publish("", queue, str(sent).encode(), pika.BasicProperties(delivery_mode=2))
                sent += 1
            consumer.process_data_events(0)
            return hosts(node)

        # a few publishes per poll: slow enough for the mover on the slowest machine
        until(lambda: publish_some(5) == [there, there], f"both connections to be served by {there}", 60)
        publish_some(200)
        until(lambda: consumer.process_data_events(0) or len(got) >= sent, "every message to arrive")
        assert got == [str(i).encode() for i in range(sent)]
        assert cch.queue_declare(queue, passive=True).method.message_count == 0
    finally:
        for conn in (consumer, publisher):
            if conn.is_open:
                conn.close()


def test_a_consume_read_together_with_more_commands_moves_with_them(node):
    until(lambda: not hosts(node), "the earlier connections to be gone")
    raw = RawClient(node.port)
    try:
        (here,) = hosts(node)
        queue = next(q for q in (f"moves-pipelined-{i}" for i in range(100)) if queue_host(node, q) != here)
        raw.send(b"".join(raw.method_frame(method) for method in (
            m.QueueDeclare(queue=queue), m.BasicQos(prefetch_count=10))))
        raw.expect(m.QueueDeclareOk)
        raw.expect(m.BasicQosOk)
        # one write: what the old host reads in one go, of which all but the consume's first part
        # is acted on by the new host
        raw.send(raw.method_frame(m.BasicConsume(queue=queue, consumer_tag="t"))
                 + raw.publish_frames(queue, b"first") + raw.publish_frames(queue, b"second"))
        raw.expect(m.BasicConsumeOk)
        bodies = [raw.expect_delivery(), raw.expect_delivery()]
        assert [(d.method.delivery_tag, d.body) for d in bodies] == [(1, b"first"), (2, b"second")]
        assert hosts(node) == [queue_host(node, queue)]
        raw.send(raw.method_frame(m.BasicAck(delivery_tag=2, multiple=True))
                 + raw.method_frame(m.QueueDelete(queue=queue)))
        assert raw.expect(m.QueueDeleteOk).method.message_count == 0
    finally:
        raw.close()


def test_a_slow_confirming_publisher_moves_to_its_queues_host_and_every_publish_lands(node):
    until(lambda: not hosts(node), "the earlier connections to be gone")
    publisher = pika.BlockingConnection(pika.URLParameters(node.url))
    try:
        (here,) = hosts(node)
        queue = next(q for q in (f"moves-publisher-{i}" for i in range(100)) if queue_host(node, q) != here)
        ch = publisher.channel()
        ch.queue_declare(queue)
        ch.confirm_delivery()
        sent = 0

        def publish_some(n: int) -> list[str]:
            nonlocal sent
            for _ in range(n):
                ch.basic_publish("", queue, str(sent).encode())  # raises if nacked
                sent += 1
            return hosts(node)

        until(lambda: publish_some(5) == [queue_host(node, queue)], "the publisher to move to its queue's host", 60)
        publish_some(50)  # and it goes on publishing there
        assert ch.queue_declare(queue, passive=True).method.message_count == sent
        got = [ch.basic_get(queue, auto_ack=True)[2] for _ in range(sent)]
        assert got == [str(i).encode() for i in range(sent)]
    finally:
        if publisher.is_open:
            publisher.close()
