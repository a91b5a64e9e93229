"""After kill -9 of any one host process, the supervisor restarts it and every queue, old and new,
works: declare, publish, get and consume (issue 11 §6, found by killing the node host: hosts held
subscriptions to the dead node host and a new queue answered declare-ok but 404 on basic.get)."""
from __future__ import annotations

import pika
import psutil
import pytest

from tests.integration.nodes import module_node, start_node_with_queue_host
from tests.waiting import poll_ask_s, until

pytestmark = pytest.mark.integration


node = module_node("restarts")


def host_pid(node, host: str, timeout: float = 10) -> int:
    from actors.runtime.client import control
    port = int((node.data_dir / "admin_port").read_text())
    return control(port, host, "pid", {}, timeout)


def use(node, queue: str, *, durable: bool) -> None:
    """Declare `queue`, publish with confirms, get one, consume the rest: every path a queue has."""
    with pika.BlockingConnection(pika.URLParameters(node.url)) as conn:
        ch = conn.channel()
        ch.queue_declare(queue, durable=durable)
        ch.confirm_delivery()
        for i in range(3):
            ch.basic_publish("", queue, b"%d" % i, pika.BasicProperties(delivery_mode=2 if durable else 1))
        method, _, body = ch.basic_get(queue, auto_ack=True)
        assert body == b"0" and method.message_count == 2
        bodies = []
        for method, _, body in ch.consume(queue, auto_ack=True, inactivity_timeout=10):
            assert method is not None, f"{queue}: consumed only {bodies}"
            bodies.append(body)
            if len(bodies) == 2:
                break
        ch.cancel()
        assert bodies == [b"1", b"2"]


@pytest.mark.parametrize("host", ["node", "quorum", "conn0", "conn1"])  # the conn hosts hold the classic queues
def test_after_a_host_is_killed_every_queue_old_and_new_works(node, host: str) -> None:
    use(node, f"before-{host}", durable=True)
    pid = host_pid(node, host)
    psutil.Process(pid).kill()
    until(lambda: _restarted(node, host, pid), f"{host} restarted by the supervisor")
    until(lambda: _serving(node), "the node serving again")
    use(node, f"before-{host}", durable=True)
    use(node, f"after-{host}", durable=True)
    use(node, f"transient-after-{host}", durable=False)


def _restarted(node, host: str, old: int) -> bool:
    try:
        return host_pid(node, host, poll_ask_s) != old
    except Exception:
        return False


def _serving(node) -> bool:
    try:
        with pika.BlockingConnection(pika.URLParameters(node.url)) as conn:
            conn.channel().queue_declare("probe", passive=False)
        return True
    except pika.exceptions.AMQPError:
        return False


def test_a_redeclare_while_the_queues_host_restarts_waits_for_the_queue(tmp_path) -> None:
    """RabbitMQ retries a queue whose process is being restarted (rabbit_amqqueue:with): the
    declare is answered once the restarted host has the queue again, with its messages."""
    node = start_node_with_queue_host(tmp_path / "data")
    try:
        with pika.BlockingConnection(pika.URLParameters(node.url)) as conn:
            ch = conn.channel()
            ch.queue_declare("kept", durable=True)
            ch.confirm_delivery()
            for i in range(3):
                ch.basic_publish("", "kept", b"%d" % i, pika.BasicProperties(delivery_mode=2))
            pid = host_pid(node, "queue0")
            psutil.Process(pid).kill()
            assert ch.queue_declare("kept", durable=True).method.message_count == 3
    finally:
        node.stop()
