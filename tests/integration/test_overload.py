"""Overload, end to end (issue 14, 8): a publisher with confirms floods a node until an alarm blocks
it; while blocked, the node stops taking its messages (memory, or disk, stops going); a consumer on
another connection drains the queue, the node gives the memory (or disk) back, the alarm clears, the
publisher goes on; every confirmed message is delivered. Memory: a limit set 48 MiB above what the
node uses, paging off so that memory really grows. Disk: the data dir on a 96 MiB tmpfs the test
mounts (as root) with a 40 MiB free-space limit."""
from __future__ import annotations

import os
import shutil
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pika
import pytest

from scripts.local_cluster import HOST
from tests.integration.admin_support import ok
from tests.integration.alarm_support import Watched, ask, states, status
from tests.integration.nodes import queue_host, start_node
from tests.waiting import until

pytestmark = [pytest.mark.integration, pytest.mark.slow]
MIB = 1024 * 1024
QUEUE = "overload"
BODY_BYTES = 64 * 1024  # few round trips for pika's one-confirm-at-a-time publishing


class Publisher(Watched):
    """Publishes numbered messages with confirms from a thread until told to stop; `confirmed`
    holds every number the broker confirmed. pika's BlockingConnection hands connection.blocked and
    unblocked to their callbacks only in process_data_events, not while a publish waits for its
    confirm: the thread lets it when it stops."""

    def __init__(self, node, body_bytes: int, persistent: bool) -> None:
        super().__init__(node)
        self.ch.confirm_delivery()
        self.padding = b"x" * (body_bytes - 8)
        self.props = pika.BasicProperties(delivery_mode=2 if persistent else 1)
        self.confirmed: list[int] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="publisher", daemon=True)

    def _run(self) -> None:
        n = 0
        while not self.stop.is_set():
            self.ch.basic_publish("", QUEUE, struct.pack(">Q", n) + self.padding, self.props)  # returns once confirmed
            self.confirmed.append(n)
            n += 1
        self.conn.process_data_events(0)


def drain(node, want: set[int]) -> set[int]:
    """Consume and ack until every number in `want` arrived (and the queue is empty); what arrived."""
    got: set[int] = set()
    conn = pika.BlockingConnection(pika.URLParameters(node.url))
    ch = conn.channel()
    ch.basic_qos(prefetch_count=200)

    def on_message(channel, deliver, _props, body) -> None:
        got.add(struct.unpack(">Q", body[:8])[0])
        channel.basic_ack(deliver.delivery_tag)
    ch.basic_consume(QUEUE, on_message)
    until(lambda: conn.process_data_events(0.05) or (want <= got and queue_messages(node) == 0),
          "the queue drained", timeout_s=120)
    conn.close()
    return got


def queue_messages(node) -> int:
    return next((q["messages"] for q in ask(node, queue_host(node, QUEUE), "list_queues") if q["name"] == QUEUE), 0)


def samples(read, n: int, every_s: float) -> list:
    """`n` readings `every_s` apart: how a quantity moves while nothing should move it."""
    out = [read()]
    for _ in range(n - 1):
        time.sleep(every_s)  # the spacing of a measurement, not a synchronisation
        out.append(read())
    return out


def overload(node, resource: str, body_bytes: int, persistent: bool, reading, steady_bytes: int) -> None:
    """Flood, check the block holds (the queue and `reading()`, memory used or disk free, stay within
    `steady_bytes`), drain, check the alarm clears and no confirmed message is lost."""
    publisher = Publisher(node, body_bytes, persistent)
    publisher.thread.start()
    try:
        name = f"{node.data_dir.name}@{HOST}"
        until(lambda: status(node)["alarms"] == [[name, resource]], f"the {resource} alarm", 120)
        until(lambda: "blocked" in states(node).values(), "the publisher blocked")
        seen = samples(lambda: (queue_messages(node), reading()), 5, 0.5)
        counts, readings = [count for count, _ in seen], [value for _, value in seen]
        assert counts == [counts[0]] * 5, f"the queue kept growing while blocked: {seen}"
        assert max(readings) - min(readings) < steady_bytes, f"{resource} kept moving while blocked: {seen}"
        publisher.stop.set()
        delivered = drain(node, set())  # what was confirmed before the block, and the publish that blocked
        until(lambda: status(node)["alarms"] == [], f"the {resource} alarm to clear", 60)
        publisher.thread.join(60)
        assert not publisher.thread.is_alive()
        assert publisher.events == [("blocked", f"low on {resource}"), ("unblocked",)]
        delivered |= drain(node, set(publisher.confirmed) - delivered)
        assert set(publisher.confirmed) <= delivered
        assert len(publisher.confirmed) > 200
    finally:
        publisher.stop.set()
        if not publisher.thread.is_alive():  # else stuck in pika: the node's stop ends it
            publisher.close()


def used_memory(node) -> int:
    """The node's memory as its monitor counts it for the alarm (PSS summed over its processes)."""
    return status(node)["memory"]["used"]


def test_a_flood_under_a_small_memory_limit_is_held_then_drained_and_nothing_confirmed_is_lost(tmp_path):
    conf = tmp_path / "warren.conf"
    conf.write_text("vm_memory_high_watermark_paging_ratio = 2.0\n")  # paging off: memory must grow
    node = start_node(tmp_path / "data", "--config", str(conf))
    try:
        limit = used_memory(node) + 48 * MIB
        ok(node, "set_vm_memory_high_watermark", "absolute", str(limit))
        with pika.BlockingConnection(pika.URLParameters(node.url)) as c:
            c.channel().queue_declare(QUEUE)
        overload(node, "memory", BODY_BYTES, False, lambda: used_memory(node), 16 * MIB)
        assert "vm_memory_high_watermark clear. Memory used:" in node.log()
    finally:
        node.stop()


@pytest.fixture
def small_fs(tmp_path) -> Iterator[Path]:
    """A 96 MiB tmpfs this test mounts, or a skip when it may not."""
    mount = tmp_path / "fs"
    mount.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small filesystem for the data dir needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96m", "tmpfs", str(mount)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"mount refused a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def test_a_flood_onto_a_small_disk_is_held_then_drained_and_nothing_confirmed_is_lost(small_fs, tmp_path):
    conf = tmp_path / "warren.conf"
    conf.write_text("disk_free_limit.absolute = 40MiB\nmsg_store_file_size_limit = 4194304\n")
    node = start_node(small_fs / "data", "--config", str(conf))
    try:
        with pika.BlockingConnection(pika.URLParameters(node.url)) as c:
            c.channel().queue_declare(QUEUE, durable=True)
        overload(node, "disk", BODY_BYTES, True, lambda: shutil.disk_usage(small_fs).free, 4 * MIB)
        log = node.log()
        assert "Free disk space is insufficient." in log and "Free disk space is sufficient." in log
        assert shutil.disk_usage(small_fs).free >= 40 * MIB
    finally:
        node.stop()
