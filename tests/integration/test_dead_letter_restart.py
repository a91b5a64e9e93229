"""Dead-lettering from a quorum queue into a quorum queue across a node restart (what Celery's
native delayed delivery does with every countdown task): every message dead-lettered after the
restart arrives, and none dead-lettered before it arrives again. The restarted member applies
its log again; the dead-letter copies of those entries were published before the stop, so they
are not published again (QuorumMachine.replayed_effects; before that, every countdown task a
Celery worker had run came back after its broker restarted, and ran again). The restarted
node's dead-letter worker is a new publisher to the target (actors/quorum/dead_letter_shell.py):
under its old name, its first copies would be taken for duplicates of those its previous
incarnation sent, confirmed, settled and lost."""
from __future__ import annotations

import pika
import pytest

from scripts.local_cluster import start_node
from tests.waiting import until

pytestmark = pytest.mark.integration

QQ = {"x-queue-type": "quorum"}


def _setup(url: str, strategy: str) -> None:
    with pika.BlockingConnection(pika.URLParameters(url)) as conn:
        ch = conn.channel()
        ch.exchange_declare("dlr.dlx", "fanout", durable=True)
        ch.queue_declare("dlr.src", durable=True, arguments={**QQ, "x-message-ttl": 100, "x-overflow": "reject-publish",
                                                             "x-dead-letter-exchange": "dlr.dlx",
                                                             "x-dead-letter-strategy": strategy})
        ch.queue_declare("dlr.dst", durable=True, arguments=QQ)
        ch.queue_bind("dlr.dst", "dlr.dlx")


def _publish_and_count(url: str, body: bytes) -> int:
    """Publish (confirmed) to the expiring source; the target's count once the copy is in."""
    with pika.BlockingConnection(pika.URLParameters(url)) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        before = ch.queue_declare("dlr.dst", passive=True).method.message_count
        ch.basic_publish("", "dlr.src", body, pika.BasicProperties(delivery_mode=2))
        until(lambda: ch.queue_declare("dlr.dst", passive=True).method.message_count > before, "the copy", timeout_s=15)
        return ch.queue_declare("dlr.dst", passive=True).method.message_count


@pytest.mark.parametrize("strategy", ["at-least-once", "at-most-once"])
def test_what_was_dead_lettered_before_a_restart_comes_once_and_what_after_arrives(tmp_path, strategy):
    node = start_node(tmp_path / "node")
    try:
        _setup(node.url, strategy)
        for i in (1, 2, 3):
            assert _publish_and_count(node.url, b"before-%d" % i) == i
        node.stop()
        node = start_node(node.data_dir, port=node.port, cluster_port=node.cluster_port)
        # each copy comes after anything the restarted member published while applying its log again
        assert _publish_and_count(node.url, b"after-1") == 4
        assert _publish_and_count(node.url, b"after-2") == 5
        with pika.BlockingConnection(pika.URLParameters(node.url)) as conn:
            ch = conn.channel()
            bodies = []
            while (got := ch.basic_get("dlr.dst", auto_ack=True))[0] is not None:
                bodies.append(got[2])
        assert bodies == [b"before-1", b"before-2", b"before-3", b"after-1", b"after-2"]
    finally:
        node.stop()
