"""Churn against a real node leaves nothing behind in its hosts' tables (the control op `memory`,
actors/runtime/memory_probe.py): queues declared, published to and deleted, and connections that
publish to a queue that stays. What the soak found kept for good (bench/RESULTS.md, "what grew in
the soak"): the message store's credit entry per deleted classic queue, a short-lived channel's
entry in the ledger of the queue it published to, a deleted quorum member's name in the WAL."""
from __future__ import annotations

import pika
import pytest

from actors.runtime.client import control
from tests.integration.nodes import module_node
from tests.waiting import until

pytestmark = pytest.mark.integration  # starts real node processes

node = module_node("memchurn")
churned = 20


def tables(node, key: str) -> int:
    port = int((node.data_dir / "admin_port").read_text())
    hosts = control(port, "$supervisor", "hosts", {})["hosts"]
    return sum(control(port, h, "memory", {}, 20)["containers"].get(key, 0) for h in hosts)


def publish_once(node, queue: str, *, delete: bool, arguments: dict | None = None) -> None:
    with pika.BlockingConnection(pika.URLParameters(node.url)) as conn:
        ch = conn.channel()
        ch.queue_declare(queue, durable=True, arguments=arguments)
        ch.confirm_delivery()
        ch.basic_publish("", queue, b"x", pika.BasicProperties(delivery_mode=2))
        ch.basic_get(queue, auto_ack=True)
        if delete:
            ch.queue_delete(queue)


def test_churned_queues_and_publishers_leave_no_credit_links_nor_wal_names(node):
    publish_once(node, "memchurn.stays", delete=False)
    publish_once(node, "memchurn.warm", delete=True)
    publish_once(node, "memchurn.warmq", delete=True, arguments={"x-queue-type": "quorum"})
    links, names = tables(node, "CreditLedger._unacked"), tables(node, "WalCore._member_bytes")
    for i in range(churned):
        publish_once(node, f"memchurn.c{i}", delete=True)
        publish_once(node, f"memchurn.q{i}", delete=True, arguments={"x-queue-type": "quorum"})
        publish_once(node, "memchurn.stays", delete=False)  # a new publishing channel each time
    until(lambda: tables(node, "CreditLedger._unacked") <= links, "the ledgers back to their links", 10)
    assert tables(node, "WalCore._member_bytes") <= names
