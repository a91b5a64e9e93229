"""A rolling upgrade of the quorum queue machine (docs/UPGRADES.md), at its last step: a 3-node
cluster whose n1 and n2 already run machine version 2 (`quorum_queue.machine_version`, standing for
the new code) while n3 still runs version 1, its queues in use. No queue switches while n3 runs
version 1; once n3 restarts on version 2 every member switches at one committed index, nothing
published is lost or delivered twice, and the new version's rule is in force where the old one's
was before (with x-delivery-limit 0, a message whose consumer's channel closed is dropped by
version 1 and comes back under version 2). n3 rolled back to version 1 afterwards halts its
members and logs why, and the queue goes on with the others. Real nodes, real pika clients; the
earlier steps (n1, n2 restarted one at a time) are the same restart, and tests/sim/upgrade.py
runs the whole sequence under faults."""
from __future__ import annotations

from pathlib import Path

import pika
import pytest

from scripts.local_cluster import wait_serving
from tests.integration.cluster import Cluster
from tests.waiting import until

pytestmark = pytest.mark.integration

QUORUM = {"x-queue-type": "quorum"}
PERSISTENT = pika.BasicProperties(delivery_mode=2)
NODES = ("n1", "n2", "n3")


def config(root: Path, version: int) -> tuple[str, ...]:
    path = root / f"v{version}.conf"
    path.write_text(f"raft.tick_ms = 50\nquorum_queue.machine_version = {version}\n")
    return ("--config", str(path))


def member(cluster: Cluster, node: str, queue: str = "orders") -> dict:
    (status,) = cluster.control(node, "quorum", "status", {"queue": queue}).values()
    return status


def publish(cluster: Cluster, node: str, bodies: range, queue: str = "orders") -> None:
    conn = pika.BlockingConnection(pika.URLParameters(cluster.url(node)))
    ch = conn.channel()
    ch.confirm_delivery()
    for i in bodies:
        ch.basic_publish("", queue, b"%d" % i, PERSISTENT)
    conn.close()


def get_and_close(cluster: Cluster, node: str, queue: str) -> bytes:
    """basic.get without an ack, then the channel closes: the delivery comes back (or not)."""
    conn = pika.BlockingConnection(pika.URLParameters(cluster.url(node)))
    ch = conn.channel()
    method, _props, body = ch.basic_get(queue)
    assert method is not None
    conn.close()
    return body


def take(cluster: Cluster, node: str, n: int) -> list[int]:
    """basic.get and ack `n` messages."""
    conn = pika.BlockingConnection(pika.URLParameters(cluster.url(node)))
    ch = conn.channel()
    got = []
    while len(got) < n:
        method, _props, body = ch.basic_get("orders")
        assert method is not None, f"the queue ran dry after {len(got)} of {n}"
        got.append(int(body))
        ch.basic_ack(method.delivery_tag)
    conn.close()
    return got


def caught_up(cluster: Cluster, queue: str = "orders") -> bool:
    """Every member applied what the leader committed (False while there is no one leader)."""
    statuses = [member(cluster, n, queue) for n in NODES]
    leads = [st for st in statuses if st["role"] == "leader"]
    return len(leads) == 1 and all(st["applied"] >= leads[0]["commit"] for st in statuses)


def versions(cluster: Cluster) -> list[tuple[int, list[int]]]:
    """(machine version, the log's switch indexes) of every member of both queues."""
    return [(st["machine_version"], st["machine_versions"])
            for q in ("orders", "poison") for st in (member(cluster, n, q) for n in NODES)]


def test_the_last_node_upgraded_switches_every_member_at_one_index(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path / "c", 3, *config(tmp_path, 2))
    try:
        cluster.start_node("n1")
        cluster.start_node("n2", join="n1", wait=False)
        cluster.extra = config(tmp_path, 1)  # n3 is not upgraded yet
        cluster.start_node("n3", join="n1", wait=False)
        for name in ("n2", "n3"):
            wait_serving(cluster.nodes[name])
        conn = pika.BlockingConnection(pika.URLParameters(cluster.url("n1")))
        conn.channel().queue_declare("orders", durable=True, arguments=QUORUM)
        conn.channel().queue_declare("poison", durable=True, arguments={**QUORUM, "x-delivery-limit": 0})
        conn.close()
        publish(cluster, "n1", range(1), "poison")
        assert get_and_close(cluster, "n2", "poison") == b"0"
        until(lambda: all(member(cluster, n, "poison")["messages"] == 0 for n in NODES),
              "version 1 dropped the message at the limit")
        publish(cluster, "n1", range(0, 100))
        taken = take(cluster, "n2", 30)
        until(lambda: caught_up(cluster) and caught_up(cluster, "poison"), "every member caught up")
        assert versions(cluster) == [(1, [])] * 6  # n3 runs version 1: nothing switches

        cluster.nodes["n3"].stop()
        publish(cluster, "n1", range(100, 130))  # in use while n3 is down
        taken += take(cluster, "n2", 10)
        cluster.extra = config(tmp_path, 2)
        cluster.restart("n3")
        publish(cluster, "n3", range(130, 150))
        sent = 150
        until(lambda: [v for v, _ in versions(cluster)] == [2] * 6, "every member of both queues runs version 2")
        switches = {n: member(cluster, n)["machine_versions"] for n in NODES}
        assert len(set(map(tuple, switches.values()))) == 1 and len(switches["n1"]) == 1, switches
        rows = cluster.control("n2", "node", "quorum_status", {"vhost": "/", "name": "orders"})["rows"]
        assert [r["Machine Version"] for r in rows] == [2, 2, 2]  # warrenctl quorum_status's column

        publish(cluster, "n1", range(1, 2), "poison")
        assert get_and_close(cluster, "n2", "poison") == b"1"
        conn = pika.BlockingConnection(pika.URLParameters(cluster.url("n3")))
        ch = conn.channel()
        method, props, body = until(lambda: (r := ch.basic_get("poison"))[0] and r, "version 2 gave it back")
        assert (body, method.redelivered, props.headers.get("x-delivery-count")) == (b"1", True, 1)
        ch.basic_ack(method.delivery_tag)
        conn.close()

        # n3 rolled back: its members refuse the log's version, the others go on
        cluster.nodes["n3"].stop()
        cluster.extra = config(tmp_path, 1)
        cluster.restart("n3")
        at = switches["n3"][0]
        until(lambda: member(cluster, "n3")["halted"] == at, "n3's member halted at the switch")
        assert "quorum.machine_halted" in cluster.nodes["n3"].log()
        publish(cluster, "n1", range(sent, sent + 20))
        sent += 20
        taken += take(cluster, "n2", sent - len(taken))
        assert sorted(taken) == list(range(sent))  # nothing lost, nothing twice
    finally:
        cluster.stop()
