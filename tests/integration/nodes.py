"""Real nodes for tests: scripts/local_cluster.py starts them (tests, benchmarks and the fault suite share it)."""
from pathlib import Path

import pytest

from actors.placement import queue_kind
from actors.runtime.client import control
from scripts.local_cluster import REPO, Node, start_node, wait_serving

__all__ = ["REPO", "Node", "module_node", "queue_host", "serving_processes", "start_node", "start_node_with_queue_host",
           "wait_serving"]
poll_ask_s = 2.0  # a control ask made while the node's control plane restarts may go unanswered


def module_node(name: str):
    """A fixture: a node of the test module's own, with the default configuration (for tests that
    count the node's connections, restart its hosts, raise its alarms or read its health: what
    the session's shared node cannot promise to others)."""
    @pytest.fixture(scope="module")
    def node(tmp_path_factory):
        n = start_node(tmp_path_factory.mktemp(name) / "data")
        yield n
        n.stop()
    return node


def queue_host(node: Node, name: str, vhost: str = "/") -> str:
    """The kind of the node's host that holds classic queue `name` ("conn1", or "queue0" on a node
    with queue hosts), as the node places it (actors/placement.py)."""
    kinds = control(int((node.data_dir / "admin_port").read_text()), "node", "status", {})["queue_hosts"]
    return queue_kind(vhost, name, kinds)


def serving_processes(node: Node) -> dict[str, dict] | None:
    """`warrenctl status`'s processes by name (pid, restarts ...) while the node serves; None while
    it does not, or cannot say (its control plane restarting)."""
    try:
        port = int((node.data_dir / "admin_port").read_text())
        if not control(port, "$supervisor", "state", {}, poll_ask_s).get("serving"):
            return None
        return {p["name"]: p for p in control(port, "$supervisor", "node_status", {}, poll_ask_s)["processes"]}
    except (OSError, ValueError, ConnectionError, RuntimeError, TimeoutError):
        return None


def start_node_with_queue_host(data_dir: Path) -> Node:
    """A node whose classic queues run in a queue host of their own ("queue0"), as `queue_hosts = 1`
    configures: for the tests of what crosses between a connection host and a queue host."""
    conf = data_dir.with_name(data_dir.name + ".conf")
    conf.write_text("queue_hosts = 1\n")
    return start_node(data_dir, "--config", str(conf))
