"""A stream on a three-node cluster: declared through n1 (its leader's node; a member on every
node), published to through n2 with confirms, read from "first" through n3; after kill -9 of n1
and its restart, every confirmed message is read back from "first" through n2, and publishing
goes on. What happens while n1 is down: tests/integration/test_stream_replication.py.
"""
from __future__ import annotations

import pika
import pytest

from scripts.local_cluster import Cluster
from tests.integration.stream_clients import STREAM, read_first
from tests.waiting import until

pytestmark = pytest.mark.integration

@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("stream-cluster"), 3).start()
    yield c
    c.stop()


def publish(url: str, bodies: list[bytes]) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    ch.confirm_delivery()
    for body in bodies:
        ch.basic_publish("", "cs", body)  # returns once confirmed (pika raises on a nack)
    conn.close()


def test_confirmed_messages_survive_kill_9_of_the_streams_node(cluster):
    conn = pika.BlockingConnection(pika.URLParameters(cluster.url("n1")))
    conn.channel().queue_declare("cs", durable=True, arguments=STREAM)
    conn.close()
    first = [f"a{i}".encode() for i in range(100)]
    publish(cluster.url("n2"), first)
    assert read_first(cluster.url("n3"), "cs", 100, prefetch=64) == list(enumerate(first))
    cluster.kill("n1")
    cluster.restart("n1")

    def republish() -> bool:
        try:
            publish(cluster.url("n2"), [b"b0"])
            return True
        except pika.exceptions.AMQPError:  # n2 still sees the stream's node down: not confirmed
            return False
    until(republish, "a confirmed publish once n1 is back")
    got = read_first(cluster.url("n2"), "cs", 101, prefetch=64)
    assert got[:100] == list(enumerate(first))
    assert got[100] == (100, b"b0")
