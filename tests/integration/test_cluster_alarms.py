"""Resource alarms across a cluster of two real nodes (issue 14, 3): an alarm on one node blocks the
publishers of every node and clears everywhere; a node that restarts learns the alarms in force
from the others; a node that goes down takes its alarms with it (actors/monitor/relay.py)."""
from __future__ import annotations

import pytest

from tests.integration.cluster import Cluster
from tests.integration.raw_client import RawClient
from tests.waiting import until
from wire import methods as m

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(tmp_path):
    conf = tmp_path / "warren.conf"
    conf.write_text("cluster.node_down_after = 2500\n")  # a killed node is seen down in 2.5 s, not 5
    c = Cluster(tmp_path / "cluster", 2, "--config", str(conf)).start()
    yield c
    c.stop()


def alarms(cluster: Cluster, name: str) -> list:
    return cluster.control(name, "node", "status")["alarms"]


def blocked_publisher(cluster: Cluster, name: str) -> RawClient:
    client = RawClient(cluster.nodes[name].port, capabilities={"connection.blocked": True})
    client.publish("nowhere", b"x")
    return client


def test_an_alarm_on_one_node_blocks_publishers_on_every_node(cluster: Cluster) -> None:
    n1 = cluster.node_name("n1")
    cluster.control("n1", "node", "set_vm_memory_high_watermark", {"relative": 0.0})
    until(lambda: alarms(cluster, "n2") == [[n1, "memory"]], "n2 to hold n1's alarm")
    client = blocked_publisher(cluster, "n2")
    assert client.expect(m.ConnectionBlocked).method.reason == "low on memory"
    assert f"memory resource limit alarm set on node {n1}." in cluster.nodes["n2"].log()

    client.close()
    cluster.nodes["n2"].stop()  # a node that starts again learns the alarms in force from the others
    cluster.restart("n2")
    until(lambda: alarms(cluster, "n2") == [[n1, "memory"]], "the restarted n2 to learn n1's alarm", 60)
    client = blocked_publisher(cluster, "n2")
    client.expect(m.ConnectionBlocked)

    cluster.control("n1", "node", "set_vm_memory_high_watermark", {"relative": 0.4})
    client.expect(m.ConnectionUnblocked)
    assert alarms(cluster, "n2") == []
    client.close()


def test_a_node_that_goes_down_takes_its_alarms_with_it(cluster: Cluster) -> None:
    n1 = cluster.node_name("n1")
    cluster.control("n1", "node", "set_disk_free_limit", {"absolute": 10 ** 18})
    until(lambda: alarms(cluster, "n2") == [[n1, "disk"]], "n2 to hold n1's alarm")
    client = blocked_publisher(cluster, "n2")
    assert client.expect(m.ConnectionBlocked).method.reason == "low on disk"
    cluster.kill("n1")
    client.expect(m.ConnectionUnblocked, deadline_s=30)  # once n2 sees n1 down
    assert alarms(cluster, "n2") == []
    assert f"disk resource limit alarm cleared for dead node {n1}" in cluster.nodes["n2"].log()
    client.close()
