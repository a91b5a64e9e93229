"""The node's admin operations on vhosts, policies, queues, exchanges and bindings, and
forget_cluster_node: warrenctl's and the HTTP API's, run in the node core's serial order; and
`ADMIN`, every admin operation by name (these, access_admin.py's, quorum_membership.py's,
streams.py's and stream_membership.py's), which `NodeCore.run_admin` looks up.

Each operation is a generator of steps (steps.py) over the core, as the core's own operations
are: a change is one registry command (metadata/commands.py) applied with the admin time-out; a
queue's purge or delete asks the queue as a channel's call does (NodeCore.queue_target, and the
same delete, NodeCore.delete_queue); the HTTP API's declarations are the channels' declarations
(NodeCore.exchange_declare, queue_declare) with no connection behind them. An operation returns
its answer, or an AdminError (or an AmqpError, whose code the HTTP API answers with).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from actors.messages.channel_queue import Purge
from actors.messages.node import DeclareExchange, DeclareQueue
from actors.node import access_admin
from actors.node import quorum_membership as qm
from actors.node import stream_membership, streams
from actors.node.steps import ADMIN_TIMEOUT, Apply, Ask, Op, admin_command, home_down, queue_down
from effects import Log
from metadata.admin_errors import EX_UNAVAILABLE, AdminError, no_vhost
from metadata.commands import (AddBinding, AddVhost, ClearPolicy, ForgetNodeQueues, RemoveBinding, RemoveExchange,
                               RemoveVhost, SetPolicy)
from metadata.records import QueueRecord
from wire.errors import AmqpError

if TYPE_CHECKING:
    from actors.node.core import NodeCore


def delete_vhost(core: NodeCore, a: dict) -> Op:
    vhost = a["name"]
    if not core.registry.vhost_exists(vhost):
        return no_vhost(vhost)
    yield Apply(RemoveVhost(vhost), ADMIN_TIMEOUT)
    return {"ok": True}


def _queue(core: NodeCore, a: dict) -> QueueRecord | AdminError:
    vhost, name = a.get("vhost", "/"), a["name"]
    if not core.registry.vhost_exists(vhost):
        return no_vhost(vhost)
    rec = core.registry.queue(vhost, name)
    return rec if rec is not None else AdminError(f"Queue '{name}' in vhost '{vhost}' does not exist")


def purge_queue(core: NodeCore, a: dict) -> Op:
    rec = _queue(core, a)
    if isinstance(rec, AdminError):
        return rec
    reply = yield Ask(core.queue_target(rec), Purge, queue_down(rec.name), home_down(rec))
    return {"messages": reply.value} if reply.ok else AdminError(reply.error.detail)


def delete_queue(core: NodeCore, a: dict) -> Op:
    rec = _queue(core, a)
    if isinstance(rec, AdminError):
        return rec
    result = yield from core.delete_queue(rec, a.get("if_unused", False), a.get("if_empty", False))
    return AdminError(result.detail) if isinstance(result, AmqpError) else {"messages": result}


def declare_exchange(core: NodeCore, a: dict) -> Op:
    result = yield from core.exchange_declare(DeclareExchange(
        0, a.get("vhost", "/"), a["name"], a["type"], False, a.get("durable", True), a.get("auto_delete", False),
        a.get("internal", False), dict(a.get("arguments") or {})))
    return result if isinstance(result, AmqpError) else {"ok": True}


def delete_exchange(core: NodeCore, a: dict) -> Op:
    return (yield from admin_command(RemoveExchange(a.get("vhost", "/"), a["name"], a.get("if_unused", False))))


def declare_queue(core: NodeCore, a: dict) -> Op:
    result = yield from core.queue_declare(DeclareQueue(
        0, a.get("vhost", "/"), a["name"], False, a.get("durable", True), False, a.get("auto_delete", False),
        dict(a.get("arguments") or {}), None))
    return result if isinstance(result, AmqpError) else {"ok": True}


def _binding(command: type) -> Callable[[NodeCore, dict], Op]:
    def run(core: NodeCore, a: dict) -> Op:
        return (yield from admin_command(command(a.get("vhost", "/"), a["destination_kind"], a["destination"],
                                                 a["source"], a.get("routing_key", ""),
                                                 dict(a.get("arguments") or {}))))
    return run


def forget_node(core: NodeCore, a: dict) -> Op:
    """warrenctl forget_cluster_node, once the shell has removed the node from the metadata
    group (so it is forgotten whatever follows, as in RabbitMQ): its classic queues go (RabbitMQ
    deletes the durable classic queues homed on a forgotten node), then its member of every
    quorum queue (rabbit_quorum_queue:shrink_all/1: the groups count their majorities without
    it), then its member of every replicated stream (stream_membership.delete_all). A queue that
    cannot lose it (its last member, no majority to commit the change) makes the command fail
    with RabbitMQ's error, naming the kinds that failed as rabbitmqctl's does.

    Streams follow RabbitMQ 3.13, not 3.10: 3.10's forget_cluster_node_command.ex calls only
    rabbit_quorum_queue:shrink_all/1 and leaves the gone node in every stream's member list (its
    delete_replica then refuses it as node_not_running, so nothing can remove it); 3.13 added
    rabbit_stream_queue:delete_all_replicas/1 to the command (rabbitmq-server c241b36bf7)."""
    gone = a["node"]
    core.forget(gone)
    yield Apply(ForgetNodeQueues(gone), ADMIN_TIMEOUT)
    shrunk = yield from qm.shrink(core, {"node": gone, "errors_only": True})
    quorum = [f"{r['vhost']}/{r['name']}: {r['result']}" for r in shrunk["rows"]]
    streams = yield from stream_membership.delete_all(core, gone)
    kinds = [kind for kind, failed in (("Streams", streams), ("Quorum queues", quorum)) if failed]  # 3.13's order
    if kinds:
        core.emit(Log("node.forget_shrink_failed", "warning", (("node", gone), ("queues", quorum + streams))))
        return AdminError(f"Failed to shrink some entities on node {gone} : {', '.join(kinds)}", EX_UNAVAILABLE)
    return {"ok": True}


ADMIN: dict[str, Callable[[NodeCore, dict], Op]] = {
    "add_vhost": lambda core, a: admin_command(AddVhost(a["name"])),
    "delete_vhost": delete_vhost,
    "set_policy": lambda core, a: admin_command(SetPolicy(
        a.get("vhost", "/"), a["name"], a["pattern"], a["definition"], a.get("priority", 0),
        a.get("apply_to", "all"), a.get("operator", False))),
    "clear_policy": lambda core, a: admin_command(ClearPolicy(a.get("vhost", "/"), a["name"],
                                                              a.get("operator", False))),
    "purge_queue": purge_queue, "delete_queue": delete_queue,
    "forget_node_queues": forget_node,
    "declare_exchange": declare_exchange, "delete_exchange": delete_exchange,
    "declare_queue": declare_queue,
    "bind": _binding(AddBinding), "unbind": _binding(RemoveBinding),
    **qm.ADMIN_OPS, **access_admin.ADMIN_OPS, **streams.ADMIN_OPS,
    **stream_membership.ADMIN_OPS,
}
ADMIN_OPS = frozenset(ADMIN)
