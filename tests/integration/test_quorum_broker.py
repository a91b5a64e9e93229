"""Quorum queues through the broker (issue 12): declared with x-queue-type=quorum over AMQP, their
members started on the member nodes' quorum hosts, publishing and consuming through any node, and
confirmed messages surviving kill -9 of the leader's node. Real nodes, real pika clients."""
from __future__ import annotations

import threading

import pika
import pika.exceptions
import psutil
import pytest

from tests.integration.cluster import Cluster
from tests.waiting import until

pytestmark = pytest.mark.integration

QUORUM = {"x-queue-type": "quorum"}
PERSISTENT = pika.BasicProperties(delivery_mode=2)


def connect(cluster: Cluster, name: str):
    conn = pika.BlockingConnection(pika.URLParameters(cluster.url(name)))
    return conn, conn.channel()


def members(cluster: Cluster, node: str, queue: str) -> dict:
    """The member of `queue` on `node`'s quorum host, as its status op reports it (uid -> status)."""
    return cluster.control(node, "quorum", "status", {"queue": queue})


def drain(conn, ch, queue: str, expected: int, timeout_s: float = 60) -> list[bytes]:
    got: list[bytes] = []

    def on_message(c, method, _props, body) -> None:
        got.append(body)
        c.basic_ack(method.delivery_tag)
    ch.basic_qos(prefetch_count=100)
    tag = ch.basic_consume(queue, on_message)
    until(lambda: conn.process_data_events(0.05) or len(got) >= expected, f"{expected} messages",
          timeout_s=timeout_s)
    ch.basic_cancel(tag)
    return got


@pytest.fixture(scope="module")
def one(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("one"), 1).start()
    yield c
    c.stop()


def test_a_quorum_queue_on_one_node_confirms_counts_redelivers_and_is_deleted(one: Cluster) -> None:
    conn, ch = connect(one, "n1")
    ok = ch.queue_declare("q1", durable=True, arguments=QUORUM).method
    assert (ok.message_count, ok.consumer_count) == (0, 0)
    assert [s["role"] for s in members(one, "n1", "q1").values()] == ["leader"]
    ch.confirm_delivery()
    for i in range(100):
        ch.basic_publish("", "q1", b"m%d" % i, PERSISTENT)
    assert ch.queue_declare("q1", passive=True).method.message_count == 100
    method, props, body = ch.basic_get("q1")
    assert (body, method.redelivered, props.headers) == (b"m0", False, None)
    ch.basic_nack(method.delivery_tag, requeue=True)
    method, props, body = ch.basic_get("q1")
    assert (body, method.redelivered, props.headers) == (b"m0", True, {"x-delivery-count": 1})
    ch.basic_ack(method.delivery_tag)
    assert drain(conn, ch, "q1", 99) == [b"m%d" % i for i in range(1, 100)]
    assert ch.queue_delete("q1").method.message_count == 0
    assert members(one, "n1", "q1") == {}
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        ch.queue_declare("q1", passive=True)
    assert e.value.reply_code == 404
    conn.close()


def test_what_a_killed_connection_host_held_comes_back_redelivered(one: Cluster) -> None:
    """kill -9 of the connection hosts: the quorum queue gives back the deliveries their channels
    held unacked (the node tells every quorum host which channel incarnations are gone). Both
    killed together: Thespian reported one exit and not the other, which stayed dead with the
    consumer's channel (actors/runtime/supervisor.py)."""
    conn, ch = connect(one, "n1")
    ch.queue_declare("held", durable=True, arguments=QUORUM)
    ch.confirm_delivery()
    for i in range(10):
        ch.basic_publish("", "held", b"%d" % i, PERSISTENT)
    ch.basic_qos(prefetch_count=10)
    got: list[bytes] = []
    ch.basic_consume("held", lambda _c, _m, _p, body: got.append(body))
    until(lambda: conn.process_data_events(0.05) or len(got) == 10, "10 deliveries held unacked")
    pids = {host: one.control("n1", host, "pid", {}) for host in ("conn0", "conn1")}
    for pid in pids.values():
        psutil.Process(pid).kill()
    until(lambda: not any(psutil.pid_exists(pid) for pid in pids.values()), "both connection hosts dead")
    conn2, ch2 = until(lambda: _connected(one), "a connection host restarted by the supervisor", timeout_s=60)
    redelivered: list[tuple[bytes, bool]] = []

    def on_message(c, method, _props, body) -> None:
        redelivered.append((body, method.redelivered))
        c.basic_ack(method.delivery_tag)
    ch2.basic_consume("held", on_message)
    until(lambda: conn2.process_data_events(0.05) or len(redelivered) == 10, "the 10 given back", timeout_s=60)
    assert sorted(redelivered) == sorted((b"%d" % i, True) for i in range(10))
    ch2.queue_delete("held")
    conn2.close()


def _connected(cluster: Cluster):
    try:
        return connect(cluster, "n1")
    except pika.exceptions.AMQPConnectionError:  # no connection host listens yet
        return None


@pytest.mark.parametrize("durable, exclusive, auto_delete, prop", [
    (False, False, False, "non-durable"), (True, True, False, "exclusive-owner"),
    (True, False, True, "auto-delete")])
def test_a_quorum_queue_refuses_what_rabbitmq_refuses(one: Cluster, durable: bool, exclusive: bool,
                                                      auto_delete: bool, prop: str) -> None:
    conn, ch = connect(one, "n1")
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        ch.queue_declare("bad", durable=durable, exclusive=exclusive, auto_delete=auto_delete, arguments=QUORUM)
    assert (e.value.reply_code, e.value.reply_text) == (
        406, f"PRECONDITION_FAILED - invalid property '{prop}' for queue 'bad' in vhost '/'")
    ch = conn.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        ch.queue_declare("", durable=True, arguments=QUORUM)
    assert e.value.reply_text == ("PRECONDITION_FAILED - Cannot declare a server-named queue for type "
                                  "rabbit_quorum_queue")
    conn.close()


def test_confirmed_messages_survive_kill_9_of_the_leaders_node(tmp_path) -> None:
    """Declared through n1 (client-local: n1 leads), published to through n2 with confirms, consumed
    through n3; n1 is killed mid-stream: publishing goes on, nothing confirmed is lost, and n1
    catches up when it is back. The members' clock is 50 ms (raft.tick_ms, 250 by default) so that
    the new leader is elected within a second of the kill rather than two to four."""
    conf = tmp_path / "warren.conf"
    conf.write_text("raft.tick_ms = 50\n")
    cluster = Cluster(tmp_path / "c", 3, "--config", str(conf)).start()
    try:
        conn, ch = connect(cluster, "n1")
        ch.queue_declare("orders", durable=True, arguments=QUORUM)
        conn.close()
        statuses = {n: members(cluster, n, "orders") for n in ("n1", "n2", "n3")}
        assert [len(s) for s in statuses.values()] == [1, 1, 1]
        assert next(iter(statuses["n1"].values()))["role"] == "leader"

        confirmed: list[int] = []
        stop = threading.Event()

        def publish() -> None:
            pconn, pch = connect(cluster, "n2")
            pch.confirm_delivery()
            i = 0
            while not stop.is_set():
                pch.basic_publish("", "orders", b"%d" % i, PERSISTENT)
                confirmed.append(i)
                i += 1
            pconn.close()
        publisher = threading.Thread(target=publish)
        publisher.start()
        try:
            until(lambda: len(confirmed) >= 200, "200 confirms before the kill")
            cluster.kill("n1")
            at_kill = len(confirmed)
            until(lambda: len(confirmed) >= at_kill + 200, "200 confirms after the leader's node died",
                  timeout_s=60)
        finally:
            stop.set()
            publisher.join(60)
        conn, ch = connect(cluster, "n3")
        got = drain(conn, ch, "orders", len(confirmed))
        assert {int(b) for b in got} >= set(confirmed)  # lost = 0 (duplicates are allowed)
        conn.close()

        cluster.restart("n1")
        def caught_up() -> bool:
            top = max(s["applied"] for n in ("n2", "n3") for s in members(cluster, n, "orders").values())
            return all(s["applied"] >= top for s in members(cluster, "n1", "orders").values())
        until(caught_up, "n1's member caught up")
    finally:
        cluster.stop()
