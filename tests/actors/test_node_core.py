"""NodeCore, driven directly: the order it serves requests in, the effects' order, proposals to the metadata group,
and its answers to queue hosts that restart, calls that cannot be delivered, nodes that go down and
operations that fail. A `Group` plays the metadata Raft group: it applies what the core proposes,
in order, to the core's registry and hands each entry back, as the node's member does."""
from __future__ import annotations

from typing import Any

import pytest

from actors.messages.calls import Reply
from actors.messages.node import (
    ConnectionClosed, CreateQueue, DeclareExchange, DeclareQueue, DeleteQueue, Dispose, MetadataChanged,
    QueueCounts, QueueDeclared, QueueHostRestarted, QueueStats, Subscribe, Sync,
)
from actors.messages.quorum import HostChannelsGone
from actors.messages.runtime import Undelivered
from actors.node.core import NodeCore, Startup
from actors.node.operations import CALL_TIMER_PREFIX
from actors.node.quorum_queues import RETRY_MS
from actors.placement import QUEUE_ROUTER_NAME, ROUTER_NAME, host_of, queue_kind, queue_manager, quorum_home
from actors.runtime.address import Address
from effects import AnswerAdmin, Log, ProposeCommand, Send, StartTimer
from metadata.admin_errors import EX_DATAERR
from metadata.commands import AddUser, PutQueue, RemoveNodeTransients
from metadata.registry import Registry
from wire.errors import INTERNAL_ERROR, NOT_FOUND

ME, OTHER = "n1@box", "n2@box"
CHANNEL = Address(f"{ME}:conn0", "ch-1")
ROUTER = Address(f"{ME}:conn0", ROUTER_NAME)
HOSTS = ("queue0", "queue1")
RUNTIME = Address("runtime", "runtime")  # what says a message found no actor


class Group:
    """The metadata group, seen from one node: applies the core's proposals in order (or holds them).
    Every call's time-out timer is kept aside in `call_timers`, out of the effects the tests compare."""

    def __init__(self, core: NodeCore) -> None:
        self.core = core
        self.held: list[ProposeCommand] = []
        self.hold = False
        self.call_timers: list[StartTimer] = []

    def run(self, effects: list) -> list:
        """`effects` with every proposal applied and what applying it returned spliced in."""
        out: list = []
        for e in effects:
            if type(e) is ProposeCommand and not self.hold:
                out += self.apply(e)
            elif type(e) is ProposeCommand:
                self.held.append(e)
            elif type(e) is StartTimer and e.name.startswith(CALL_TIMER_PREFIX):
                self.call_timers.append(e)
            else:
                out.append(e)
        return out

    def apply(self, e: ProposeCommand, origin: str = ME) -> list:
        result, changes = self.core.registry.apply_command(e.command)
        return self.run(self.core.applied(origin, e.key, e.command, result, changes))

    def receive(self, sender: Address, msg: Any) -> list:
        return self.run(self.core.receive(sender, msg))


def node(*, subscribed: bool = True) -> tuple[NodeCore, Group]:
    c = NodeCore(Registry(), ME, HOSTS, salt=lambda n: b"s" * n, incarnation=1, timeout_ms=500)
    g = Group(c)
    g.run(c.start(Startup(bootstrap=True)))
    assert c.serving
    if subscribed:
        g.receive(ROUTER, Subscribe(7))
    return c, g


def declare(rid: int, name: str, *, durable: bool = True, exclusive: bool = False, owner: Any = None,
            passive: bool = False) -> DeclareQueue:
    return DeclareQueue(rid, "/", name, passive, durable, exclusive, False, {}, owner)


def home(name: str) -> str:
    return host_of(ME, queue_kind("/", name, HOSTS))


def sends(effects: list, kind: type | None = None) -> list[Send]:
    return [e for e in effects if type(e) is Send and (kind is None or type(e.msg) is kind)]


def only_send(effects: list, kind: type) -> Send:
    (send,) = sends(effects, kind)
    return send


def create_reply(g: Group, effects: list) -> list:
    """Answer the CreateQueue the node sent, as the queue manager would."""
    create = only_send(effects, CreateQueue)
    return g.receive(create.to, Reply(create.msg.rid, None))


def kinds(effects: list) -> list[type]:
    return [type(e) if type(e) is not Send else type(e.msg) for e in effects]


def test_the_node_serves_once_its_start_up_commands_are_applied() -> None:
    c = NodeCore(Registry(), ME, HOSTS, salt=lambda n: b"s" * n, incarnation=1)
    g = Group(c)
    g.hold = True
    out = g.run(c.start(Startup(bootstrap=True)))
    assert [type(p.command) for p in g.held] == [RemoveNodeTransients]
    assert g.receive(ROUTER, Subscribe(7)) == []  # held: this node's copy may be behind
    g.apply(g.held.pop())
    assert not c.serving  # the default user comes next, one command at a time
    assert [type(p.command) for p in g.held] == [AddUser]
    g.hold = False
    out = g.apply(g.held.pop())
    assert c.serving and c.registry.users()
    assert only_send(out, MetadataChanged).to == ROUTER  # the held subscription gets the snapshot


def test_declare_proposes_then_creates_the_queue_actor_on_its_home_before_answering() -> None:
    c, g = node()
    out = g.receive(CHANNEL, declare(7, "q"))
    create = only_send(out, CreateQueue)
    assert create.to == queue_manager(home("q"))
    assert c.registry.queue("/", "q").home == home("q")
    assert kinds(out).index(MetadataChanged) < kinds(out).index(CreateQueue)  # replicas first
    assert not sends(out, Reply)  # not yet: the actor must exist
    out = create_reply(g, out)
    assert out == [Send(CHANNEL, Reply(7, QueueDeclared("q", 0, 0)))]


def test_requests_are_served_one_at_a_time_in_arrival_order() -> None:
    c, g = node()
    first = g.receive(CHANNEL, declare(1, "a"))
    # a second request arrives while the first waits for its queue actor: nothing happens yet
    assert g.receive(CHANNEL, DeclareExchange(2, "/", "x", "direct", False, True, False, False, {})) == []
    out = create_reply(g, first)
    assert [e.msg.rid for e in sends(out, Reply)] == [1, 2]


OTHER_CHANNEL = Address(f"{ME}:conn1", "ch-1")


def proposed(g: Group) -> list[str]:
    return [f"{type(p.command).__name__} {getattr(p.command, 'name', '')}".strip() for p in g.held]


def test_requests_of_different_channels_to_different_queues_are_proposed_together() -> None:
    c, g = node()
    g.hold = True
    g.receive(CHANNEL, declare(1, "a"))
    g.receive(OTHER_CHANNEL, declare(2, "b"))
    # both wait for the group at once: the member appends both in one turn, one WAL write and sync
    assert proposed(g) == ["PutQueue a", "PutQueue b"]
    g.hold = False
    second = g.apply(g.held.pop())  # the group may commit them in either order relative to the answers
    out = create_reply(g, second)
    assert out == [Send(OTHER_CHANNEL, Reply(2, QueueDeclared("b", 0, 0)))]
    out = create_reply(g, g.apply(g.held.pop()))
    assert out == [Send(CHANNEL, Reply(1, QueueDeclared("a", 0, 0)))]


def test_requests_to_the_same_queue_keep_their_order_and_hold_back_later_ones_to_it() -> None:
    c, g = node()
    g.hold = True
    g.receive(CHANNEL, declare(1, "a"))
    assert g.receive(OTHER_CHANNEL, DeleteQueue(2, "/", "a", False, False, None)) == []
    assert g.receive(Address(f"{ME}:conn1", "ch-2"), declare(3, "a")) == []  # behind the delete, not beside it
    g.receive(Address(f"{ME}:conn1", "ch-3"), declare(4, "b"))  # another queue: at once
    assert proposed(g) == ["PutQueue a", "PutQueue b"]
    g.hold = False
    out = create_reply(g, g.apply(g.held.pop(0)))  # a is declared: the delete goes on
    assert sends(out, Reply) == [Send(CHANNEL, Reply(1, QueueDeclared("a", 0, 0)))]
    dispose = only_send(out, Dispose)
    out = g.receive(dispose.to, Reply(dispose.msg.rid, 0))
    assert sends(out, Reply)[0] == Send(OTHER_CHANNEL, Reply(2, 0))
    assert only_send(out, CreateQueue).msg.name == "a"  # then the third declares it again


def test_an_admin_ask_waits_for_the_running_requests_and_holds_back_the_later_ones() -> None:
    c, g = node()
    g.hold = True
    g.receive(CHANNEL, declare(1, "a"))
    assert g.run(c.admin("ask-1", "add_vhost", {"name": "v"})) == []
    assert g.receive(OTHER_CHANNEL, declare(2, "b")) == []  # behind the admin ask
    assert proposed(g) == ["PutQueue a"]
    g.hold = False
    out = create_reply(g, g.apply(g.held.pop()))
    assert sends(out, Reply) == [Send(CHANNEL, Reply(1, QueueDeclared("a", 0, 0)))]
    assert c.registry.vhost_exists("v")  # the admin ask ran alone, then the declare of b
    assert only_send(out, CreateQueue).msg.name == "b"


def test_redeclare_asks_the_queue_for_its_counts() -> None:
    c, g = node()
    create_reply(g, g.receive(CHANNEL, declare(1, "q")))
    out = g.receive(CHANNEL, declare(2, "q"))
    stats = only_send(out, QueueStats)
    out = g.receive(stats.to, Reply(stats.msg.rid, QueueCounts(5, 1)))
    assert sends(out) == [Send(CHANNEL, Reply(2, QueueDeclared("q", 5, 1)))]


def test_a_call_to_a_queue_whose_actor_is_gone_answers_404_and_the_node_goes_on() -> None:
    c, g = node()  # a transient queue: its actor does not come back with its host
    create_reply(g, g.receive(CHANNEL, declare(1, "q", durable=False)))
    stats = only_send(g.receive(CHANNEL, declare(2, "q", durable=False)), QueueStats)
    out = g.receive(Address("runtime", "runtime"), Undelivered(stats.msg))
    (reply,) = sends(out, Reply)
    assert (reply.msg.error.code, reply.msg.error.detail) == (NOT_FOUND, "queue 'q' is down or inaccessible")
    out = g.receive(CHANNEL, DeclareExchange(3, "/", "x", "fanout", False, True, False, False, {}))
    assert sends(out, Reply)[-1].msg.rid == 3


def test_a_redeclare_while_a_durable_queues_host_restarts_waits_for_the_queue_to_be_back() -> None:
    """RabbitMQ's rabbit_amqqueue:with retries a queue whose process is being restarted: the
    declare is answered by the queue once its host has made it again, not with a 404."""
    c, g = node()
    create_reply(g, g.receive(CHANNEL, declare(1, "q")))
    stats = only_send(g.receive(CHANNEL, declare(2, "q")), QueueStats)
    for _ in range(2):  # the host's successor has not made its queues yet
        (timer,) = [e for e in g.receive(RUNTIME, Undelivered(stats.msg)) if type(e) is StartTimer]
        assert timer.ticks == RETRY_MS
        assert sends(g.run(c.timer(timer.name))) == [Send(stats.to, stats.msg)]  # the same ask, again
    out = g.receive(stats.to, Reply(stats.msg.rid, QueueCounts(3, 0)))
    assert sends(out) == [Send(CHANNEL, Reply(2, QueueDeclared("q", 3, 0)))]


def test_a_durable_queue_that_does_not_come_back_in_time_answers_rabbitmqs_timeout() -> None:
    c, g = node()
    create_reply(g, g.receive(CHANNEL, declare(1, "q")))
    g.call_timers.clear()
    stats = only_send(g.receive(CHANNEL, declare(2, "q")), QueueStats)
    (timer,) = [e for e in g.receive(RUNTIME, Undelivered(stats.msg)) if type(e) is StartTimer]
    g.run(c.timer(timer.name))
    (reply,) = sends(g.run(c.timer(g.call_timers[-1].name)), Reply)  # the call's time-out
    assert (reply.msg.error.code, reply.msg.error.detail) == (
        NOT_FOUND, "failed to perform operation on queue 'q' in vhost '/' due to timeout")


def test_a_redeclare_asked_of_a_queue_host_that_then_restarted_is_asked_again_of_its_successor() -> None:
    """The ask may have died with the host's old process: the restarted host's queues ask again."""
    c, g = node()
    queues = Address(home("q"), QUEUE_ROUTER_NAME)
    g.receive(queues, Subscribe(1))
    create_reply(g, g.receive(CHANNEL, declare(1, "q")))
    stats = only_send(g.receive(CHANNEL, declare(2, "q")), QueueStats)
    out = g.receive(queues, Subscribe(2))  # its successor: the queue is made again, then asked again
    assert only_send(out, CreateQueue).msg.name == "q"
    assert [s for s in sends(out) if type(s.msg) is QueueStats] == [stats]
    out = g.receive(stats.to, Reply(stats.msg.rid, QueueCounts(3, 0)))
    assert sends(out, Reply) == [Send(CHANNEL, Reply(2, QueueDeclared("q", 3, 0)))]


def node_with_a_quorum_queue(name: str) -> tuple[NodeCore, Group]:
    """A node that has applied another node's declare of quorum queue `name` (members here and there)."""
    c, g = node()
    put = PutQueue("/", name, True, arguments={"x-queue-type": "quorum"}, home=quorum_home("u1"), members=(ME, OTHER))
    result, changes = c.registry.apply_command(put)
    g.run(c.applied(OTHER, (9, 1), put, result, changes))
    return c, g


def test_redeclaring_a_quorum_queue_with_no_leader_to_count_answers_zero_counts() -> None:
    """rabbit_quorum_queue:stat answers {ok, 0, 0} when its leader does not (an election, a node
    just gone): a redeclare is declare-ok, not the 404 that would stop a client such as Celery."""
    c, g = node_with_a_quorum_queue("qq")
    redeclare = DeclareQueue(2, "/", "qq", False, True, False, False, {"x-queue-type": "quorum"}, None)
    stats = only_send(g.receive(CHANNEL, redeclare), QueueStats)
    out = g.receive(Address("runtime", "runtime"), Undelivered(stats.msg))
    assert sends(out, Reply) == [Send(CHANNEL, Reply(2, QueueDeclared("qq", 0, 0)))]


def test_a_call_never_answered_times_out_and_frees_the_requests_behind_it() -> None:
    """A stat lost on its way to a quorum queue's leader (a node restarted faster than its silence
    was noticed) is answered 0, 0 when its call's timer fires, as rabbit_quorum_queue:stat's
    time-out is; the declare behind it on the same queue, held by the claim, is served then."""
    c, g = node_with_a_quorum_queue("qq")
    redeclare = DeclareQueue(2, "/", "qq", False, True, False, False, {"x-queue-type": "quorum"}, None)
    stats = only_send(g.receive(CHANNEL, redeclare), QueueStats)
    (timer,) = g.call_timers
    assert timer.ticks == 500
    behind = g.receive(Address(f"{ME}:conn1", "ch-2"), DeclareQueue(3, "/", "qq", True, True, False, False, {}, None))
    assert sends(behind) == []  # the same queue: it waits for the first
    out = g.run(c.timer(timer.name))
    assert sends(out, Reply)[0] == Send(CHANNEL, Reply(2, QueueDeclared("qq", 0, 0)))
    assert only_send(out, QueueStats).msg.rid != stats.msg.rid  # the next one's own call
    assert g.receive(stats.to, Reply(stats.msg.rid, QueueCounts(5, 1))) == []  # too late: ignored


def test_delete_waits_for_the_queue_to_agree_and_keeps_the_record_if_it_refuses() -> None:
    c, g = node()
    create_reply(g, g.receive(CHANNEL, declare(1, "q")))
    dispose = only_send(g.receive(CHANNEL, DeleteQueue(2, "/", "q", True, False, None)), Dispose)
    assert dispose.msg.if_unused
    refused = Reply(dispose.msg.rid, error=c.registry.check_queue_access("/", "nope", None))
    assert sends(g.receive(dispose.to, refused), Reply)[-1].msg.error is not None
    assert [q.name for q in c.registry.queues("/")] == ["q"]
    dispose = only_send(g.receive(CHANNEL, DeleteQueue(3, "/", "q", False, False, None)), Dispose)
    out = g.receive(dispose.to, Reply(dispose.msg.rid, 4))
    assert sends(out, Reply)[-1].msg == Reply(3, 4)
    assert not sends(out, Dispose)  # the actor said it is gone: no second Dispose
    assert c.registry.queues("/") == []


def test_a_queue_whose_actor_is_missing_is_still_deleted() -> None:
    c, g = node()
    create_reply(g, g.receive(CHANNEL, declare(1, "q", durable=False)))
    dispose = only_send(g.receive(CHANNEL, DeleteQueue(2, "/", "q", False, False, None)), Dispose)
    out = g.receive(dispose.to, Undelivered(dispose.msg))
    assert sends(out, Reply)[-1].msg == Reply(2, 0)
    assert c.registry.queues("/") == []


def test_a_closed_connection_takes_its_exclusive_queues_with_it() -> None:
    c, g = node()
    owner = f"{ME}:conn0:1"
    create_reply(g, g.receive(CHANNEL, declare(1, "ex", durable=False, exclusive=True, owner=owner)))
    out = g.receive(Address(f"{ME}:conn0", "reader-1"), ConnectionClosed(owner))
    assert only_send(out, Dispose).to == Address(home("ex"), "q:/:ex")
    assert c.registry.queues("/") == []


def test_a_restarted_queue_host_gets_its_queues_back_and_connection_hosts_hear_of_it() -> None:
    c, g = node()
    create_reply(g, g.receive(CHANNEL, declare(1, "q")))
    qrouter = Address(home("q"), QUEUE_ROUTER_NAME)
    assert not sends(g.receive(qrouter, Subscribe(1)), QueueHostRestarted)
    # the node host restarted and the same host process subscribes again: nothing was lost there
    assert not sends(g.receive(qrouter, Subscribe(1)), QueueHostRestarted)
    again = g.receive(qrouter, Subscribe(2))  # a new process: the queue host restarted
    assert only_send(again, QueueHostRestarted).to == ROUTER
    assert only_send(again, CreateQueue).msg.name == "q"


def test_an_admin_change_is_answered_after_every_replica_applied_it() -> None:
    c, g = node()
    g.receive(Address(f"{ME}:queue0", QUEUE_ROUTER_NAME), Subscribe(3))
    out = g.run(c.admin("ask-1", "add_vhost", {"name": "v"}))
    syncs = sends(out, Sync)
    assert len(syncs) == 2 and not [e for e in out if type(e) is AnswerAdmin]
    assert g.receive(syncs[0].to, Reply(syncs[0].msg.rid, None)) == []
    out = g.receive(syncs[1].to, Reply(syncs[1].msg.rid, None))
    assert out == [AnswerAdmin("ask-1", {"ok": True})]


def test_an_admin_error_is_answered_at_once() -> None:
    c, g = node()
    out = g.run(c.admin("ask-1", "delete_vhost", {"name": "nope"}))
    assert out == [AnswerAdmin("ask-1", {"error": "Virtual host 'nope' does not exist", "exit": EX_DATAERR})]


def test_an_operation_that_raises_is_answered_541_and_the_next_is_served(monkeypatch: pytest.MonkeyPatch) -> None:
    c, g = node()
    fresh = c.registry.fresh_queue_name

    def bug_once(vhost: str) -> str:  # a bug in the proposer's part of one request
        monkeypatch.setattr(c.registry, "fresh_queue_name", fresh)
        raise KeyError(vhost)
    monkeypatch.setattr(c.registry, "fresh_queue_name", bug_once)
    out = g.receive(CHANNEL, declare(1, ""))
    assert any(type(e) is Log and e.event == "node.op_failed" for e in out)
    assert sends(out, Reply)[-1].msg.error.code == INTERNAL_ERROR
    out = g.receive(CHANNEL, DeclareExchange(2, "/", "x", "direct", False, True, False, False, {}))
    assert sends(out, Reply)[-1].msg.rid == 2


def test_a_proposal_that_times_out_answers_rabbitmqs_541_and_a_late_commit_is_finished() -> None:
    c, g = node()
    g.hold = True
    out = g.receive(CHANNEL, declare(1, "q"))
    (timer,) = [e for e in out if type(e) is StartTimer]
    assert timer.ticks == 500
    out = g.run(c.timer(timer.name))
    (reply,) = sends(out, Reply)
    assert reply.msg.error.code == INTERNAL_ERROR
    assert reply.msg.error.detail == (f"Could not declare queue 'q' in vhost '/' on node '{ME}' because "
                                      "the metadata store operation timed out")
    # the command commits after all: the queue gets its actor, nothing is left half-done
    g.hold = False
    out = g.apply(g.held.pop())
    assert only_send(out, CreateQueue).to == queue_manager(home("q"))
    assert not sends(out, Reply)


def test_an_entry_proposed_by_another_node_reaches_the_replicas_and_homes_only_its_own_queues() -> None:
    c, g = node()
    theirs = PutQueue("/", "theirs", True, home=f"{OTHER}:queue0")
    result, changes = c.registry.apply_command(theirs)
    out = g.run(c.applied(OTHER, (9, 1), theirs, result, changes))
    assert kinds(out) == [MetadataChanged]
    mine = PutQueue("/", "mine", True, home=home("mine"))
    result, changes = c.registry.apply_command(mine)
    out = g.run(c.applied(OTHER, (9, 2), mine, result, changes))  # a definitions import, say
    assert kinds(out) == [MetadataChanged, CreateQueue]


def test_a_node_seen_up_then_lost_loses_its_transient_queues_and_its_calls() -> None:
    c, g = node()
    theirs = PutQueue("/", "t", False, home=f"{OTHER}:queue0")
    result, changes = c.registry.apply_command(theirs)
    g.run(c.applied(OTHER, (9, 1), theirs, result, changes))
    assert g.run(c.nodes([ME], [OTHER])) == []  # never heard from since this node started: not gone
    g.run(c.nodes([ME, OTHER], []))
    out = g.receive(CHANNEL, declare(2, "t", durable=False))
    stats = only_send(out, QueueStats)
    assert stats.to.host == f"{OTHER}:queue0"
    out = g.run(c.nodes([ME], [OTHER]))
    (reply,) = sends(out, Reply)  # the call in flight ends
    assert reply.msg.error.detail == f"home node '{OTHER}' of durable queue 't' in vhost '/' is down or inaccessible"
    assert c.registry.queue("/", "t") is None  # and the node's transient queue is gone


def test_a_command_applied_twice_resumes_its_operation_once() -> None:
    c, g = node(subscribed=False)
    g.hold = True
    g.run(c.admin("ask-1", "add_user", {"name": "bob", "password": "pw"}))
    proposal = g.held.pop()
    g.hold = False
    first = g.apply(proposal)
    assert [e for e in first if type(e) is AnswerAdmin] == [AnswerAdmin("ask-1", {"ok": True})]
    assert [e for e in g.apply(proposal) if type(e) is AnswerAdmin] == []  # a retried proposal


def test_a_snapshot_installed_from_the_leader_goes_to_every_subscriber_whole() -> None:
    c, g = node()
    c.registry.apply_command(AddUser("bob", "hash"))
    (sent,) = sends(c.restored(), MetadataChanged)
    assert sent.to == ROUTER and sent.msg.changes == c.registry.snapshot()


def test_a_clean_up_that_times_out_is_made_again_after_the_requests_behind_it() -> None:
    c, g = node()
    g.hold = True
    out = g.receive(Address(f"{ME}:conn0", "reader-1"), ConnectionClosed(f"{ME}:conn0:9"))
    (cleanup,) = [e for e in out if type(e) is StartTimer]
    g.receive(CHANNEL, DeclareExchange(2, "/", "x", "direct", False, True, False, False, {}))
    # no majority: the clean-up goes behind the declare, which gets its turn and its own time-out
    out = g.run(c.timer(cleanup.name))
    assert [type(p.command).__name__ for p in g.held] == ["RemoveOwnedQueues", "PutExchange"]
    (declare,) = [e for e in out if type(e) is StartTimer]
    out = g.run(c.timer(declare.name))
    assert sends(out, Reply)[-1].msg.error.code == INTERNAL_ERROR
    assert type(g.held[-1].command).__name__ == "RemoveOwnedQueues"  # proposed again


def test_a_restarted_connection_host_takes_its_connections_exclusive_queues_with_it() -> None:
    c, g = node()
    owner = f"{ME}:conn0:ab12.1"
    create_reply(g, g.receive(CHANNEL, declare(1, "ex", durable=False, exclusive=True, owner=owner)))
    assert not sends(g.receive(ROUTER, Subscribe(7)), Dispose)  # the node host asked again: nothing lost
    out = g.receive(ROUTER, Subscribe(8))  # a new process: its connections are gone
    assert only_send(out, Dispose).to == Address(home("ex"), "q:/:ex")
    assert c.registry.queues("/") == []
    # and quorum queues give back what its earlier channels held (its new ones are named by 8)
    assert only_send(out, HostChannelsGone).to == Address(f"{ME}:quorum", "members")
    assert only_send(out, HostChannelsGone).msg == HostChannelsGone(ROUTER.host, "8")


def test_a_restarted_quorum_host_has_its_dead_letter_workers_earlier_names_forgotten() -> None:
    """A quorum host subscribes only its qrouter replica, whose incarnation names its dead-letter
    worker as a channel's: every quorum host hears that the earlier ones' are gone (so target
    queues forget their publisher sequences); a connection host's qrouter, whose channels are
    named by its router's incarnation, never says so."""
    c, g = node()
    quorum = Address(f"{ME}:quorum", QUEUE_ROUTER_NAME)
    g.receive(quorum, Subscribe(0x11))
    assert not sends(g.receive(quorum, Subscribe(0x11)), HostChannelsGone)  # the node host asked again
    out = g.receive(quorum, Subscribe(0x12))
    assert only_send(out, HostChannelsGone).msg == HostChannelsGone(quorum.host, "12")
    conn_queues = Address(ROUTER.host, QUEUE_ROUTER_NAME)
    g.receive(conn_queues, Subscribe(0x21))
    assert not sends(g.receive(conn_queues, Subscribe(0x22)), HostChannelsGone)
