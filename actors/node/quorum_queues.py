"""The node core's part in quorum queues: where a new queue's members go, starting and deleting
them, and which member to ask (the one that leads).

Theory of operation. A quorum queue's record (metadata/records.py) names its member nodes, the
leader the locator chose first, and its incarnation `uid` inside its home (actors/placement.py's
`quorum_home`). The node that declares it places the members (metadata/quorum.py's rules over
the nodes this node knows and which of them are up), proposes the record, then asks each member
node's quorum host to start its member (`StartMember`, answered once the member is in the host's
durable table), and answers declare-ok once a member says it leads, so a channel's first publish
finds a leader. Each member node also starts its own member when it applies the record (a start
the declaring node's call missed) and deletes it when it applies the deletion: the deleting node's
`DeleteMember` comes from another sender, so it may reach a host before that node's own late
`StartMember`, which would then start a member of a queue that is gone, for good. Every call to
the queue (stats, purge, delete, policies) goes to the member this node last saw leading; a
member that does not lead answers `NotQueueLeader` with the leader it knows, and the core sends
the same request there (NodeCore._redirected, `Leaders.saw`), or, while an election runs, to the
same member a moment later (`RETRY_MS`), until the call's deadline.

These are the pure pieces NodeCore's operations use (actors/node/core.py): placement, the members'
addresses and the requests that start and delete them, and the leaders seen.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from actors.messages.node import QueueStats
from actors.messages.quorum import DeleteMember, StartMember
from actors.node.steps import Ask, AskAll, Op, queue_down
from actors.placement import node_of, quorum_home, quorum_uid
from actors.quorum.names import MANAGER_NAME, host_names, manager_id, member_id, uid_of_member
from actors.runtime.address import Address
from metadata import quorum
from metadata.records import QueueRecord
from metadata.registry import Registry
from wire.errors import INTERNAL_ERROR, AmqpError

RETRY_MS = 100  # a call refused in an election (or to a queue whose host restarts) goes again this much later


@dataclass(frozen=True, slots=True)
class Declaring:
    """rabbitmq.conf's settings for declaring quorum queues (beyond quorum_cluster_size)."""

    leader_locator: str | None = None  # queue_leader_locator: client-local (None) or balanced
    relaxed_checks: bool = False  # quorum_queue.property_equivalence.relaxed_checks_on_redeclaration


@dataclass(frozen=True, slots=True)
class Placement:
    home: str
    members: tuple[str, ...]  # the leader first


class Rng:
    """metadata/quorum.py's random source over the core's injected salt."""

    def __init__(self, salt: Callable[[int], bytes]) -> None:
        self._salt = salt

    def random(self) -> float:
        return int.from_bytes(self._salt(4), "big") / (1 << 32)


def place(registry: Registry | None, arguments: dict[str, Any], local: str, nodes: set[str], down: set[str],
          salt: Callable[[int], bytes], cluster_size: int, policy: Mapping[str, Any] | None = None,
          leader_locator: str | None = None) -> Placement:
    """A new quorum queue's home and member nodes, declared through `local`, with the policy that
    will apply to it and the configured queue_leader_locator (metadata/quorum.py's leader_locator).
    Above 1,000 queues of any type (rabbit_amqqueue:count/0) members and leader go at random, so
    only below that are the members and leaders on each node counted (a declare costs O(queues)
    only while they are few). `registry` None: a cluster with no queues yet."""
    members_on: Counter[str] = Counter()
    leaders_on: Counter[str] = Counter()
    count = 0 if registry is None else registry.queue_count()
    if count < quorum.QUEUE_COUNT_START_RANDOM_SELECTION and registry is not None:
        for rec in registry.queues():
            if rec.quorum:
                members_on.update(rec.members)
                leaders_on[rec.members[0]] += 1
    ordered = sorted(nodes)
    size = quorum.group_size(arguments, len(ordered), cluster_size)
    locator = quorum.leader_locator(arguments, policy, leader_locator)
    leader, followers = quorum.place(size, locator, local, ordered, [n for n in ordered if n not in down],
                                     count, members_on, leaders_on, Rng(salt))
    return Placement(quorum_home(salt(8).hex()), (leader, *followers))


def uid_of(rec: QueueRecord) -> str:
    uid = quorum_uid(rec.home)
    assert uid is not None, f"{rec.name} is not a quorum queue"
    return uid


def manager(node: str, rec: QueueRecord | None = None) -> Address:
    """The manager of the quorum host that holds `node`'s member of `rec` (host 0's without)."""
    return Address.parse(manager_id(node, None if rec is None else uid_of(rec)))


def managers(node: str) -> list[Address]:
    """The managers of every quorum host of `node` (what every member of a node must hear)."""
    return [Address(host, MANAGER_NAME) for host in host_names(node)]


def member(node: str, rec: QueueRecord) -> Address:
    return Address.parse(member_id(node, uid_of(rec)))


def start_member(rec: QueueRecord) -> Callable[[int], StartMember]:
    return lambda rid: StartMember(rid, uid_of(rec), rec.vhost, rec.name, list(rec.members), dict(rec.arguments),
                                   rec.created_ms, rec.members[0])


def delete_member(rec: QueueRecord) -> Callable[[int], DeleteMember]:
    return lambda rid: DeleteMember(rid, uid_of(rec))


def delete_own_member(node: str, home: str) -> tuple[Address, DeleteMember]:
    """Where and what a member node sends when it applies its queue's deletion (rid 0: no answer
    awaited), `home` the deleted record's."""
    uid = quorum_uid(home)
    assert uid is not None, f"{home} is no quorum queue's home"
    return Address.parse(manager_id(node, uid)), DeleteMember(0, uid)


def start_members(rec: QueueRecord, node: str, target: Callable[[], Address]) -> Op:
    """A new quorum queue's members, started on their nodes; None once one leads, else the error.
    The followers start together, then the leader's member, which stands for election at once
    (they are there to vote) and is answered once it knows a leader (quorum/host.py); `target` is
    then the member to ask, which answers once a leader is known."""
    start = start_member(rec)
    followers = yield AskAll(tuple(Ask(manager(n, rec), start, queue_down(rec.name)) for n in rec.members[1:]))
    led = yield Ask(manager(rec.members[0], rec), start, queue_down(rec.name))
    error = not_started(rec, node, sum(reply.ok for reply in followers) + led.ok)
    if error is not None:
        return error
    yield Ask(target(), QueueStats, queue_down(rec.name))  # answered by a leader
    return None


def not_started(rec: QueueRecord, node: str, started: int) -> AmqpError | None:
    """RabbitMQ's answer when fewer than a majority of a new queue's members started."""
    if started > len(rec.members) // 2:
        return None
    return AmqpError(INTERNAL_ERROR, f"Cannot declare a queue 'queue '{rec.name}' in vhost '{rec.vhost}'' "
                                     f"on node '{node}': {{error,not_enough_members_started}}", connection=True)


class Leaders:
    """The member of each quorum queue this node last saw leading (by uid)."""

    def __init__(self) -> None:
        self._by_uid: dict[str, Address] = {}

    def target(self, rec: QueueRecord, down: set[str]) -> Address:
        """Where to send a call: the last leader seen, else (or if its node is down since) the first
        member on a node that is up, which redirects the call to the leader it knows."""
        seen = self._by_uid.get(uid_of(rec))
        if seen is not None and node_of(seen.host) not in down:
            return seen
        up = [n for n in rec.members if n not in down] or list(rec.members)
        return member(up[0], rec)

    def saw(self, leader: str) -> Address:
        """A member named as leader; its address."""
        to = Address.parse(leader)
        self._by_uid[uid_of_member(to.name)] = to
        return to

    def forget(self, rec: QueueRecord) -> None:
        self._by_uid.pop(uid_of(rec), None)

