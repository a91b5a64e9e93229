"""`warrenctl flow` on a real node (issue 14, 5): each case of the seed's rule driven for real, and the
bottleneck it names. A publisher that floods a queue from a raw socket keeps the chain busy; what
holds it up is made so by the test: a slow consumer (not on the publish chain: no bottleneck), a
queue host that gets a tenth of the CPU (stopped and continued by signals) or none at all (stopped:
it does not answer), a disk whose every fdatasync takes 400 ms (injected into the queue host's
syscalls by strace). The list commands show the same states."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pika
import pytest

from actors.runtime.client import control
from scripts.local_cluster import HOST
from tests.integration.admin_support import warrenctl_process
from tests.integration.nodes import start_node_with_queue_host
from tests.integration.raw_client import RawClient
from tests.waiting import until

pytestmark = pytest.mark.integration
BODY = b"x" * 1024
SLOW_SYNC_US = 400_000  # far above the 50% of its time a queue must wait to be in flow
QUEUE_HOST = f"data@{HOST}:queue0"  # the node's queue host, as the cluster names it


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    # the queues in a queue host of their own: slowing it (a duty cycle of SIGSTOP, strace) slows
    # them and not the connections
    n = start_node_with_queue_host(tmp_path_factory.mktemp("flowview") / "data")
    yield n
    n.stop()


def admin(node) -> int:
    return int((node.data_dir / "admin_port").read_text())


def ok(node, *args: str) -> str:
    """warrenctl as its own process: run in this one it would share the interpreter with the
    flooding thread and thin the flood these tests depend on."""
    r = warrenctl_process(node, *args)
    assert r.returncode == 0, (args, r.stderr)
    return r.stdout


def flow(node) -> dict:
    return json.loads(ok(node, "flow", "--once", "--formatter", "json"))


def declare(node, queue: str, durable: bool = False) -> None:
    with pika.BlockingConnection(pika.URLParameters(node.url)) as c:
        c.channel().queue_declare(queue, durable=durable)


@pytest.fixture
def flood(node) -> Iterator:
    """Start a publisher flooding a queue; stopped (and its socket closed) after the test."""
    stop = threading.Event()
    clients: list[RawClient] = []

    def start(queue: str, persistent: bool = False) -> RawClient:
        client = RawClient(node.port)
        client.flood(client.publish_frames(queue, BODY, persistent=persistent) * 64, stop)
        clients.append(client)
        return client
    yield start
    stop.set()
    for client in clients:
        client.close()


def duty_cycle(pid: int, stop: threading.Event, on_s: float = 0.01, off_s: float = 0.09) -> threading.Thread:
    """Let `pid` run `on_s` of every `on_s + off_s` seconds: a host with a tenth of a CPU."""
    def run() -> None:
        while not stop.is_set():
            os.kill(pid, signal.SIGSTOP)
            stop.wait(off_s)
            os.kill(pid, signal.SIGCONT)
            stop.wait(on_s)
    thread = threading.Thread(target=run, name="duty-cycle", daemon=True)
    thread.start()
    return thread


@contextmanager
def slow_syncs(pid: int) -> Iterator[subprocess.Popen]:
    """Every fdatasync of process `pid` takes SLOW_SYNC_US longer (strace's fault injection)."""
    strace = subprocess.Popen(["strace", "-qq", "-f", "-p", str(pid), "-e", "trace=fdatasync",
                               "-e", f"inject=fdatasync:delay_enter={SLOW_SYNC_US}", "-o", "/dev/null"],
                              stderr=subprocess.PIPE, text=True)
    try:
        yield strace
    finally:
        if strace.poll() is None:
            strace.terminate()
            strace.wait()
        else:
            pytest.fail(f"strace could not attach: {strace.stderr.read()}")


def test_a_slow_consumer_is_not_a_bottleneck_of_publishing(node):
    """A consumer that takes one message at a time grows its queue; publishers are not slowed."""
    declare(node, "fv.slow_consumer")
    got = []
    consumer = pika.BlockingConnection(pika.URLParameters(node.url))
    ch = consumer.channel()
    ch.basic_qos(prefetch_count=1)
    ch.basic_consume("fv.slow_consumer", lambda c, d, p, b: got.append(d.delivery_tag))
    publisher = RawClient(node.port)
    try:
        for _ in range(50):  # 500 messages in bursts of 10: nothing near 400 in flight at once
            publisher.send(publisher.publish_frames("fv.slow_consumer", BODY) * 10)
            consumer.process_data_events(0.02)
        until(lambda: consumer.process_data_events(0) or got, "a first delivery")
        snap = flow(node)
        assert snap["line"] == "bottleneck: none", snap
        shown = {(link["kind"], link["state"]) for link in snap["links"] if link["kind"] in ("connection", "channel")}
        assert shown == {("connection", "running"), ("channel", "running")}
        ready = control(admin(node), "queue0", "list_queues", {})
        assert next(q for q in ready if q["name"] == "fv.slow_consumer")["messages"] >= 400  # it is slow
    finally:
        publisher.close()
        consumer.close()


def test_a_busy_queue_host_is_named_and_so_is_one_that_stopped_answering(node, flood):
    declare(node, "fv.busy")
    queue_pid = control(admin(node), "queue0", "pid", {})
    flood("fv.busy")
    stop = threading.Event()
    cycle = duty_cycle(queue_pid, stop)
    try:
        busy = f"bottleneck: queue {QUEUE_HOST}/q:/:fv.busy ("
        snap = until(lambda: (s := flow(node))["line"].startswith(busy) and s, "the busy queue named")
        assert "in flow, none of its queues in flow)" in snap["line"]
        shown = {link["kind"]: link["state"] for link in snap["links"] if link["kind"] in ("connection", "channel")}
        assert shown == {"connection": "flow", "channel": "flow"}
        assert "\tflow" in ok(node, "list_channels", "name", "state")
        stop.set()
        cycle.join()
        os.kill(queue_pid, signal.SIGSTOP)  # now it cannot even answer
        table = ok(node, "flow", "--once").splitlines()
        assert table[-2] == "silent hosts: queue0" and table[-1].startswith(busy), table
        assert any(line.split()[:4] == ["queue", f"{QUEUE_HOST}/q:/:fv.busy", "no", "answer"] for line in table), table
    finally:
        stop.set()
        os.kill(queue_pid, signal.SIGCONT)


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is needed to slow the disk's syncs down")
def test_a_slow_disk_is_named_as_the_store_its_queue_waits_on(node, flood):
    declare(node, "fv.disk", durable=True)
    with slow_syncs(control(admin(node), "queue0", "pid", {})) as strace:
        flood("fv.disk", persistent=True)
        snap = until(lambda: strace.poll() is None and (s := flow(node))["line"].startswith("bottleneck: store") and s,
                     "the store named", timeout_s=60)
        assert snap["line"] == (f"bottleneck: store {QUEUE_HOST}/msg_store (queue {QUEUE_HOST}/q:/:fv.disk in flow, "
                                "waiting on it)")
        queue = next(link for link in snap["links"] if link["name"] == f"{QUEUE_HOST}/q:/:fv.disk")
        assert queue["state"] == "flow" and queue["flow_share"] >= 0.5
        # list_queues is another process asking a moment later, and a host slowed by strace (every
        # syscall of it stops under ptrace) can dip under half its time waiting in between
        until(lambda: "fv.disk\tflow" in ok(node, "list_queues", "name", "state"), "list_queues showing flow",
              timeout_s=30)


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is needed to slow the disk's syncs down")
def test_a_slow_disk_under_a_quorum_queue_is_named_as_the_wal_its_leader_waits_on(node, flood):
    with pika.BlockingConnection(pika.URLParameters(node.url)) as c:
        c.channel().queue_declare("fv.quorum", durable=True, arguments={"x-queue-type": "quorum"})
    wal = f"data@{HOST}:quorum/wal"
    with slow_syncs(control(admin(node), "quorum", "pid", {})) as strace:
        flood("fv.quorum", persistent=True)
        snap = until(lambda: strace.poll() is None and (s := flow(node))["line"].startswith(f"bottleneck: wal {wal}")
                     and s, "the WAL named", timeout_s=60)
        leader = next(link for link in snap["links"] if link["kind"] == "queue" and "fv.quorum" in link["label"])
        assert leader["state"] == "flow" and leader["downstream"] == [wal], leader
        assert snap["line"] == f"bottleneck: wal {wal} (queue {leader['name']} in flow, waiting on it)"
        channel = next(link for link in snap["links"] if link["kind"] == "channel" and leader["name"] in link["downstream"])
        assert channel["state"] == "flow"
