"""A replicated stream on a three-node cluster (actors/stream/replication.py), with real nodes
and pika: members on x-initial-cluster-size nodes (all by default) with the leader where
x-queue-leader-locator puts it, as `warrenctl stream_status` shows them; a publish through a
replica confirmed; kill -9 of the leader's node, every confirmed message read back from "first"
through another node and publishing going on; the killed node restarted, its replica caught up
and read from. Membership (actors/node/stream_membership.py): add_replica on the node without a
member, the new replica caught up and holding every confirmed message once the leader's node is
killed (-9); delete_replica of a member, its log gone from its node and the records changed on every
node; the refusals with RabbitMQ 3.10's texts (probed on a three-node 3.10.8 cluster).
"""
from __future__ import annotations

import json

import pika
import pytest

from scripts.local_cluster import Cluster
from tests.integration.admin_support import ok, warrenctl
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


def members(cluster: Cluster, through: str, name: str) -> list[str]:
    rows = json.loads(ok(cluster.nodes[through], "list_queues", "name", "members", "--formatter", "json"))
    return next(r["members"] for r in rows if r["name"] == name)


def stream_dirs(cluster: Cluster, node: str, name: str) -> list:
    """The stream's log directories on `node` (persist/stream: one per stream, its NAME file says whose)."""
    return [d.parent for d in (cluster.nodes[node].data_dir / "streams").glob("*/*/NAME")
            if d.read_text().split("\n")[1] == name]


def test_add_replica_catches_up_and_delete_replica_removes_the_member_and_its_log(cluster):
    declare(cluster.url("n1"), "grown", **{"x-initial-cluster-size": 2})  # n1 leads, one other member
    first = members(cluster, "n1", "grown")
    [spare] = [n for n in cluster.names if cluster.node_name(n) not in first]
    bodies = [f"g{i}".encode() for i in range(300)]
    publish(cluster.url("n1"), "grown", bodies)
    out = ok(cluster.nodes["n2"], "add_replica", "grown", cluster.node_name(spare))
    assert out == f"Adding a replica for queue grown on node {cluster.node_name(spare)}...\n"
    everyone = sorted(cluster.node_name(n) for n in cluster.names)
    for n in cluster.names:  # the record changed on every node
        until(lambda n=n: sorted(members(cluster, n, "grown")) == everyone, f"{n} sees three members")
    until(lambda: status(cluster, "n3", "grown")[cluster.node_name(spare)]["committed_offset"] == "299",
          "the new replica caught up")
    rows = status(cluster, "n1", "grown")
    assert rows[cluster.node_name(spare)]["role"] == "replica" and rows[cluster.node_name("n1")]["role"] == "writer"
    assert ok(cluster.nodes["n1"], "add_replica", "grown", cluster.node_name(spare)).endswith("...\n")  # no-op
    cluster.kill("n1")  # kill -9 of the leader's node: what the new replica holds is what it was sent
    try:
        assert read_first(cluster.url(spare), "grown", 300, prefetch=300) == list(enumerate(bodies))
    finally:
        cluster.restart("n1")
    assert stream_dirs(cluster, "n1", "grown")
    # n3 may not have heard that n1 is back yet (node_not_running until it has)
    r = until(lambda: (r := warrenctl(cluster.nodes["n3"], "delete_replica", "grown", cluster.node_name("n1")))
              .stderr != "Error: node_not_running\n" and r, "n3 sees n1 running")
    assert (r.returncode, r.stdout) == (0, f"Removing a replica of queue grown on node {cluster.node_name('n1')}...\n")
    until(lambda: not stream_dirs(cluster, "n1", "grown"), "n1's log of the stream deleted")
    left = sorted(n for n in everyone if n != cluster.node_name("n1"))
    for n in cluster.names:
        until(lambda n=n: sorted(members(cluster, n, "grown")) == left, f"{n} sees two members")
    assert sorted(status(cluster, "n2", "grown")) == left

    def republish() -> bool:  # through n1, which has no member now: to the stream's first member
        try:
            publish(cluster.url("n1"), "grown", [b"after"])
            return True
        except pika.exceptions.AMQPError:  # no leader elected yet among the two left
            return False
    until(republish, "a confirmed publish once a member that is left leads")
    got = read_first(cluster.url("n1"), "grown", 301, prefetch=301)
    assert got[:300] == list(enumerate(bodies)) and (300, b"after") in got


# rabbitmq-streams 3.10.8's answers on a three-node cluster (exit 69 each; it prints "Error:" and
# the reason on two lines, warrenctl on one, as for every command)
REFUSALS = [
    (("add_replica", "nope", "{n3}"), "Error: not_found\n"),
    (("add_replica", "--vhost", "nov", "ops.three", "{n3}"), "Error: not_found\n"),
    (("add_replica", "ops.three", "rabbit@nowhere"), "Error: node_not_running\n"),
    (("add_replica", "ops.qq", "{n3}"), "Error: Cannot add replicas to a quorum queue\n"),
    (("add_replica", "ops.cq", "{n3}"), "Error: Cannot add replicas to a classic queue\n"),
    (("delete_replica", "nope", "{n3}"), "Error: not_found\n"),
    (("delete_replica", "ops.three", "rabbit@nowhere"), "Error: node_not_running\n"),
    (("delete_replica", "ops.qq", "{n3}"), "Error: Cannot delete replicas from a quorum queue\n"),
    (("delete_replica", "ops.cq", "{n3}"), "Error: Cannot delete replicas from a classic queue\n"),
    (("delete_replica", "ops.one", "{n1}"), "Error: Cannot delete the last member of a stream\n"),
    (("delete_replica", "ops.one", "{n2}"), "Error: Cannot delete the last member of a stream\n"),
]


def test_refusals_as_rabbitmq_streams_gives_them(cluster):
    conn = pika.BlockingConnection(pika.URLParameters(cluster.url("n1")))
    ch = conn.channel()
    ch.queue_declare("ops.qq", durable=True, arguments={"x-queue-type": "quorum"})
    ch.queue_declare("ops.cq", durable=True)
    ch.queue_declare("ops.one", durable=True, arguments={**STREAM, "x-initial-cluster-size": 1})
    ch.queue_declare("ops.three", durable=True, arguments=STREAM)  # a member on every node
    conn.close()
    names = {n: cluster.node_name(n) for n in cluster.names}
    for args, expected in REFUSALS:
        r = warrenctl(cluster.nodes["n1"], *(a.format(**names) for a in args))
        assert (r.returncode, r.stderr) == (69, expected), args
    r = warrenctl(cluster.nodes["n1"], "add_replica", "ops.three", names["n3"], "--formatter", "json")  # a member: ok
    assert (r.returncode, r.stdout) == (0, f'{{"node":"{names["n1"]}","result":"ok"}}\n')
