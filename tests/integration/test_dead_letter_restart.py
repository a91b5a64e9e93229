"""At-least-once dead-lettering from a quorum queue into a quorum queue across a node restart
(what Celery's native delayed delivery does with every countdown task): every message
dead-lettered after the restart arrives. The restarted node's dead-letter worker is a new
publisher to the target (actors/quorum/dead_letter_shell.py): under its old name, its first
copies were taken for duplicates of those its previous incarnation sent, confirmed, settled and
lost - whenever the source did not hand the old copies out again first, which realigns the
sequence numbers (it does here, the copies settled before the stop come again: at-least-once
allows it, RabbitMQ would not resend them; test_celery's restart case is the one where the old
name lost a countdown task)."""
from __future__ import annotations

import pika
import pytest

from scripts.local_cluster import start_node
from tests.waiting import until

pytestmark = pytest.mark.integration

QQ = {"x-queue-type": "quorum"}


def _setup(url: str) -> None:
    with pika.BlockingConnection(pika.URLParameters(url)) as conn:
        ch = conn.channel()
        ch.exchange_declare("dlr.dlx", "fanout", durable=True)
        ch.queue_declare("dlr.src", durable=True, arguments={**QQ, "x-message-ttl": 100, "x-overflow": "reject-publish",
                                                             "x-dead-letter-exchange": "dlr.dlx",
                                                             "x-dead-letter-strategy": "at-least-once"})
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


def test_the_first_copies_after_a_restart_arrive(tmp_path):
    node = start_node(tmp_path / "node")
    try:
        _setup(node.url)
        for i in (1, 2, 3):
            assert _publish_and_count(node.url, b"before-%d" % i) == i
        node.stop()
        node = start_node(node.data_dir, port=node.port, cluster_port=node.cluster_port)
        for name in (b"after-1", b"after-2"):
            _publish_and_count(node.url, name)
        with pika.BlockingConnection(pika.URLParameters(node.url)) as conn:
            ch = conn.channel()
            bodies = []
            while (got := ch.basic_get("dlr.dst", auto_ack=True))[0] is not None:
                bodies.append(got[2])
        assert bodies[:3] == [b"before-1", b"before-2", b"before-3"]
        assert b"after-1" in bodies and b"after-2" in bodies, bodies  # copies again before them: at-least-once
    finally:
        node.stop()
