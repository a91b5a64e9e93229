"""Real nodes for the quorum queue feature tests: one node, and a three-node cluster (`broker` is
parametrized over both). On three nodes a queue is declared through
n1 (client-local: its leader is there), published to through n2 and consumed from through n3, so
every feature is also checked across nodes. consumer_timeout is short so that its test is quick,
and the members' clock is 50 ms rather than 250 (raft.tick_ms): a declaration waits for its queue's
first election, which the client-local member asks for at its first tick.
The node and the cluster are shared by the package's modules (pytest runs every test on one node
first, then every test on three), so each starts once."""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pika
import pika.exceptions
import pytest

from scripts.local_cluster import Cluster, Node, start_node
from tests.integration.cluster import sees_queue
from tests.waiting import until

CONSUMER_TIMEOUT_MS = 2000
_names = itertools.count()


@dataclass
class Broker:
    kind: str  # "one" or "three"
    nodes: list[Node]

    @property
    def declare_url(self) -> str:
        return self.nodes[0].url

    @property
    def publish_url(self) -> str:
        return self.nodes[1 % len(self.nodes)].url

    @property
    def consume_url(self) -> str:
        return self.nodes[2 % len(self.nodes)].url

    def connect(self, role: str = "declare") -> pika.BlockingConnection:
        return pika.BlockingConnection(pika.URLParameters(getattr(self, f"{role}_url")))


def config(root: Path) -> Path:
    path = root / "warren.conf"
    path.write_text(f"consumer_timeout = {CONSUMER_TIMEOUT_MS}\nraft.tick_ms = 50\n")
    return path


@pytest.fixture(scope="package", params=["one", "three"])
def broker(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"qq-{request.param}")
    if request.param == "one":
        node = start_node(root / "n1", "--config", str(config(root)))
        yield Broker("one", [node])
        node.stop()
    else:
        cluster = Cluster(root, 3, "--config", str(config(root))).start()
        yield Broker("three", [cluster.nodes[n] for n in cluster.names])
        cluster.stop()


@pytest.fixture
def name(request) -> str:
    """A queue name of this test's own."""
    return f"{request.node.originalname}-{next(_names)}"


@pytest.fixture
def conns(broker):
    """(declaring, publishing, consuming) connections; on one node all three to it. On three, the
    declaring one knows the others (`peers`): `declare` waits until their nodes see the queue."""
    opened = [broker.connect(role) for role in ("declare", "publish", "consume")]
    if broker.kind == "three":
        opened[0].peers = opened[1:]
    yield opened
    for c in opened:
        if c.is_open:
            c.close()


def declare(ch: Any, name: str, **arguments: Any) -> None:
    """A quorum queue, declared through `ch`; seen by the nodes of its connection's `peers` too.
    A declare-ok says that the declaring node's copy of the metadata has the queue, not yet every
    node's (RabbitMQ 4's Khepri replies from the local member: "immediately consistent on the node
    that issues the reply ... eventually consistent everywhere else", rabbit_khepri.erl; 3.10's
    Mnesia committed on every node): a publish through another node at once may find no queue,
    and be confirmed as unroutable. A passive declare-ok through a connection says its connection
    host routes to the queue (the node answers after telling its hosts, on the same pipe)."""
    ch.queue_declare(name, durable=True, arguments={"x-queue-type": "quorum", **arguments})
    for peer in getattr(ch.connection, "peers", ()):
        until(lambda peer=peer: sees_queue(peer, name), f"queue {name} seen through another node")


