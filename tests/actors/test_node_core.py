"""NodeCore, driven directly: its serial order, the effects' order, and its answers to queue hosts
that restart, calls that cannot be delivered and operations that fail."""
from __future__ import annotations

from typing import Any

import pytest

from actors.messages.calls import Reply
from actors.messages.node import (
    ConnectionClosed, CreateQueue, DeclareExchange, DeclareQueue, DeleteQueue, Dispose, MetadataChanged,
    QueueCounts, QueueDeclared, QueueHostRestarted, QueueStats, Subscribe, Sync,
)
from actors.messages.runtime import Undelivered
from actors.node.core import DefinitionsCorrupt, NodeCore
from actors.placement import QUEUE_ROUTER_NAME, ROUTER_NAME, queue_host, queue_manager
from actors.runtime.address import Address
from effects import AnswerAdmin, Log, SaveDefinitions, Send
from metadata.admin_errors import EX_DATAERR
from metadata.registry import Registry
from wire.errors import INTERNAL_ERROR, NOT_FOUND

CHANNEL = Address("conn-0", "ch-1")
ROUTER = Address("conn-0", ROUTER_NAME)
HOSTS = 2


def core(persist: bool = True) -> NodeCore:
    c = NodeCore(Registry(), HOSTS, salt=lambda n: b"s" * n, persist=persist)
    c.start(None, "guest", "guest")
    return c


def declare(rid: int, name: str, *, durable: bool = True, exclusive: bool = False, owner: Any = None,
            passive: bool = False) -> DeclareQueue:
    return DeclareQueue(rid, "/", name, passive, durable, exclusive, False, {}, owner)


def sends(effects: list, kind: type | None = None) -> list[Send]:
    return [e for e in effects if type(e) is Send and (kind is None or type(e.msg) is kind)]


def only_send(effects: list, kind: type) -> Send:
    (send,) = sends(effects, kind)
    return send


def create_reply(c: NodeCore, effects: list) -> list:
    """Answer the CreateQueue the node sent, as the queue manager would."""
    create = only_send(effects, CreateQueue)
    return c.receive(create.to, Reply(create.msg.rid, None))


def test_declare_creates_the_queue_actor_before_answering_and_saves_first() -> None:
    c = core()
    c.receive(ROUTER, Subscribe())
    out = c.receive(CHANNEL, declare(7, "q"))
    create = only_send(out, CreateQueue)
    assert create.to == queue_manager(queue_host("/", "q", HOSTS))
    assert not [e for e in out if type(e) is Send and type(e.msg) is Reply]  # not yet: the actor must exist
    out = create_reply(c, out)
    kinds = [type(e) if type(e) is not Send else type(e.msg) for e in out]
    assert kinds == [SaveDefinitions, MetadataChanged, Reply]  # on disk, then replicas, then the channel
    assert out[-1] == Send(CHANNEL, Reply(7, QueueDeclared("q", 0, 0)))


def test_a_transient_queue_does_not_touch_the_definitions_file() -> None:
    c = core()
    out = create_reply(c, c.receive(CHANNEL, declare(1, "t", durable=False)))
    assert not [e for e in out if type(e) is SaveDefinitions]
    assert out[-1].msg.value == QueueDeclared("t", 0, 0)


def test_requests_are_served_one_at_a_time_in_arrival_order() -> None:
    c = core()
    first = c.receive(CHANNEL, declare(1, "a"))
    # a second request arrives while the first waits for its queue actor: nothing happens yet
    assert c.receive(CHANNEL, DeclareExchange(2, "/", "x", "direct", False, True, False, False, {})) == []
    out = create_reply(c, first)
    replies = [e.msg.rid for e in sends(out, Reply)]
    assert replies == [1, 2]


def test_redeclare_asks_the_queue_for_its_counts() -> None:
    c = core()
    create_reply(c, c.receive(CHANNEL, declare(1, "q")))
    out = c.receive(CHANNEL, declare(2, "q"))
    stats = only_send(out, QueueStats)
    out = c.receive(stats.to, Reply(stats.msg.rid, QueueCounts(5, 1)))
    assert out == [Send(CHANNEL, Reply(2, QueueDeclared("q", 5, 1)))]


def test_a_call_to_a_queue_whose_host_is_gone_answers_404_and_the_node_goes_on() -> None:
    c = core()
    create_reply(c, c.receive(CHANNEL, declare(1, "q")))
    out = c.receive(CHANNEL, declare(2, "q"))
    stats = only_send(out, QueueStats)
    out = c.receive(Address("runtime", "runtime"), Undelivered(stats.msg))
    (reply,) = sends(out, Reply)
    assert reply.msg.error.code == NOT_FOUND
    assert reply.msg.error.detail == "queue 'q' is down or inaccessible"
    out = c.receive(CHANNEL, DeclareExchange(3, "/", "x", "fanout", False, True, False, False, {}))
    assert sends(out, Reply)[-1].msg.rid == 3


def test_delete_waits_for_the_queue_to_agree_and_keeps_the_record_if_it_refuses() -> None:
    c = core()
    create_reply(c, c.receive(CHANNEL, declare(1, "q")))
    out = c.receive(CHANNEL, DeleteQueue(2, "/", "q", True, False, None))
    dispose = only_send(out, Dispose)
    assert dispose.msg.if_unused
    refused = Reply(dispose.msg.rid, error=c.registry.check_queue_access("/", "nope", None))
    out = c.receive(dispose.to, refused)
    assert sends(out, Reply)[-1].msg.error is not None
    assert [q.name for q in c.registry.queues("/")] == ["q"]
    out = c.receive(CHANNEL, DeleteQueue(3, "/", "q", False, False, None))
    dispose = only_send(out, Dispose)
    out = c.receive(dispose.to, Reply(dispose.msg.rid, 4))
    assert sends(out, Reply)[-1].msg == Reply(3, 4)
    assert c.registry.queues("/") == []


def test_a_closed_connection_takes_its_exclusive_queues_with_it() -> None:
    c = core()
    owner = ("conn-0", 1)
    create_reply(c, c.receive(CHANNEL, declare(1, "ex", durable=False, exclusive=True, owner=owner)))
    c.receive(ROUTER, Subscribe())
    out = c.receive(Address("conn-0", "reader-1"), ConnectionClosed(owner))
    dispose = only_send(out, Dispose)
    out = c.receive(dispose.to, Reply(dispose.msg.rid, 0))
    assert only_send(out, MetadataChanged).msg.gone == [("/", "ex")]
    assert c.registry.queues("/") == []


def test_a_restarted_queue_host_gets_its_queues_back_and_connection_hosts_hear_of_it() -> None:
    c = core()
    create_reply(c, c.receive(CHANNEL, declare(1, "q")))
    host = queue_host("/", "q", HOSTS)
    qrouter = Address(host, QUEUE_ROUTER_NAME)
    c.receive(ROUTER, Subscribe())
    first = c.receive(qrouter, Subscribe())
    assert not sends(first, QueueHostRestarted)
    again = c.receive(qrouter, Subscribe())
    assert only_send(again, QueueHostRestarted).to == ROUTER
    assert only_send(again, CreateQueue).msg.name == "q"


def test_an_admin_change_is_answered_after_every_replica_applied_it() -> None:
    c = core()
    c.receive(ROUTER, Subscribe())
    c.receive(Address("q-0", QUEUE_ROUTER_NAME), Subscribe())
    out = c.admin("ask-1", "add_vhost", {"name": "v"})
    syncs = sends(out, Sync)
    assert len(syncs) == 2 and not [e for e in out if type(e) is AnswerAdmin]
    assert c.receive(syncs[0].to, Reply(syncs[0].msg.rid, None)) == []
    out = c.receive(syncs[1].to, Reply(syncs[1].msg.rid, None))
    assert out == [AnswerAdmin("ask-1", {"ok": True})]


def test_an_admin_error_is_answered_at_once() -> None:
    c = core()
    c.receive(ROUTER, Subscribe())
    out = c.admin("ask-1", "delete_vhost", {"name": "nope"})
    assert out == [AnswerAdmin("ask-1", {"error": "Virtual host 'nope' does not exist", "exit": EX_DATAERR})]


def test_an_operation_that_raises_is_answered_541_and_the_next_is_served(monkeypatch: pytest.MonkeyPatch) -> None:
    c = core()
    apply = c.registry.apply_command

    def bug_once(cmd: Any) -> Any:  # a bug in the registry for one command
        monkeypatch.setattr(c.registry, "apply_command", apply)
        raise KeyError(cmd)
    monkeypatch.setattr(c.registry, "apply_command", bug_once)
    out = c.receive(CHANNEL, declare(1, "q"))
    assert any(type(e) is Log and e.event == "node.op_failed" for e in out)
    assert sends(out, Reply)[-1].msg.error.code == INTERNAL_ERROR
    out = c.receive(CHANNEL, DeclareExchange(2, "/", "x", "direct", False, True, False, False, {}))
    assert sends(out, Reply)[-1].msg.rid == 2


def test_a_corrupt_definitions_file_stops_the_start() -> None:
    c = NodeCore(Registry(), HOSTS, salt=lambda n: b"s" * n, persist=True)
    with pytest.raises(DefinitionsCorrupt):
        c.start(b"{not json", "guest", "guest")


def test_the_saved_definitions_load_back_into_a_new_core() -> None:
    c = core()
    out = create_reply(c, c.receive(CHANNEL, declare(1, "q")))
    (saved,) = [e.data for e in out if type(e) is SaveDefinitions]
    again = NodeCore(Registry(), HOSTS, salt=lambda n: b"t" * n, persist=True)
    assert again.start(saved, "guest", "guest") == []
    assert [q.name for q in again.registry.queues("/")] == ["q"]
    assert again.registry.users() == c.registry.users()
