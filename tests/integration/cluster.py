"""Real clusters for tests: scripts/local_cluster.py starts them."""
from scripts.local_cluster import Cluster

__all__ = ["Cluster"]
