"""Declaring quorum queues through pika, on one node and on three (issue 12, item 3): RabbitMQ's
codes and texts (metadata/quorum.py has the rules and their core tests), the group size, and a
declaration that is answered only once the queue has a leader that takes a publish."""
from __future__ import annotations

import pika
import pika.exceptions
import pytest

from actors.runtime.client import control
from actors.quorum.names import QUORUM_KIND
from tests.quorum_features.conftest import declare

pytestmark = pytest.mark.integration

Q = {"x-queue-type": "quorum"}


def refusal(broker, name: str, **kwargs) -> tuple[int, str]:
    conn = broker.connect("declare")
    try:
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as closed:
            conn.channel().queue_declare(name, **kwargs)
        return closed.value.reply_code, closed.value.reply_text
    finally:
        conn.close()


@pytest.mark.parametrize("kwargs, text", [
    (dict(durable=False, arguments=Q), "invalid property 'non-durable' for queue '{q}' in vhost '/'"),
    (dict(durable=True, exclusive=True, arguments=Q), "invalid property 'exclusive-owner' for queue '{q}' in vhost '/'"),
    (dict(durable=True, auto_delete=True, arguments=Q), "invalid property 'auto-delete' for queue '{q}' in vhost '/'"),
    (dict(durable=True, arguments={**Q, "x-max-priority": 5}),
     "invalid arg 'x-max-priority' for queue '{q}' in vhost '/' of queue type rabbit_quorum_queue"),
])
def test_declarations_a_quorum_queue_refuses(broker, name, kwargs, text):
    assert refusal(broker, name, **kwargs) == (406, "PRECONDITION_FAILED - " + text.format(q=name))


def test_a_server_named_quorum_queue_is_refused(broker):
    assert refusal(broker, "", durable=True, arguments=Q) == (
        406, "PRECONDITION_FAILED - Cannot declare a server-named queue for type rabbit_quorum_queue")


def test_redeclaring_as_another_type_is_406_and_the_same_declaration_is_fine(broker, name):
    conns = [broker.connect("declare"), broker.connect("consume")]
    try:
        for conn in conns:  # the same declaration again, through another node: equivalent
            declare(conn.channel(), name)
    finally:
        for conn in conns:
            conn.close()
    assert refusal(broker, name, durable=True) == (
        406, f"PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue '{name}' in vhost '/': "
             "received 'classic' but current is 'quorum'")


def members_of(broker, name: str) -> dict[str, str]:
    """node -> role of each member of queue `name`, from every node's quorum host."""
    out = {}
    for node in broker.nodes:
        port = int((node.data_dir / "admin_port").read_text())
        for status in control(port, QUORUM_KIND, "status", {"queue": name}).values():
            out[node.data_dir.name] = status["role"]
    return out


def test_group_size_and_the_client_local_leader(broker, name):
    conn = broker.connect("declare")
    try:
        ch = conn.channel()
        declare(ch, name)
        declare(ch, name + "-one", **{"x-quorum-initial-group-size": 1})
    finally:
        conn.close()
    expected = {"n1": "leader"} if broker.kind == "one" else {"n1": "leader", "n2": "follower", "n3": "follower"}
    assert members_of(broker, name) == expected  # declared through n1: it leads (client-local)
    assert members_of(broker, name + "-one") == {"n1": "leader"}
