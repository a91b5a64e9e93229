"""Real clusters for tests: scripts/local_cluster.py starts them."""
import pytest

from scripts.local_cluster import Cluster

__all__ = ["Cluster", "module_cluster"]


def module_cluster(name: str, size: int):
    """A fixture: a cluster of `size` nodes of the test module's own, started and stopped with it."""
    @pytest.fixture(scope="module")
    def cluster(tmp_path_factory):
        c = Cluster(tmp_path_factory.mktemp(name), size).start()
        yield c
        c.stop()
    return cluster
