"""The management API of a two-node cluster (issue 16, 4): either node answers for both. Queues,
connections and channels on the other node are listed with that node's name, /api/nodes lists
every node with its own facts, and a node that went down is shown stopped."""
from __future__ import annotations

import pika
import pytest

from scripts.local_cluster import HOST
from tests.mgmt.support import start_mgmt_node
from tests.waiting import until

pytestmark = pytest.mark.integration
DOWN_AFTER_MS = 1500  # cluster.node_down_after: how long n2 stays silent before n1 shows it stopped


@pytest.fixture
def two(tmp_path):
    conf = (f"cluster.node_down_after = {DOWN_AFTER_MS}",)
    n1 = start_mgmt_node(tmp_path / "n1", conf_lines=conf)
    n2 = None
    try:
        n2 = start_mgmt_node(tmp_path / "n2", conf_lines=conf, extra=("--join", f"127.0.0.1:{n1.node.cluster_port}"))
        yield n1, n2
    finally:
        for m in (n2, n1):
            if m is not None:
                m.node.stop()


def by_name(rows: list[dict]) -> dict[str, dict]:
    return {row["name"]: row for row in rows}


def sampled(nodes: list[dict]) -> list[dict] | None:
    """The nodes, once each one's facts are in (its node host answered a sample)."""
    return nodes if all(n.get("os_pid") for n in nodes) else None


def test_either_node_answers_for_the_whole_cluster(two):
    n1, n2 = two
    name1, name2 = f"n1@{HOST}", f"n2@{HOST}"
    on_n1 = pika.BlockingConnection(pika.URLParameters(n1.node.url))
    on_n2 = pika.BlockingConnection(pika.URLParameters(n2.node.url))
    try:
        on_n1.channel().queue_declare("mc.on_n1")
        ch2 = on_n2.channel()
        ch2.queue_declare("mc.on_n2")  # client-local: homed on n2
        for api in (n1, n2):
            queues = until(lambda: (q := by_name(api.get("/api/queues"))).keys() >= {"mc.on_n1", "mc.on_n2"} and q,
                           "both queues listed")
            assert (queues["mc.on_n1"]["node"], queues["mc.on_n2"]["node"]) == (name1, name2)
            connections = until(lambda: len(c := api.get("/api/connections")) == 2 and c, "both connections")
            assert sorted(c["node"] for c in connections) == [name1, name2]
            channels = until(lambda: len(c := api.get("/api/channels")) == 2 and c, "both channels")
            assert sorted(c["node"] for c in channels) == [name1, name2]
            nodes = until(lambda: sampled(api.get("/api/nodes")), "both nodes' facts sampled")
            assert [(n["name"], n["running"]) for n in nodes] == [(name1, True), (name2, True)]
            assert nodes[0]["os_pid"] != nodes[1]["os_pid"] and all(n["mem_limit"] > 0 for n in nodes)
            assert {n["name"]: n["sockets_used"] for n in nodes} == {name1: 1, name2: 1}
            assert api.get(f"/api/nodes/{name2}")["name"] == name2
            assert api.get("/api/vhosts/%2F")["cluster_state"] == {name1: "running", name2: "running"}
    finally:
        on_n1.close()
        on_n2.close()
    n2.node.kill()
    nodes = until(lambda: not (ns := n1.get("/api/nodes"))[1]["running"] and ns, "n2 shown stopped", timeout_s=30)
    assert nodes == [nodes[0], {"name": name2, "type": "disc", "running": False}] and nodes[0]["running"]
    assert n1.get("/api/vhosts/%2F")["cluster_state"] == {name1: "running", name2: "stopped"}
