"""TTL and x-max-length-bytes of durable classic queues survive a node restart (clean stop and
kill -9), as in RabbitMQ (checked against the 3.10 oracle with the same `before` / `after`):

- persistent messages with x-message-ttl or their own `expiration` that expire while the node is
  down (or soon after) are gone after the restart, dead-lettered with reason `expired`; one whose
  own expiration is far off is still there;
- a queue at its x-max-length-bytes with reject-publish nacks the next publish right after the
  restart (the recovered messages' bodies count), and takes one that fits again once a message
  was consumed.
"""
from __future__ import annotations

import pika
import pytest

from tests.integration.test_durability import kill_node
from tests.integration.nodes import start_node
from tests.waiting import until

pytestmark = pytest.mark.integration  # starts real node processes

TTL_MS = 1500
PERSISTENT = pika.BasicProperties(delivery_mode=2)
TTL_Q, OWN_Q, DEAD_Q, BYTES_Q = "limits.ttl", "limits.own", "limits.dead", "limits.bytes"
PRIO_TTL_Q = "limits.prio_ttl"  # a priority queue keeps one index per level: each keeps its expiries
DLX_ARGS = {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": DEAD_Q}
TTL_ARGS = {"x-message-ttl": TTL_MS, **DLX_ARGS}
BYTES_ARGS = {"x-max-length-bytes": 30, "x-overflow": "reject-publish"}


def declare(ch) -> None:
    ch.queue_declare(DEAD_Q, durable=True)
    ch.queue_declare(TTL_Q, durable=True, arguments=TTL_ARGS)
    ch.queue_declare(OWN_Q, durable=True, arguments=DLX_ARGS)
    ch.queue_declare(BYTES_Q, durable=True, arguments=BYTES_ARGS)
    ch.queue_declare(PRIO_TTL_Q, durable=True, arguments={"x-max-priority": 5, **TTL_ARGS})


def publish(ch, queue: str, body: bytes, properties=PERSISTENT) -> bool:
    """Publish with confirms; False when the broker nacked it."""
    try:
        ch.basic_publish("", queue, body, properties)
        return True
    except pika.exceptions.NackError:
        return False


def before(url: str) -> None:
    with pika.BlockingConnection(pika.URLParameters(url)) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        declare(ch)
        for i in range(3):
            assert publish(ch, TTL_Q, b"ttl%d" % i)
        # an expiration far off: the lower TTL (the queue's) wins
        assert publish(ch, TTL_Q, b"ttl-far", expiring("600000"))
        # near first: a per-message expiry is only acted on at the head
        assert publish(ch, OWN_Q, b"own-near", expiring(str(TTL_MS)))
        assert publish(ch, OWN_Q, b"own-far", expiring("600000"))
        for i in range(3):
            assert publish(ch, BYTES_Q, b"%d" % i * 10)  # 3 x 10 bytes: at the limit
        assert not publish(ch, BYTES_Q, b"x")
        for p in (0, 3, 5):
            assert publish(ch, PRIO_TTL_Q, b"prio%d" % p, pika.BasicProperties(delivery_mode=2, priority=p))


def expiring(ms: str) -> pika.BasicProperties:
    return pika.BasicProperties(delivery_mode=2, expiration=ms)


def message_count(url: str, queue: str) -> int:
    with pika.BlockingConnection(pika.URLParameters(url)) as conn:
        return conn.channel().queue_declare(queue, passive=True).method.message_count


def after(url: str) -> None:
    with pika.BlockingConnection(pika.URLParameters(url)) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        declare(ch)  # redeclare with the same arguments, as clients do
        assert not publish(ch, BYTES_Q, b"y")  # the recovered 30 bytes count
        assert ch.queue_declare(BYTES_Q, passive=True).method.message_count == 3
        assert ch.basic_get(BYTES_Q, auto_ack=True)[2] == b"0" * 10
        assert publish(ch, BYTES_Q, b"z" * 10)
        assert not publish(ch, BYTES_Q, b"w")
    until(lambda: message_count(url, TTL_Q) == 0, "the TTL'd messages to expire")
    until(lambda: message_count(url, PRIO_TTL_Q) == 0, "the priority queue's TTL'd messages to expire")
    until(lambda: message_count(url, OWN_Q) == 1, "the message with a near expiration to expire")
    until(lambda: message_count(url, DEAD_Q) == 8, "the expired messages to be dead-lettered")
    with pika.BlockingConnection(pika.URLParameters(url)) as conn:
        ch = conn.channel()
        dead = []
        while (got := ch.basic_get(DEAD_Q, auto_ack=True))[0] is not None:
            dead.append((got[2], got[1].headers["x-death"][0]["reason"]))
        assert sorted(dead) == sorted([(b"ttl%d" % i, "expired") for i in range(3)]
                                      + [(b"ttl-far", "expired"), (b"own-near", "expired")]
                                      + [(b"prio%d" % p, "expired") for p in (0, 3, 5)])
        assert ch.basic_get(OWN_Q, auto_ack=True)[2] == b"own-far"


@pytest.mark.parametrize("how", ["clean", "kill-9"])
def test_ttl_and_max_length_bytes_survive_a_restart(tmp_path, how):
    node = start_node(tmp_path / "n")
    try:
        before(node.url)
        if how == "clean":
            node.stop()
        else:
            kill_node(node)
        node = start_node(node.data_dir, port=node.port)
        after(node.url)
    finally:
        node.stop()
