"""Real clusters for tests: scripts/local_cluster.py starts them."""
import pika
import pytest

from scripts.local_cluster import Cluster

__all__ = ["Cluster", "module_cluster", "sees_queue"]


def module_cluster(name: str, size: int):
    """A fixture: a cluster of `size` nodes of the test module's own, started and stopped with it."""
    @pytest.fixture(scope="module")
    def cluster(tmp_path_factory):
        c = Cluster(tmp_path_factory.mktemp(name), size).start()
        yield c
        c.stop()
    return cluster


def sees_queue(conn: pika.BlockingConnection, name: str) -> bool:
    """Whether `conn`'s node has the queue yet: a declare-ok says the declaring node's copy of the
    metadata has it, the other nodes' a moment later (RabbitMQ 4's Khepri rule; README,
    "Clustering"). A passive declare-ok also says the connection's host routes to it."""
    ch = conn.channel()  # a 404 closes it
    try:
        ch.queue_declare(name, passive=True)
    except pika.exceptions.ChannelClosedByBroker as e:
        if e.reply_code != 404:
            raise
        return False
    ch.close()
    return True
