"""Durable classic queues with real nodes, real files and kill -9 (issue 5).

- kill -9 of the whole node under confirmed persistent publishes and an acking consumer: after the
  restart every confirmed message that was not acked is there (redelivered if it was delivered
  before), and nothing that was never published appears.
- kill -9 of the queue host alone (it holds the message store): the supervisor restarts it and the
  queue comes back from disk with the same guarantee.
- a clean restart: acked messages never come back, transient messages are gone, the rest keep order.
- GC: after most big messages are acked, the store's disk use falls.
- inspection: list_queues' RAM/disk columns for a lazy queue, store_summary.
"""
from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pika
import psutil
import pytest

from scripts.warrenctl import Node as Ctl
from tests.integration.admin_support import ok
from tests.integration.nodes import queue_host, start_node, start_node_with_queue_host
from tests.integration.sessions import kill_session
from tests.waiting import poll_ask_s, until

pytestmark = pytest.mark.integration  # starts real node processes

load_seconds = float(os.environ.get("WARREN_DURABILITY_LOAD_S", "1.5"))  # soak: set it higher
join_s = 5.0
PERSISTENT = pika.BasicProperties(delivery_mode=2)


def kill_node(node) -> None:
    """kill -9 of the node's session, then of anything left that serves this data dir."""
    kill_session(node.proc, 10)
    left = []
    for p in psutil.process_iter(["cmdline"]):
        if str(node.data_dir) in " ".join(p.info["cmdline"] or ()):
            p.kill()
            left.append(p)
    psutil.wait_procs(left, timeout=10)


def ctl(node) -> Ctl:
    return Ctl(int((node.data_dir / "admin_port").read_text()), node.data_dir)


def drain(url: str, queue: str) -> list[tuple[int, bool]]:
    """Every message left in `queue` as (id, redelivered), acked."""
    out = []
    with pika.BlockingConnection(pika.URLParameters(url)) as conn:
        ch = conn.channel()
        while True:
            method, props, body = ch.basic_get(queue, auto_ack=True)
            if method is None:
                return out
            out.append((int(body.split(b":")[0]), method.redelivered))


@dataclass(frozen=True)
class Seen:
    attempted: int  # ids 0 .. attempted-1 may have reached the broker
    confirmed: frozenset[int]
    delivered: frozenset[int]
    acked: frozenset[int]


class Load:
    """A confirming publisher and an acking consumer on one durable queue, until stopped."""

    def __init__(self, url: str, queue: str, body_size: int) -> None:
        self.url, self.queue, self.body_size = url, queue, body_size
        self.attempted = 0  # ids 0 .. attempted-1 may have reached the broker
        self.confirmed: set[int] = set()
        self.delivered: set[int] = set()
        self.acked: set[int] = set()
        self.stop = threading.Event()
        self.crashing = threading.Event()  # errors from here on are the crash we caused
        self.errors: list[BaseException] = []
        self.threads = [threading.Thread(target=self._guard, args=(f,), daemon=True)
                        for f in (self._publish, self._consume)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def join(self) -> None:
        """Stop both threads and freeze what they saw. A publish in flight to a queue host that was
        killed is neither confirmed nor nacked (the channel does not watch queue hosts), so the
        publisher may stay blocked: it is left behind (a daemon) after `join_s`."""
        self.stop.set()
        for t in self.threads:
            t.join(join_s)
        self.seen = Seen(self.attempted, frozenset(self.confirmed), frozenset(self.delivered),
                         frozenset(self.acked))

    def _guard(self, f) -> None:
        try:
            f()
        except (pika.exceptions.AMQPError, OSError) as e:  # the node is killed under us
            if not self.crashing.is_set():
                self.errors.append(e)

    def _publish(self) -> None:
        conn = pika.BlockingConnection(pika.URLParameters(self.url))
        ch = conn.channel()
        ch.confirm_delivery()
        pad = b"x" * self.body_size
        while not self.stop.is_set():
            i = self.attempted
            self.attempted += 1
            ch.basic_publish("", self.queue, b"%d:" % i + pad, PERSISTENT)  # returns once confirmed
            self.confirmed.add(i)

    def _consume(self) -> None:
        conn = pika.BlockingConnection(pika.URLParameters(self.url))
        ch = conn.channel()
        ch.basic_qos(prefetch_count=50)
        for method, _props, body in ch.consume(self.queue, inactivity_timeout=0.1):
            if self.stop.is_set():
                return
            if method is None:
                continue
            i = int(body.split(b":")[0])
            self.delivered.add(i)
            if i % 5:  # every fifth stays unacked until the crash
                ch.basic_ack(method.delivery_tag)
                self.acked.add(i)


def check_after_crash(load: Load, found: list[tuple[int, bool]]) -> None:
    load = load.seen
    ids = [i for i, _ in found]
    assert all(0 <= i < load.attempted for i in ids), "a message that was never published appeared"
    must = load.confirmed - load.acked
    missing = must - set(ids)
    assert not missing, f"confirmed, unacked messages lost: {sorted(missing)[:20]}"
    for i, redelivered in found:
        if i in load.delivered:
            assert redelivered, f"message {i} was delivered before the crash but not flagged redelivered"


def run_load_then(node, queue: str, body_size: int, crash) -> Load:
    with pika.BlockingConnection(pika.URLParameters(node.url)) as conn:
        conn.channel().queue_declare(queue, durable=True)
    load = Load(node.url, queue, body_size)
    load.start()
    until(lambda: len(load.confirmed) >= 200 and len(load.acked) >= 100, "some load")
    time.sleep(load_seconds)  # the length of the load phase, not a synchronisation
    load.crashing.set()
    crash()
    load.join()
    assert not load.errors, load.errors
    return load


@pytest.mark.parametrize("body_size", [100, 6000], ids=["embedded", "stored"])
def test_kill9_node_under_load_keeps_confirmed_messages(tmp_path: Path, body_size: int) -> None:
    node = start_node(tmp_path / "n")
    try:
        load = run_load_then(node, "dur", body_size, lambda: kill_node(node))
        node = start_node(node.data_dir)
        found = drain(node.url, "dur")
        check_after_crash(load, found)
        assert len(found) < load.seen.attempted  # the acks before the last sync did reach the disk
        # the crash recovery says what it found, at warning level, in the node's log
        host = queue_host(node, "dur")
        assert re.search(rf"\[warning\s*\] queue_storage\.recovered .*host={host} .*queues=1 .*store_clean=False",
                         node.log()), node.log()[-3000:]
    finally:
        kill_node(node)


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    """One node for the tests that neither restart it nor configure it (each has queues of its own)."""
    n = start_node(tmp_path_factory.mktemp("durability") / "n")
    yield n
    kill_node(n)


def test_kill9_queue_host_alone_recovers_from_disk(node) -> None:
    """By default the queue lives in a connection host: the connections there go with it."""
    kill9_queue_host_alone(node)


def test_kill9_dedicated_queue_host_alone_recovers_from_disk(tmp_path: Path) -> None:
    node = start_node_with_queue_host(tmp_path / "n")
    try:
        assert queue_host(node, "dur") == "queue0"
        kill9_queue_host_alone(node)
    finally:
        kill_node(node)


def kill9_queue_host_alone(node) -> None:
    control = ctl(node)
    host = queue_host(node, "dur")
    pid = control.ask(host, "pid")

    def crash() -> None:
        os.kill(pid, signal.SIGKILL)
    load = run_load_then(node, "dur", 6000, crash)
    until(lambda: _host_pid(control, host) not in (None, pid), "the queue's host to restart")
    until(lambda: _running(control, host, "dur"), "the queue to be re-created")
    check_after_crash(load, drain(node.url, "dur"))


def _host_pid(control: Ctl, host: str):
    try:
        return control.ask(host, "pid", timeout_s=poll_ask_s)
    except Exception:  # restarting: the control ask fails until the host is back
        return None


def _running(control: Ctl, host: str, name: str) -> bool:
    try:
        return any(q["name"] == name for q in control.ask(host, "list_queues", timeout_s=poll_ask_s))
    except Exception:
        return False


def test_clean_restart_keeps_unacked_drops_acked_and_transient(tmp_path: Path) -> None:
    node = start_node(tmp_path / "n")
    try:
        with pika.BlockingConnection(pika.URLParameters(node.url)) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            ch.queue_declare("keep", durable=True)
            ch.queue_declare("gone", durable=False)
            for i in range(40):
                props = PERSISTENT if i % 4 else pika.BasicProperties(delivery_mode=1)
                ch.basic_publish("", "keep", b"%d:" % i + b"y" * (5000 if i % 3 else 10), props)
                ch.basic_publish("", "gone", b"%d:" % i, PERSISTENT)
            acked = []
            for _ in range(10):
                method, _p, body = ch.basic_get("keep", auto_ack=False)
                ch.basic_ack(method.delivery_tag)
                acked.append(int(body.split(b":")[0]))
            held = ch.basic_get("keep", auto_ack=False)  # unacked at the stop: comes back redelivered
        node.stop()
        node = start_node(node.data_dir)
        found = drain(node.url, "keep")
        expected = [i for i in range(40) if i % 4 and i not in acked]
        assert [i for i, _ in found] == expected
        held_id = int(held[2].split(b":")[0])
        assert [i for i, r in found if r] == [held_id]
        with pika.BlockingConnection(pika.URLParameters(node.url)) as conn:
            with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
                conn.channel().queue_declare("gone", passive=True)
            assert e.value.reply_code == 404
    finally:
        kill_node(node)


def test_deleting_a_durable_queue_deletes_its_files(node) -> None:
    def queue_dirs() -> set[Path]:
        queues = node.data_dir / "queues"
        return set(queues.iterdir()) if queues.exists() else set()
    others = queue_dirs()  # the other tests' durable queues
    with pika.BlockingConnection(pika.URLParameters(node.url)) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("tmp", durable=True)
        assert queue_dirs() == others  # a queue's directory is made at its first write
        ch.basic_publish("", "tmp", b"0:", PERSISTENT)  # confirmed: its commit made the directory
        assert len(queue_dirs() - others) == 1
        ch.queue_delete("tmp")
        assert queue_dirs() == others


def test_gc_reclaims_disk_after_acks_and_store_summary(tmp_path: Path) -> None:
    conf = tmp_path / "warren.conf"
    conf.write_text("msg_store_file_size_limit = 262144\n")
    node = start_node(tmp_path / "n", "--config", str(conf))
    host = queue_host(node, "big")
    store_dir = node.data_dir / "msg_stores" / host / "persistent"

    def disk_bytes() -> int:
        total = 0
        for f in store_dir.glob("*.rdq"):
            try:
                total += f.stat().st_size
            except FileNotFoundError:  # the GC deleted it between the listing and the stat
                pass
        return total
    try:
        with pika.BlockingConnection(pika.URLParameters(node.url)) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            ch.queue_declare("big", durable=True)
            for i in range(300):
                ch.basic_publish("", "big", b"%d:" % i + b"z" * 16384, PERSISTENT)
            full = disk_bytes()
            assert full > 300 * 16384
            for _ in range(280):
                method, _p, _b = ch.basic_get("big", auto_ack=False)
                ch.basic_ack(method.delivery_tag)
            until(lambda: disk_bytes() < full / 3, "GC to give the disk back")
        rows = json.loads(ok(node, "store_summary", "--formatter", "json"))
        persistent = next(r for r in rows if r["store"] == "persistent" and r["host"] == host)
        assert persistent["messages"] == 20 and persistent["gc_runs"] + persistent["files_deleted"] > 0
        assert persistent["disk_bytes"] < full / 3
        assert len(drain(node.url, "big")) == 20
    finally:
        kill_node(node)


def test_lazy_queue_keeps_bodies_on_disk_and_list_queues_shows_it(node) -> None:
    with pika.BlockingConnection(pika.URLParameters(node.url)) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("lazy", durable=True, arguments={"x-queue-mode": "lazy"})
        ch.queue_declare("eager", durable=True)
        for i in range(100):
            ch.basic_publish("", "lazy", b"%d:" % i + b"l" * 1000, PERSISTENT)
            ch.basic_publish("", "eager", b"%d:" % i + b"e" * 1000, PERSISTENT)
    stats = {q["name"]: q for q in json.loads(ok(
        node, "list_queues", "name", "messages_ready_ram", "messages_paged_out", "messages_persistent",
        "memory", "--formatter", "json"))}
    assert stats["lazy"]["messages_ready_ram"] == 0 and stats["lazy"]["messages_paged_out"] == 100
    assert stats["lazy"]["messages_persistent"] == 100
    assert stats["eager"]["messages_ready_ram"] == 100 and stats["eager"]["messages_paged_out"] == 0
    assert [i for i, _ in drain(node.url, "lazy")] == list(range(100))
