"""The node core's part in streams: where a new stream's members go, starting and deleting them,
and `warrenctl stream_status`, as `rabbitmq-streams stream_status` shows a stream.

Theory of operation. A stream declared on a cluster is replicated (actors/stream/replication.py)
on `x-initial-cluster-size` nodes (all of them by default, as RabbitMQ places streams); its
record's `replicas` names them, the leader first, and its `home` is the leader's host, so a
stream of one member is what it was before replication (no replicas, its home). Placement takes
metadata/quorum.py's rules with the stream's own arguments: the leader is the declaring node
(client-local, the default) or, for balanced (3.10's least-leaders and random too), the running
member leading the fewest streams. The declaring node asks each member's host to start it,
replicas first, then the leader, which takes epoch 1 unopposed as it starts; every other node
starts its own member when it applies the record (a second start is a no-op) and again when its
host restarts. Calls go to the first member on a node that is up, the home first; a delete goes
to every member. `stream_status` asks every member and answers one row per member: its role
(writer, replica, candidate; noproc when it does not answer), node, the offsets (the last one
written, the committed one it knows, the first one kept), readers, segments and epoch.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from actors.messages.node import CreateQueue, Dispose, StreamStatus
from actors.node.quorum_queues import Rng
from actors.node.steps import MISSING, Ask, AskAll, Op
from actors.placement import host_of, member_hosts, node_of, queue_address, queue_kind, queue_manager
from actors.runtime.address import Address
from metadata import quorum, stream
from metadata.admin_errors import EX_UNAVAILABLE, AdminError, named_queue
from metadata.records import QueueRecord
from metadata.registry import Registry
from wire.errors import NOT_FOUND, AmqpError

if TYPE_CHECKING:
    from actors.node.core import NodeCore

COLUMNS = ("role", "node", "offset", "committed_offset", "first_offset", "readers", "segments", "epoch")
_NOPROC = AmqpError(NOT_FOUND, "noproc")


def place(registry: Registry, arguments: dict[str, Any], local: str, nodes: set[str], down: set[str],
          kinds: tuple[str, ...], vhost: str, name: str, salt: Callable[[int], bytes],
          policy: dict[str, Any] | None = None) -> tuple[str, tuple[str, ...]]:
    """A new stream's home and member nodes (the leader first); () members on a single node."""
    ordered = sorted(nodes)
    size = arguments.get("x-initial-cluster-size")
    size = len(ordered) if isinstance(size, bool) or not isinstance(size, int) else max(1, min(size, len(ordered)))
    leaders_on: Counter[str] = Counter()
    members_on: Counter[str] = Counter()
    for rec in registry.queues():
        if rec.replicas:
            leaders_on[rec.replicas[0]] += 1
            members_on.update(rec.replicas)
    locator = quorum.leader_locator(arguments, policy)
    leader, followers = quorum.place(size, locator, local, ordered, [n for n in ordered if n not in down],
                                     0, members_on, leaders_on, Rng(salt))
    home = host_of(leader, queue_kind(vhost, name, kinds))
    return home, ((leader, *followers) if len(ordered) > 1 else ())


def create(rec: QueueRecord, rid: int) -> CreateQueue:
    return CreateQueue(rid, rec.vhost, rec.name, rec.auto_delete, rec.arguments, rec.durable, rec.replicas)


def start_members(rec: QueueRecord, down: set[str], error: AmqpError) -> Op:
    """Every member on a node that is up, replicas first (the leader announces itself to them)."""
    hosts = member_hosts(rec.home, rec.replicas)
    replicas = [h for h in hosts[1:] if node_of(h) not in down]
    yield AskAll(tuple(Ask(queue_manager(h), lambda rid: create(rec, rid), MISSING) for h in replicas))
    return (yield Ask(queue_manager(rec.home), lambda rid: create(rec, rid), error))


def target(rec: QueueRecord, unreachable: set[str]) -> Address:
    """Where a call to a replicated stream goes: its first member on a node that is up."""
    hosts = member_hosts(rec.home, rec.replicas)
    up = [h for h in hosts if node_of(h) not in unreachable] or hosts
    return queue_address(up[0], rec.vhost, rec.name)


def dispose_others(rec: QueueRecord, answered: Address, unreachable: set[str]) -> Op:
    """A deleted stream's other members go too (those on nodes that are down go when they start:
    their host finds no record naming them)."""
    others = [h for h in member_hosts(rec.home, rec.replicas)
              if node_of(h) not in unreachable and h != answered.host]
    yield AskAll(tuple(Ask(queue_address(h, rec.vhost, rec.name), lambda rid: Dispose(rid, False, False), MISSING)
                       for h in others))


def stream_status(core: NodeCore, a: dict) -> Op:
    rec = named_queue(core.registry, a)
    if isinstance(rec, AdminError):
        return rec
    vhost, name = rec.vhost, rec.name
    if not stream.is_stream(rec.arguments):
        return AdminError("not_a_stream", EX_UNAVAILABLE)
    hosts = member_hosts(rec.home, rec.replicas)
    down = core.unreachable()
    replies = yield AskAll(tuple(Ask(queue_address(h, vhost, name), StreamStatus, _NOPROC) for h in hosts
                                 if node_of(h) not in down))
    answers = iter(replies)
    rows = []
    for h in hosts:
        reply = next(answers) if node_of(h) not in down else None
        if reply is None or not reply.ok:
            rows.append({"role": "noproc", "node": node_of(h), **{c: "" for c in COLUMNS[2:]}})
        else:
            rows.append({**{c: "" for c in COLUMNS}, **reply.value, "node": node_of(h)})
    return {"rows": rows, "columns": list(COLUMNS)}


ADMIN_OPS = {"stream_status": stream_status}
