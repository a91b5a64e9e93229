"""A replicated stream on a three-node cluster (actors/stream/replication.py), with real nodes
and pika: members on x-initial-cluster-size nodes (all by default) with the leader where
x-queue-leader-locator puts it, as `warrenctl stream_status` shows them; a publish through a
replica confirmed; kill -9 of the leader's node, every confirmed message read back from "first"
through another node and publishing going on; the killed node restarted, its replica caught up
and read from.
"""
from __future__ import annotations

import pika
import pytest

from scripts.local_cluster import Cluster
from tests.integration.admin_support import ok
from tests.integration.stream_clients import STREAM, read_first
from tests.waiting import until

pytestmark = pytest.mark.integration

@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("stream-replication"), 3).start()
    yield c
    c.stop()


def declare(url: str, name: str, **args) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(url))
    conn.channel().queue_declare(name, durable=True, arguments={**STREAM, **args})
    conn.close()


def publish(url: str, name: str, bodies: list[bytes]) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    ch.confirm_delivery()
    for body in bodies:
        ch.basic_publish("", name, body)  # returns once confirmed (pika raises on a nack)
    conn.close()


def status(cluster: Cluster, through: str, name: str) -> dict[str, dict[str, str]]:
    """`warrenctl stream_status` through node `through`: each member's row by its node."""
    lines = [line.split("\t") for line in ok(cluster.nodes[through], "stream_status", name).strip().splitlines()]
    header = lines[1]
    return {row[1]: dict(zip(header, row)) for row in lines[2:]}


def test_members_and_the_leader_locator(cluster):
    declare(cluster.url("n1"), "placed", **{"x-queue-leader-locator": "client-local"})
    rows = status(cluster, "n3", "placed")
    assert sorted(rows) == sorted(cluster.node_name(n) for n in cluster.names)
    assert {r["role"] for n, r in rows.items() if n != cluster.node_name("n1")} == {"replica"}
    assert rows[cluster.node_name("n1")]["role"] == "writer" and rows[cluster.node_name("n1")]["epoch"] == "1"
    declare(cluster.url("n2"), "two", **{"x-initial-cluster-size": 2})
    rows = status(cluster, "n2", "two")
    assert len(rows) == 2 and rows[cluster.node_name("n2")]["role"] == "writer"
    declare(cluster.url("n1"), "spread", **{"x-queue-leader-locator": "balanced"})  # n3 leads none yet
    assert status(cluster, "n1", "spread")[cluster.node_name("n3")]["role"] == "writer"


def test_a_deleted_stream_goes_from_every_member(cluster):
    declare(cluster.url("n1"), "gone")
    publish(cluster.url("n2"), "gone", [b"x"] * 5)
    conn = pika.BlockingConnection(pika.URLParameters(cluster.url("n3")))
    conn.channel().queue_delete("gone")
    conn.close()
    declare(cluster.url("n1"), "gone")  # a new stream of that name: every member starts empty
    assert {r["offset"] for r in status(cluster, "n2", "gone").values()} == {"-1"}


def test_kill_9_of_the_leaders_node_loses_nothing_confirmed_and_its_replica_catches_up(cluster):
    declare(cluster.url("n2"), "rs")  # client-local: the leader is on n2
    first = [f"a{i}".encode() for i in range(200)]
    publish(cluster.url("n1"), "rs", first)  # through a replica: handed on to the leader
    cluster.kill("n2")
    assert read_first(cluster.url("n3"), "rs", 200, prefetch=200) == list(enumerate(first))

    def republish() -> bool:
        try:
            publish(cluster.url("n3"), "rs", [b"b0"])
            return True
        except pika.exceptions.AMQPError:  # a publish that no leader took in time: not confirmed
            return False
    until(republish, "a confirmed publish once a replica leads")
    rows = status(cluster, "n1", "rs")
    leader = [n for n, r in rows.items() if r["role"] == "writer"]
    assert leader and leader[0] != cluster.node_name("n2") and int(rows[leader[0]]["epoch"]) >= 2
    cluster.restart("n2")
    end = int(rows[leader[0]]["offset"])
    until(lambda: int(status(cluster, "n2", "rs")[cluster.node_name("n2")]["committed_offset"] or -1) >= end,
          "the restarted replica caught up")
    got = read_first(cluster.url("n2"), "rs", 201, prefetch=200)  # read from n2's own member
    assert got[:201] == [*enumerate(first), (200, b"b0")]
