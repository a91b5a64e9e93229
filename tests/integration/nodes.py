"""Real nodes for tests: scripts/local_cluster.py starts them (tests, benchmarks and the fault suite share it)."""
from scripts.local_cluster import REPO, Node, start_node, wait_serving

__all__ = ["REPO", "Node", "start_node", "wait_serving"]
