"""Three real nodes on this machine as one broker: forming, topology from any node, messages across
nodes, and what the cluster sees of itself (issue 11). Faults are in test_cluster_faults.py."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pika
import pika.exceptions
import psutil
import pytest

from tests.integration.cluster import Cluster, module_cluster
from tests.waiting import until

pytestmark = pytest.mark.integration


cluster = module_cluster("cluster", 3)


def channel(cluster: Cluster, name: str):
    conn = pika.BlockingConnection(pika.URLParameters(cluster.url(name)))
    return conn, conn.channel()


def test_the_nodes_see_one_cluster_with_one_metadata_leader(cluster: Cluster) -> None:
    names = [cluster.node_name(n) for n in cluster.names]
    statuses = [until(lambda n=n: (st := cluster.cluster_status(n))["running"] == names and st, f"{n} sees all")
                for n in cluster.names]
    assert all(st["members"] == names and st["metadata_voters"] == names for st in statuses)
    assert len({st["metadata_leader"] for st in statuses}) == 1
    out = subprocess.run([sys.executable, "-m", "scripts.warrenctl", "-n", str(cluster.nodes["n2"].data_dir),
                          "cluster_status", "--formatter", "json"], capture_output=True, text=True, check=True)
    doc = json.loads(out.stdout)
    assert doc["running_nodes"] == names and doc["disk_nodes"] == names and doc["metadata_leader"] in names


def test_topology_declared_on_one_node_routes_on_every_node(cluster: Cluster) -> None:
    c1, ch1 = channel(cluster, "n1")
    ch1.exchange_declare("orders", "topic", durable=True)
    ch1.queue_declare("eu-orders", durable=True)
    ch1.queue_bind("eu-orders", "orders", "eu.#")
    for publisher in ("n2", "n3"):
        c, ch = channel(cluster, publisher)
        ch.confirm_delivery()
        # a binding made on n1 reaches n2 and n3 within milliseconds (RabbitMQ 4's Khepri, likewise)
        until(lambda: _passive_declare(c, "eu-orders") == 200, f"the queue on {publisher}")
        for i in range(50):
            ch.basic_publish("orders", "eu.de", f"{publisher}-{i}".encode(), mandatory=True)
        c.close()
    c3, ch3 = channel(cluster, "n3")
    assert ch3.queue_declare("eu-orders", passive=True).method.message_count == 100
    got = []
    ch3.basic_qos(prefetch_count=10)
    for method, _, body in ch3.consume("eu-orders", inactivity_timeout=10):
        assert method is not None, f"only {len(got)} of 100 arrived"
        got.append(body)
        ch3.basic_ack(method.delivery_tag)
        if len(got) == 100:
            break
    ch3.cancel()
    assert sorted(got) == sorted(f"{p}-{i}".encode() for p in ("n2", "n3") for i in range(50))
    assert [b for b in got if b.startswith(b"n2")] == [f"n2-{i}".encode() for i in range(50)]  # FIFO per publisher
    ch1.queue_delete("eu-orders")
    ch1.exchange_delete("orders")
    c1.close(), c3.close()


def test_a_queue_on_another_node_gets_gets_and_purges_and_is_deleted_from_there(cluster: Cluster) -> None:
    c2, ch2 = channel(cluster, "n2")
    ch2.queue_declare("on-n2")
    c1, ch1 = channel(cluster, "n1")
    ch1.confirm_delivery()
    for i in range(3):
        ch1.basic_publish("", "on-n2", b"m%d" % i)
    method, _, body = ch1.basic_get("on-n2")
    assert body == b"m0" and method.message_count == 2
    ch1.basic_nack(method.delivery_tag, requeue=True)
    assert ch1.queue_purge("on-n2").method.message_count == 3
    assert ch1.queue_delete("on-n2").method.message_count == 0
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        ch2.queue_declare("on-n2", passive=True)
    assert e.value.reply_code == 404
    c1.close(), c2.close()


def test_dead_letters_and_alternate_exchanges_cross_nodes(cluster: Cluster) -> None:
    c3, ch3 = channel(cluster, "n3")
    ch3.queue_declare("dlq-n3")
    c1, ch1 = channel(cluster, "n1")
    ch1.exchange_declare("unrouted", "fanout")
    ch1.queue_bind("dlq-n3", "unrouted")
    ch1.exchange_declare("with-ae", "direct", arguments={"alternate-exchange": "unrouted"})
    ch1.queue_declare("short-n1", arguments={"x-message-ttl": 0, "x-dead-letter-exchange": "",
                                             "x-dead-letter-routing-key": "dlq-n3"})
    c2, ch2 = channel(cluster, "n2")
    ch2.confirm_delivery()
    until(lambda: _passive_declare(c2, "short-n1") == 200, "the queue on n2")
    ch2.basic_publish("", "short-n1", b"expired")
    ch2.basic_publish("with-ae", "nowhere", b"alternate")
    bodies = set()
    until(lambda: (r := ch3.basic_get("dlq-n3", auto_ack=True))[0] and bodies.add(r[2]) or len(bodies) == 2,
          "both messages in the dead-letter queue on n3")
    assert bodies == {b"expired", b"alternate"}
    for q in ("dlq-n3", "short-n1"):
        ch1.queue_delete(q)
    c1.close(), c2.close(), c3.close()


def test_mandatory_returns_and_confirms_through_another_nodes_queue(cluster: Cluster) -> None:
    c2, ch2 = channel(cluster, "n2")
    ch2.queue_declare("limited-n2", arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    c3, ch3 = channel(cluster, "n3")
    ch3.confirm_delivery()
    until(lambda: _passive_declare(c3, "limited-n2") == 200, "the queue on n3")
    ch3.basic_publish("", "limited-n2", b"first")
    with pytest.raises(pika.exceptions.NackError):
        ch3.basic_publish("", "limited-n2", b"refused")
    with pytest.raises(pika.exceptions.UnroutableError):
        ch3.basic_publish("", "no-such-queue", b"x", mandatory=True)
    ch2.queue_delete("limited-n2")
    c2.close(), c3.close()


def test_an_exclusive_queue_follows_its_connection(cluster: Cluster) -> None:
    c1, ch1 = channel(cluster, "n1")
    name = ch1.queue_declare("", exclusive=True).method.queue
    c2, _ = channel(cluster, "n2")
    until(lambda: _passive_declare(c2, name) == 405, "the exclusive queue seen on n2")
    c1.close()
    until(lambda: _passive_declare(c2, name) == 404, "the exclusive queue gone with its connection")
    c2.close()


def _passive_declare(conn, name: str) -> int:
    """200, or the code of the channel error a passive declare of `name` gets (on a new channel:
    a 404 closes the channel it came on, so a poll must not use the test's own)."""
    try:
        conn.channel().queue_declare(name, passive=True)
        return 200
    except pika.exceptions.ChannelClosedByBroker as e:
        return e.reply_code


def test_consumers_on_two_nodes_share_a_queue_on_the_third(cluster: Cluster) -> None:
    c3, ch3 = channel(cluster, "n3")
    ch3.queue_declare("shared-n3", durable=True)
    consumers = [channel(cluster, n) for n in ("n1", "n2")]
    received: dict[str, list[bytes]] = {"n1": [], "n2": []}
    for (conn, ch), name in zip(consumers, ("n1", "n2")):
        ch.basic_qos(prefetch_count=5)
        until(lambda conn=conn: _passive_declare(conn, "shared-n3") == 200, f"the queue on {name}")
        ch.basic_consume("shared-n3", lambda c, m, p, b, name=name: (received[name].append(b),
                                                                      c.basic_ack(m.delivery_tag)))
    ch3.confirm_delivery()
    for i in range(200):
        ch3.basic_publish("", "shared-n3", b"%d" % i, pika.BasicProperties(delivery_mode=2))
    def all_received() -> bool:
        for conn, _ in consumers:
            conn.process_data_events(0.05)
        return sum(map(len, received.values())) >= 200
    until(all_received, "the 200 messages", 30, every_s=0, raises=False)  # the assertion says what came
    assert sorted(int(b) for bs in received.values() for b in bs) == list(range(200))
    assert received["n1"] and received["n2"]  # round robin over both nodes' consumers
    ch3.queue_delete("shared-n3")
    for conn, _ in consumers:
        conn.close()
    c3.close()


def test_a_node_with_another_cookie_is_refused_and_logged(cluster: Cluster, tmp_path) -> None:
    cookie = tmp_path / "other.cookie"
    cookie.write_text("NOTTHECLUSTERSSECRET")
    cookie.chmod(0o600)
    conf = tmp_path / "warren.conf"
    conf.write_text(f"cluster.cookie_file = {cookie}\n")
    from tests.integration.nodes import start_node
    stranger = start_node(tmp_path / "stranger", "--config", str(conf), "--join",
                          f"127.0.0.1:{cluster.ports['n1'][1]}", wait=False)
    try:
        until(lambda: "cluster.peer_refused" in cluster.nodes["n1"].log(), "n1 logging the refused peer")
        until(lambda: "runtime.peer_handshake_failed" in stranger.log(), "the stranger logging its refusal")
        assert "stranger" not in json.dumps(cluster.cluster_status("n1"))
    finally:
        stranger.kill()


def test_prefetch_holds_across_nodes_and_a_remote_delete_cancels_the_consumer(cluster: Cluster) -> None:
    c2, ch2 = channel(cluster, "n2")
    ch2.queue_declare("prefetched-n2")
    ch2.confirm_delivery()
    for i in range(20):
        ch2.basic_publish("", "prefetched-n2", b"%d" % i)
    c1, ch1 = channel(cluster, "n1")
    ch1.basic_qos(prefetch_count=5)
    held: list[int] = []
    cancelled: list[str] = []
    tag = ch1.basic_consume("prefetched-n2", lambda c, m, p, b: held.append(m.delivery_tag))
    ch1.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.consumer_tag))
    until(lambda: c1.process_data_events(0.05) or len(held) >= 5, "the first five deliveries")
    c1.process_data_events(0.3)  # a sixth would be a prefetch violation; give it its chance to show
    assert len(held) == 5
    ch1.basic_ack(held[-1], multiple=True)
    until(lambda: c1.process_data_events(0.05) or len(held) >= 10, "five more after the acks")
    c3, ch3 = channel(cluster, "n3")
    ch3.queue_delete("prefetched-n2")  # deleted from a third node: the consumer on n1 hears basic.cancel
    until(lambda: c1.process_data_events(0.05) or cancelled == [tag], "basic.cancel on n1")
    c1.close(), c2.close(), c3.close()


def _listening_ports(cluster: Cluster, name: str) -> set[int]:
    ports = set()
    for proc in cluster.nodes[name].processes():
        try:
            ports |= {c.laddr.port for c in proc.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN}
        except psutil.Error:
            pass
    return ports


def _capture(ports: set[int], pcap) -> subprocess.Popen:
    """tcpdump on the loopback of every packet to or from `ports`, once it is listening."""
    bpf = "tcp and (" + " or ".join(f"port {p}" for p in sorted(ports)) + ")"
    proc = subprocess.Popen(["tcpdump", "-i", "lo", "-U", "-s", "0", "-w", str(pcap), bpf],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert "listening on" in proc.stderr.readline()
    return proc


@pytest.mark.skipif(shutil.which("tcpdump") is None or os.geteuid() != 0,
                    reason="needs tcpdump and root to capture the loopback (CI runs as root, .ci/run installs it)")
def test_nothing_of_a_message_is_readable_on_the_wire_between_nodes(cluster: Cluster, tmp_path) -> None:
    """Bodies published through n1 to a queue on n2 and consumed through n3: a capture of every
    port the nodes listen on but AMQP's (the links between nodes, CURVE) holds none of them,
    while the AMQP ports' capture, the control, shows every one."""
    amqp = {cluster.ports[n][0] for n in cluster.names}
    links = set().union(*(_listening_ports(cluster, n) for n in cluster.names)) - amqp
    assert {cluster.ports[n][1] for n in cluster.names} <= links  # the nodes' cluster ports among them
    marker = b"PLAINTEXT-MARKER-" + os.urandom(8).hex().encode()
    between, control = _capture(links, tmp_path / "links.pcap"), _capture(amqp, tmp_path / "amqp.pcap")
    try:
        c2, ch2 = channel(cluster, "n2")
        ch2.queue_declare("wire-n2")
        c1, ch1 = channel(cluster, "n1")
        ch1.confirm_delivery()
        until(lambda: _passive_declare(c1, "wire-n2") == 200, "the queue on n1")
        for i in range(100):
            ch1.basic_publish("", "wire-n2", marker + b"-%d" % i)
        c3, ch3 = channel(cluster, "n3")
        got = [ch3.basic_get("wire-n2", auto_ack=True)[2] for _ in range(100)]
        assert got == [marker + b"-%d" % i for i in range(100)]
        for conn in (c1, c2, c3):
            conn.close()
        # tcpdump writes what the kernel handed it, a little later: in through n1, out through n3
        until(lambda: (tmp_path / "amqp.pcap").read_bytes().count(marker) >= 200, "the control capture complete")
    finally:
        for proc in (between, control):
            proc.terminate()
            proc.wait(10)
    captured = (tmp_path / "links.pcap").read_bytes()
    assert len(captured) > 10_000  # the bodies did cross: n1 -> n2 -> n3, encrypted
    assert marker not in captured
