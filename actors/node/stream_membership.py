"""Replicated stream membership, as `rabbitmq-streams` gives it: `add_replica` and
`delete_replica`, as NodeCore admin operations (actors/node/admin.py's table), and `delete_all`,
forget_cluster_node's removal of a forgotten node's members (3.13's delete_all_replicas).

Theory of operation. A replicated stream's members are its record's `replicas` (metadata/
records.py; the declared leader first, members added later last); each member's Replication
(actors/stream/replication.py) holds the same list and counts its majority over it. A change is
decided from the record and the running nodes by a pure function (`plan_add`, `plan_delete`:
the new member list, no change, or RabbitMQ 3.10's refusal), committed through the metadata Raft
group (`SetStreamReplicas`), and only then carried out by the stream's hosts, one member at a
time, so any majority of the old list meets any of the new (replication.py's docstring):
- add: every member of the old list on a node that is up takes the new list (`StreamMembers`),
  then the new node's queue host starts its member from the committed record (the declare's
  `CreateQueue`); it starts empty and catches up from the leader as a restarted replica does.
- delete: every member of the old list that is up takes the new list, the removed one included
  (a leader removed steps down, and the others elect one among themselves, as 3.10's
  coordinator restarts the stream with a new writer), then the removed member is disposed of,
  which deletes its log on its node.
A member on a node that is down when the change commits takes the list from the record when its
host starts again (NodeCore's `_subscribe` builds it from the record); RabbitMQ refuses a change
that names a node not running (node_not_running), and so does warren. As in 3.10 both answer
once the record is committed, not once a new member caught up or a new leader was elected.

RabbitMQ 3.10's answers (rabbit_stream_queue:add_replica/3, delete_replica/3,
rabbit_stream_coordinator's filter_command, the CLI's add_replica_command.ex and
delete_replica_command.ex; probed on a three-node 3.10.8 cluster): every refusal exits 69; a
missing queue, or vhost, is `not_found`; a node already a member (add) or not a member (delete)
is a success that changes nothing; the last member is refused before membership is looked at,
so deleting a non-member of a one-member stream is refused too. A forgotten node's member goes
by the same change with the coordinator's check alone (`plan_forget`: it is not running, and
nothing is asked of it). Left out: 3.10's
`{disallowed, out_of_sync_replica}` refusal of an add while a replica lags the writer by more
than its freshness limit.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from actors.messages.node import Dispose, StreamMembers
from actors.node import streams as sq
from actors.node.steps import MISSING, Apply, Ask, AskAll, Op
from actors.placement import host_of, kind_of, node_of, queue_address, queue_manager
from metadata import stream
from metadata.admin_errors import EX_SOFTWARE, EX_UNAVAILABLE, AdminError
from metadata.commands import SetStreamReplicas
from metadata.records import QueueRecord

if TYPE_CHECKING:
    from actors.node.core import NodeCore

NOT_FOUND = AdminError("not_found", EX_UNAVAILABLE)
NODE_NOT_RUNNING = AdminError("node_not_running", EX_UNAVAILABLE)
LAST_MEMBER = AdminError("Cannot delete the last member of a stream", EX_UNAVAILABLE)
_TIMEOUT = AdminError("the operation timed out: the metadata store has no majority", EX_SOFTWARE)


# ---------------------------------------------------------------- pure parts
def members(rec: QueueRecord) -> tuple[str, ...]:
    """A stream's member nodes: its replicas, or its home's node for a stream declared on one node."""
    return rec.replicas or (node_of(rec.home),)


def _refusal(rec: QueueRecord | None, node: str, running: set[str], verb: str) -> AdminError | None:
    """The checks add and delete share, in rabbit_stream_queue's order."""
    if rec is None:
        return NOT_FOUND
    if not stream.is_stream(rec.arguments):
        kind = "quorum" if rec.quorum else "classic"
        return AdminError(f"Cannot {verb} replicas {'to' if verb == 'add' else 'from'} a {kind} queue",
                          EX_UNAVAILABLE)
    if node not in running:
        return NODE_NOT_RUNNING
    return None


def plan_add(rec: QueueRecord | None, node: str, running: set[str]) -> tuple[str, ...] | AdminError | None:
    """The member list after adding `node`'s member; None: nothing to change (already a member)."""
    refused = _refusal(rec, node, running, "add")
    if refused is not None:
        return refused
    assert rec is not None
    now = members(rec)
    return None if node in now else (*now, node)


def plan_delete(rec: QueueRecord | None, node: str, running: set[str]) -> tuple[str, ...] | AdminError | None:
    """The member list after removing `node`'s member; None: nothing to change (not a member).
    The last member is refused whichever node is named (3.10's filter_command looks first)."""
    refused = _refusal(rec, node, running, "delete")
    if refused is not None:
        return refused
    assert rec is not None
    return plan_forget(rec, node)


def plan_forget(rec: QueueRecord, node: str) -> tuple[str, ...] | AdminError | None:
    """The member list after removing a forgotten node's member: the coordinator's own check
    (delete_replica's filter_command, the last member refused) without the CLI's running one,
    as 3.13's delete_all_replicas calls it for a node that is gone."""
    now = members(rec)
    if len(now) <= 1:
        return LAST_MEMBER
    return None if node not in now else tuple(n for n in now if n != node)


# ---------------------------------------------------------------- the operations
def _lookup(core: NodeCore, a: dict) -> QueueRecord | None:
    """The named queue (a missing vhost is not_found too: rabbit_amqqueue:lookup's answer)."""
    return core.registry.queue(a.get("vhost", "/"), a["name"])


def _running(core: NodeCore) -> set[str]:
    return (core.cluster_now | {core.node}) - core.down


def _change(core: NodeCore, a: dict, plan: Callable) -> Op:
    """Plan the change, commit it and tell the old members: (record before, record after), or
    the answer when there is nothing more to do."""
    rec = _lookup(core, a)
    planned = plan(rec, a["node"], _running(core))
    if isinstance(planned, AdminError):
        return planned
    if planned is None:
        return {"ok": True}
    assert rec is not None
    new = yield from _commit(rec, planned)
    if new is None:
        return NOT_FOUND  # deleted meanwhile
    yield from _tell(core, rec, new, members(rec))
    return rec, new


def add_replica(core: NodeCore, a: dict) -> Op:
    changed = yield from _change(core, a, plan_add)
    if not isinstance(changed, tuple):
        return changed
    rec, new = changed
    host = host_of(a["node"], kind_of(rec.home))
    yield Ask(queue_manager(host), lambda rid: sq.create(new, rid), MISSING)
    return {"ok": True}


def delete_replica(core: NodeCore, a: dict) -> Op:
    changed = yield from _change(core, a, plan_delete)
    if not isinstance(changed, tuple):
        return changed
    rec, _ = changed
    removed = queue_address(host_of(a["node"], kind_of(rec.home)), rec.vhost, rec.name)
    yield Ask(removed, lambda rid: Dispose(rid, False, False), MISSING)  # its log goes with it
    return {"ok": True}


def delete_all(core: NodeCore, node: str) -> Op:
    """forget_cluster_node's part in streams (3.13's rabbit_stream_queue:delete_all_replicas/1):
    every replicated stream with a member on the forgotten `node` loses it, one stream at a time,
    through the change add and delete take; nothing is asked of the gone node (its log stays on
    its disk, as a forgotten node's files do). The streams that could not lose it, with why."""
    failed = []
    for rec in [r for r in core.registry.queues() if stream.is_stream(r.arguments) and node in r.replicas]:
        changed = yield from _change(core, {"vhost": rec.vhost, "name": rec.name, "node": node},
                                     lambda r, n, _running: None if r is None else plan_forget(r, n))
        if isinstance(changed, AdminError):
            failed.append(f"{rec.vhost}/{rec.name}: {changed.message}")
    return failed


def _commit(rec: QueueRecord, replicas: tuple[str, ...]) -> Op:
    """The new member list through the metadata group; the record as committed (None: gone)."""
    result, _ = yield Apply(SetStreamReplicas(rec.vhost, rec.name, rec.home, replicas), _TIMEOUT)
    return result if isinstance(result, QueueRecord) else None


def _tell(core: NodeCore, rec: QueueRecord, new: QueueRecord, old: tuple[str, ...]) -> Op:
    """Every member of the old list on a node that is up takes the committed list, at once."""
    down = core.unreachable()
    kind = kind_of(rec.home)
    yield AskAll(tuple(Ask(queue_address(host_of(n, kind), rec.vhost, rec.name),
                           lambda rid: StreamMembers(rid, new.replicas), MISSING)
                       for n in old if n not in down))


ADMIN_OPS = {"add_replica": add_replica, "delete_replica": delete_replica}
