"""Non-durable and priority classic queues page to disk too, with real nodes and pika.

- a lazy non-durable queue holds a backlog with (almost) nothing in RAM and drains it in order;
- a lazy priority queue does the same, draining highest priority first, FIFO within a priority;
- a durable priority queue's persistent messages survive a clean restart and a kill -9, with their
  priorities (transient ones do not), and the queue goes on numbering above what it recovered.
"""
from __future__ import annotations

import json
from pathlib import Path

import pika
import pytest

from tests.integration.admin_support import ok
from tests.integration.test_durability import drain, kill_node
from tests.integration.nodes import start_node
from tests.waiting import until

pytestmark = pytest.mark.integration  # starts real node processes

BACKLOG = 400
PRIOS = [None, 0, 1, 2, 3, 4, 5, 9]  # 9 counts as the maximum, 5; None as 0


def queue_stats(node) -> dict[str, dict]:
    return {q["name"]: q for q in json.loads(ok(
        node, "list_queues", "name", "messages", "messages_ram", "messages_ready_ram",
        "messages_paged_out", "messages_persistent", "--formatter", "json"))}


def priority_of(i: int) -> int | None:
    return PRIOS[i % len(PRIOS)]


def expected_order(ids, max_priority: int = 5) -> list[int]:
    return sorted(ids, key=lambda i: (-min(priority_of(i) or 0, max_priority), i))


def publish(ch, queue: str, ids, *, persistent, size: int = 500) -> None:
    for i in ids:
        props = pika.BasicProperties(delivery_mode=2 if persistent(i) else 1, priority=priority_of(i))
        ch.basic_publish("", queue, b"%d:" % i + b"p" * (size if i % 3 else 5000), props)


def test_lazy_non_durable_and_priority_queues_keep_their_backlog_on_disk(tmp_path: Path) -> None:
    node = start_node(tmp_path / "n")
    try:
        with pika.BlockingConnection(pika.URLParameters(node.url)) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            ch.queue_declare("lazy_t", arguments={"x-queue-mode": "lazy"})
            ch.queue_declare("lazy_p", arguments={"x-queue-mode": "lazy", "x-max-priority": 5})
            ch.queue_declare("eager_t")
            publish(ch, "lazy_t", range(BACKLOG), persistent=lambda i: False)
            publish(ch, "lazy_p", range(BACKLOG), persistent=lambda i: i % 2 == 0)
            publish(ch, "eager_t", range(20), persistent=lambda i: False)
        stats = queue_stats(node)
        for name in ("lazy_t", "lazy_p"):
            assert stats[name]["messages"] == BACKLOG
            assert stats[name]["messages_ram"] <= BACKLOG // 20, stats[name]
            assert stats[name]["messages_paged_out"] >= BACKLOG - BACKLOG // 20
            assert stats[name]["messages_persistent"] == 0  # a non-durable queue's are all transient
        assert stats["eager_t"]["messages_ram"] == 20 and stats["eager_t"]["messages_paged_out"] == 0
        assert any((node.data_dir / "transient_queues").rglob("*.idx"))
        assert [i for i, _ in drain(node.url, "lazy_t")] == list(range(BACKLOG))
        assert [i for i, _ in drain(node.url, "lazy_p")] == expected_order(range(BACKLOG))
        with pika.BlockingConnection(pika.URLParameters(node.url)) as conn:
            ch = conn.channel()
            for name in ("lazy_t", "lazy_p", "eager_t"):
                ch.queue_delete(name)
        assert not any((node.data_dir / "transient_queues").rglob("*.idx"))
    finally:
        kill_node(node)


def test_a_durable_priority_queue_keeps_its_persistent_messages_across_restarts(tmp_path: Path) -> None:
    node = start_node(tmp_path / "n")
    try:
        with pika.BlockingConnection(pika.URLParameters(node.url)) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            ch.queue_declare("pq", durable=True, arguments={"x-max-priority": 5})
            ch.queue_declare("lazy_pq", durable=True, arguments={"x-max-priority": 5, "x-queue-mode": "lazy"})
            for name in ("pq", "lazy_pq"):
                publish(ch, name, range(120), persistent=lambda i: i % 4 != 3, size=50)
            held = ch.basic_get("pq", auto_ack=False)  # unacked at the stop: back, redelivered
        held_id = int(held[2].split(b":")[0])
        survivors = [i for i in range(120) if i % 4 != 3]
        assert held_id == expected_order(range(120))[0]
        node.stop()
        node = start_node(node.data_dir)
        stats = queue_stats(node)
        assert stats["lazy_pq"]["messages_ram"] == 0 and stats["lazy_pq"]["messages_persistent"] == len(survivors)
        assert drain(node.url, "lazy_pq") == [(i, False) for i in expected_order(survivors)]
        with pika.BlockingConnection(pika.URLParameters(node.url)) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            publish(ch, "pq", range(1000, 1040), persistent=lambda i: True, size=50)  # numbered above
        kill_node(node)
        node = start_node(node.data_dir)
        found = drain(node.url, "pq")
        assert [i for i, _ in found] == expected_order(survivors + list(range(1000, 1040)))
        # after a crash every recovered message counts as possibly delivered (as RabbitMQ)
        assert dict(found)[held_id] is True
    finally:
        kill_node(node)


def test_memory_above_the_paging_threshold_pages_every_kind_of_queue_out(tmp_path: Path) -> None:
    # a paging ratio so low that an idle node is above it (0.0001 x 0.4 x RAM is ~1 MB on 24 GB) while
    # the memory alarm is not raised: the housekeeping cuts every queue's RAM target each second until
    # the backlog is on disk
    conf = tmp_path / "warren.conf"
    conf.write_text("vm_memory_high_watermark_paging_ratio = 0.0001\n")
    node = start_node(tmp_path / "n", "--config", str(conf))
    try:
        with pika.BlockingConnection(pika.URLParameters(node.url)) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            ch.queue_declare("durable", durable=True)
            ch.queue_declare("transient")
            ch.queue_declare("prio", arguments={"x-max-priority": 5})
            publish(ch, "durable", range(BACKLOG), persistent=lambda i: i % 2 == 0)
            publish(ch, "transient", range(BACKLOG), persistent=lambda i: False)
            publish(ch, "prio", range(BACKLOG), persistent=lambda i: False)

        def paged_out() -> dict | None:
            stats = queue_stats(node)
            ram = {name: stats[name]["messages_ram"] for name in ("durable", "transient", "prio")}
            return stats if all(n <= BACKLOG // 10 for n in ram.values()) else None
        stats = until(paged_out, "every queue paged out", 30)
        for name in ("durable", "transient", "prio"):
            assert stats[name]["messages"] == BACKLOG
            assert stats[name]["messages_paged_out"] >= BACKLOG - BACKLOG // 10
        assert "queue_storage.paging_started" in node.log()
        assert [i for i, _ in drain(node.url, "durable")] == list(range(BACKLOG))
        assert [i for i, _ in drain(node.url, "transient")] == list(range(BACKLOG))
        assert [i for i, _ in drain(node.url, "prio")] == expected_order(range(BACKLOG))
    finally:
        kill_node(node)
