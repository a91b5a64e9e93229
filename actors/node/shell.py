"""The node actor: owner of the registry (vhosts, exchanges, queues, bindings) and the one that
creates and deletes queue actors.

It is a shell: every decision about names, equivalence, bindings and errors is the Registry's
(metadata/). What the shell adds is orchestration, one request at a time in arrival order so
the registry sees a serial history: create the queue actor before answering declare-ok, ask the
queue whether delete's if-unused/if-empty hold before removing it, and publish every change to the
connection hosts' replicas BEFORE replying to the caller. The reply and the change travel the same
node->host pipe, so a channel that got declare-ok routes with a replica that has the queue.

Messages (actors/messages/node.py): the metadata calls of channels (answered with a Reply), Subscribe
from replicas (answered with the snapshot), AutoDeleteQueue from queues, ConnectionClosed from readers,
and the Replies to the node's own calls.

Admin operations (warrenctl, through the node host's control function) enter the same serial work
queue via `admin(op, args)`. Users, vhosts, permissions and policies live in the definitions file:
loaded at start (the default user with full permissions on "/" is created when there is no file;
a corrupt file stops the node rather than start it with the wrong users), rewritten after every
admin change and BEFORE the change is published or answered, so nothing acknowledged is lost.
Passwords are hashed here, with a salt from the OS; only hashes enter the registry.
Policies reach queues as `ApplyPolicy(settings)`: the queue's effective settings (its arguments met
with the policy, see metadata/policies.py), sent when a queue is created under a policy and
whenever a policy change alters what a queue's settings are. Deleting a vhost first asks each
connection host's admin actor to close the connections on it (320), then deletes its queues.
"""
from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import structlog

from metadata import definitions, passwords
from metadata.admin_errors import EX_SOFTWARE, AdminError
from metadata.changes import Bound, ExchangeCreated, ExchangeDeleted, QueueCreated, QueueDeleted, Unbound
from metadata.commands import ChangePassword, ClearPermissions, ClearPolicy, RemoveUser, SetUserTags
from metadata.policies import definition_json
from actors.node import definitions_file
from actors.messages.calls import Reply
from actors.messages.channel_queue import Purge
from actors.messages.node import (
    ApplyPolicy, AutoDeleteQueue, BindExchange, BindQueue, CloseConnections, ConnectionClosed, CreateQueue,
    DeclareExchange, DeclareQueue, DeleteExchange, DeleteQueue, Dispose, MetadataChanged, QueueDeclared,
    QueueHostRestarted, QueueStats, Subscribe, Sync, UnbindExchange, UnbindQueue,
)
from actors.messages.runtime import Undelivered
from actors.placement import QUEUE_ROUTER_NAME, ROUTER_NAME, queue_address, queue_host, queue_manager
from actors.runtime.address import Address
from wire.errors import CONNECTION_FORCED, INTERNAL_ERROR, NOT_FOUND, AmqpError

log = structlog.get_logger("warren.node")

CONNECTION_ADMIN_NAME = "conn-admin"  # the actor in each connection host that closes connections
DEFINITIONS_FILE = "definitions.json"


class DefinitionsCorrupt(RuntimeError):
    pass


def new_hash(password: str) -> str:
    return passwords.hash_password(password, os.urandom(passwords.salt_bytes))


@dataclass(frozen=True)
class AdminOp:
    """An admin command from warrenctl (through the node host's control function), in the work queue."""

    op: str
    args: dict


TOPOLOGY_CHANGES = (ExchangeCreated, ExchangeDeleted, QueueCreated, QueueDeleted, Bound, Unbound)


class NodeActor:
    def __init__(self, runtime: Any, name: str, registry: Any, queue_hosts: int, *,
                 data_dir: str | None = None, default_user: str = "guest", default_pass: str = "guest") -> None:
        self.runtime = runtime
        self.address = Address(runtime.host, name)
        self.registry = registry
        self.queue_hosts = queue_hosts
        self.subscribers: set[Address] = set()
        self._definitions = Path(data_dir) / DEFINITIONS_FILE if data_dir else None
        self._queue_settings: dict[tuple[str, str], dict] = {}  # what each queue was last sent
        self._saved: bytes | None = None  # the definitions file's current bytes
        self._queue_hosts_seen: set[str] = set()  # queue hosts whose replica subscribed already
        self._load_definitions(default_user, default_pass)
        self._pending: dict[int, asyncio.Future] = {}
        self._rid = 0
        self._work: asyncio.Queue = asyncio.Queue()
        self._task = asyncio.get_running_loop().create_task(self._worker())

    # ------------------------------------------------------------------ mailbox
    def receive(self, sender: Address, msg: Any) -> None:
        kind = type(msg)
        if kind is Reply:
            fut = self._pending.pop(msg.rid, None)
            if fut is not None and not fut.done():
                fut.set_result(msg)
        elif kind in _OPS:
            self._work.put_nowait((sender, msg))
        elif kind is Subscribe:
            self.subscribers.add(sender)
            self._send(sender, MetadataChanged(self.registry.snapshot(), []))
            if sender.name == QUEUE_ROUTER_NAME:
                if sender.host in self._queue_hosts_seen:
                    # it restarted: whatever was in flight to its old process is lost
                    for sub in self.subscribers:
                        if sub.name == ROUTER_NAME:
                            self._send(sub, QueueHostRestarted(sender.host))
                self._queue_hosts_seen.add(sender.host)
                self._recreate_queues(sender.host)
        elif kind is Undelivered:  # a call to a queue whose host is restarting: fail it, don't wait
            rid = getattr(msg.msg, "rid", None)
            fut = self._pending.pop(rid, None) if rid is not None else None
            if fut is not None and not fut.done():
                name = sender.name.split(":", 2)[-1]
                fut.set_result(Reply(rid, error=AmqpError(NOT_FOUND, f"queue '{name}' is down or inaccessible")))
        else:
            log.warning("node.unexpected_message", kind=kind.__name__)

    def _recreate_queues(self, host: str) -> None:
        """A queue host (re)started: give it an actor for every queue placed on it — durable queues
        after a node restart, all queues after a crash of that host alone."""
        for rec in self.registry.queues():
            if queue_host(rec.vhost, rec.name, self.queue_hosts) == host:
                self._send(queue_manager(host), CreateQueue(0, rec.vhost, rec.name, rec.auto_delete, rec.arguments,
                                                            rec.durable))
                self._queue_settings.pop((rec.vhost, rec.name), None)  # the new actor knows no policy yet
                self._send_policy(rec)

    def _load_definitions(self, default_user: str, default_pass: str) -> None:
        if self._definitions is None:
            return
        data = definitions_file.read_bytes(self._definitions)
        if data is None:
            self.registry.add_user(default_user, new_hash(default_pass), ["administrator"])
            self.registry.set_permissions(default_user, "/", ".*", ".*", ".*")
            self._save()
            log.info("node.default_user_created", user=default_user)
            return
        records = definitions.decode(data)
        if isinstance(records, definitions.DefinitionsError):
            raise DefinitionsCorrupt(f"{self._definitions}: {records.reason}")
        self.registry.load_definitions(records)

    def _save(self) -> None:
        """Write the definitions file if what it holds changed (a declare of a transient queue does
        not touch the disk; a durable one is on disk before declare-ok leaves)."""
        if self._definitions is None:
            return
        data = definitions.encode(self.registry.snapshot())
        if data != self._saved:
            definitions_file.write_atomic(self._definitions, data)
            self._saved = data

    async def admin(self, op: str, args: dict) -> Any:
        """Run admin `op` in turn with the channels' requests; a value, or {"error", "exit"}."""
        fut = asyncio.get_running_loop().create_future()
        self._work.put_nowait((fut, AdminOp(op, args)))
        result = await fut
        if isinstance(result, AdminError):
            return {"error": result.message, "exit": result.exit_code}
        await self._replicas_caught_up()
        if isinstance(result, Reply) and result.error is not None:
            return {"error": result.error.detail, "exit": EX_SOFTWARE}
        return result

    def _send(self, to: Address, msg: Any) -> None:
        self.runtime.send(to, msg, sender=self.address)

    async def _call(self, to: Address, request: Callable[[int], Any]) -> Reply:
        self._rid += 1
        fut = asyncio.get_running_loop().create_future()
        self._pending[self._rid] = fut
        self._send(to, request(self._rid))
        return await fut

    async def _replicas_caught_up(self) -> None:
        """Wait until every replica has applied what was published so far.

        Channels get their replies on the same pipe as the changes, so they need no wait; an admin
        command answers a different client (warrenctl), which may connect to any connection host
        right away — a user just added must be able to log in there."""
        if self.subscribers:
            await asyncio.gather(*(self._call(sub, Sync) for sub in list(self.subscribers)))

    def _publish(self, changes: list, gone: list[tuple[str, str]] = ()) -> None:
        if any(isinstance(c, TOPOLOGY_CHANGES) for c in changes):
            self._save()
        if changes or gone:
            for sub in self.subscribers:
                self._send(sub, MetadataChanged(changes, list(gone)))

    async def _worker(self) -> None:
        while True:
            sender, msg = await self._work.get()
            try:
                result = await _OPS[type(msg)](self, msg)
            except Exception:  # a bug in one request must not stop the node's metadata service
                log.exception("node.op_failed", op=type(msg).__name__)
                result = Reply(0, error=AmqpError(INTERNAL_ERROR, f"internal error in {type(msg).__name__}",
                                                  connection=True))
            if isinstance(sender, asyncio.Future):
                if not sender.done():
                    sender.set_result(result)
            elif hasattr(msg, "rid"):  # a call (queue auto-delete and connection close are not)
                self._send(sender, Reply(msg.rid, result.value, result.error))

    # ------------------------------------------------------------------ operations
    @staticmethod
    def _answer(result: Any, value: Any = None) -> Reply:
        return Reply(0, error=result) if isinstance(result, AmqpError) else Reply(0, value)

    async def _op_exchange_declare(self, x: DeclareExchange) -> Reply:
        res, changes = self.registry.declare_exchange(x.vhost, x.exchange, x.type, passive=x.passive,
                                                      durable=x.durable, auto_delete=x.auto_delete,
                                                      internal=x.internal, arguments=x.arguments)
        self._publish(changes)
        return self._answer(res)

    async def _op_exchange_delete(self, x: DeleteExchange) -> Reply:
        res, changes = self.registry.delete_exchange(x.vhost, x.exchange, if_unused=x.if_unused)
        self._publish(changes)
        return self._answer(res)

    async def _op_exchange_bind(self, x: BindExchange) -> Reply:
        res, changes = self.registry.bind_exchange(x.vhost, x.destination, x.source, x.routing_key, x.arguments)
        self._publish(changes)
        return self._answer(res)

    async def _op_exchange_unbind(self, x: UnbindExchange) -> Reply:
        res, changes = self.registry.unbind_exchange(x.vhost, x.destination, x.source, x.routing_key, x.arguments)
        self._publish(changes)
        return self._answer(res)

    async def _op_queue_bind(self, x: BindQueue) -> Reply:
        res, changes = self.registry.bind_queue(x.vhost, x.queue, x.exchange, x.routing_key, x.arguments, x.owner)
        self._publish(changes)
        return self._answer(res)

    async def _op_queue_unbind(self, x: UnbindQueue) -> Reply:
        res, changes = self.registry.unbind_queue(x.vhost, x.queue, x.exchange, x.routing_key, x.arguments, x.owner)
        self._publish(changes)
        return self._answer(res)

    async def _op_queue_declare(self, x: DeclareQueue) -> Reply:
        vhost = x.vhost
        rec, changes = self.registry.declare_queue(vhost, x.queue, passive=x.passive, durable=x.durable,
                                                   exclusive=x.exclusive, auto_delete=x.auto_delete,
                                                   arguments=x.arguments, owner=x.owner)
        if isinstance(rec, AmqpError):
            return Reply(0, error=rec)
        if rec.created:
            host = queue_host(vhost, rec.name, self.queue_hosts)
            await self._call(queue_manager(host), lambda rid: CreateQueue(rid, vhost, rec.name, rec.auto_delete,
                                                                          rec.arguments, rec.durable))
            self._send_policy(rec)
            self._publish(changes)
            return Reply(0, QueueDeclared(rec.name, 0, 0))
        self._publish(changes)
        stats = await self._call(queue_address(vhost, rec.name, self.queue_hosts), QueueStats)
        if not stats.ok:
            return stats
        return Reply(0, QueueDeclared(rec.name, stats.value.messages, stats.value.consumers))

    async def _delete_record(self, rec: Any, if_unused: bool, if_empty: bool) -> Reply:
        vhost, name = rec.vhost, rec.name
        reply = await self._call(queue_address(vhost, name, self.queue_hosts),
                                 lambda rid: Dispose(rid, if_unused, if_empty))
        if not reply.ok:
            return reply
        res, changes = self.registry.delete_queue(vhost, name, rec.exclusive_owner)
        self._queue_settings.pop((vhost, name), None)
        self._publish(changes, [(vhost, name)])
        return reply

    async def _op_queue_delete(self, x: DeleteQueue) -> Reply:
        rec = self.registry.check_queue_access(x.vhost, x.queue, x.owner)
        if isinstance(rec, AmqpError):
            # deleting a queue that does not exist is not an error in RabbitMQ
            return Reply(0, 0) if rec.code == NOT_FOUND else Reply(0, error=rec)
        return await self._delete_record(rec, x.if_unused, x.if_empty)

    async def _op_queue_autodelete(self, x: AutoDeleteQueue) -> Reply:
        rec = next((q for q in self.registry.queues(x.vhost) if q.name == x.name), None)
        if rec is None:
            return Reply(0, 0)
        return await self._delete_record(rec, True, False)

    async def _op_connection_closed(self, x: ConnectionClosed) -> Reply:
        records, changes = self.registry.connection_closed(x.owner)
        for rec in records:
            self._queue_settings.pop((rec.vhost, rec.name), None)
            await self._call(queue_address(rec.vhost, rec.name, self.queue_hosts), lambda rid: Dispose(rid, False, False))
        self._publish(changes, [(rec.vhost, rec.name) for rec in records])
        return Reply(0)

    async def _op_admin(self, x: AdminOp) -> Any:
        return await getattr(self, "_op_admin_" + x.op)(x.args)

    # ------------------------------------------------------------------ policies to queues
    def _send_policy(self, rec: Any) -> None:
        """Tell the queue its effective settings when they differ from what it was last told
        (a new queue starts from its arguments, which is what "no policy" means)."""
        policy, operator, settings = self.registry.queue_policy(rec)
        key = (rec.vhost, rec.name)
        last = self._queue_settings.get(key)
        if last is None and not (policy or operator):
            return
        if settings != last:
            self._queue_settings[key] = settings
            self._send(queue_address(rec.vhost, rec.name, self.queue_hosts), ApplyPolicy(settings))

    def _policies_changed(self, vhost: str) -> None:
        for rec in self.registry.queues(vhost):
            self._send_policy(rec)

    # ------------------------------------------------------------------ admin operations
    def _connection_hosts(self) -> list[Address]:
        """The subscribers that are connection hosts' routers (queue hosts subscribe too)."""
        return [sub for sub in self.subscribers if sub.name == ROUTER_NAME]

    def _admin_done(self, result: Any, changes: list) -> Any:
        """Persist, then publish: an admin change is on disk before anyone acts on it."""
        if changes:
            self._save()
            self._publish(changes)
        return {"ok": True} if result is None else result

    async def _op_admin_add_user(self, a: dict) -> Any:
        return self._admin_done(*self.registry.add_user(a["name"], new_hash(a["password"]), a.get("tags", ())))

    async def _op_admin_delete_user(self, a: dict) -> Any:
        return self._admin_done(*self.registry.apply_command(RemoveUser(a["name"])))

    async def _op_admin_change_password(self, a: dict) -> Any:
        return self._admin_done(*self.registry.apply_command(ChangePassword(a["name"], new_hash(a["password"]))))

    async def _op_admin_set_user_tags(self, a: dict) -> Any:
        return self._admin_done(*self.registry.apply_command(SetUserTags(a["name"], tuple(a.get("tags", ())))))

    async def _op_admin_set_permissions(self, a: dict) -> Any:
        return self._admin_done(*self.registry.set_permissions(a["user"], a.get("vhost", "/"), a["configure"],
                                                               a["write"], a["read"]))

    async def _op_admin_clear_permissions(self, a: dict) -> Any:
        return self._admin_done(*self.registry.apply_command(ClearPermissions(a["user"], a.get("vhost", "/"))))

    async def _op_admin_add_vhost(self, a: dict) -> Any:
        return self._admin_done(*self.registry.add_vhost(a["name"]))

    async def _op_admin_delete_vhost(self, a: dict) -> Any:
        vhost = a["name"]
        if not self.registry.vhost_exists(vhost):
            return self.registry.delete_vhost(vhost)[0]
        for sub in self._connection_hosts():
            self._send(Address(sub.host, CONNECTION_ADMIN_NAME),
                       CloseConnections(vhost, None, CONNECTION_FORCED, f"vhost '{vhost}' is deleted"))
        gone, changes = self.registry.delete_vhost(vhost)
        for rec in gone:
            await self._call(queue_address(rec.vhost, rec.name, self.queue_hosts), lambda rid: Dispose(rid, False, False))
            self._queue_settings.pop((rec.vhost, rec.name), None)
        self._save()
        self._publish(changes, [(rec.vhost, rec.name) for rec in gone])
        return {"ok": True}

    async def _op_admin_set_policy(self, a: dict) -> Any:
        vhost = a.get("vhost", "/")
        res, changes = self.registry.set_policy(vhost, a["name"], a["pattern"], a["definition"],
                                                priority=a.get("priority", 0), apply_to=a.get("apply_to", "all"),
                                                operator=a.get("operator", False))
        result = self._admin_done(res, changes)
        if changes:
            self._policies_changed(vhost)
        return result

    async def _op_admin_clear_policy(self, a: dict) -> Any:
        vhost = a.get("vhost", "/")
        res, changes = self.registry.apply_command(ClearPolicy(vhost, a["name"], a.get("operator", False)))
        result = self._admin_done(res, changes)
        if changes:
            self._policies_changed(vhost)
        return result

    async def _op_admin_purge_queue(self, a: dict) -> Any:
        rec = self._find_queue(a.get("vhost", "/"), a["name"])
        if isinstance(rec, AdminError):
            return rec
        reply = await self._call(queue_address(rec.vhost, rec.name, self.queue_hosts), Purge)
        return {"messages": reply.value} if reply.ok else AdminError(reply.error.detail)

    async def _op_admin_delete_queue(self, a: dict) -> Any:
        rec = self._find_queue(a.get("vhost", "/"), a["name"])
        if isinstance(rec, AdminError):
            return rec
        reply = await self._delete_record(rec, a.get("if_unused", False), a.get("if_empty", False))
        return {"messages": reply.value} if reply.ok else AdminError(reply.error.detail)

    def _find_queue(self, vhost: str, name: str) -> Any:
        if not self.registry.vhost_exists(vhost):
            return AdminError(f"Virtual host '{vhost}' does not exist", 65)
        rec = next((q for q in self.registry.queues(vhost) if q.name == name), None)
        return rec if rec is not None else AdminError(f"Queue '{name}' in vhost '{vhost}' does not exist")

    # ------------------------------------------------------------------ admin listings (read-only)
    def listing(self, op: str, args: dict) -> Any:
        """Answers that need no turn in the work queue: they read the registry as it stands."""
        reg = self.registry
        vhost = args.get("vhost")
        if op == "list_vhosts":
            return [{"name": v} for v in reg.vhosts()]
        if op == "list_users":
            return [{"user": u.name, "tags": list(u.tags)} for u in reg.users()]
        if op == "list_permissions":
            return [{"user": p.user, "vhost": p.vhost, "configure": p.configure, "write": p.write,
                     "read": p.read} for p in reg.permissions(vhost=vhost, user=args.get("user"))]
        if op in ("list_policies", "list_operator_policies"):
            return [{"vhost": p.vhost, "name": p.name, "pattern": p.pattern, "apply-to": p.apply_to,
                     "definition": definition_json(p), "priority": p.priority}
                    for p in reg.policies(vhost, operator=op == "list_operator_policies")]
        if op == "list_exchanges":
            return [{"vhost": x.vhost, "name": x.name, "type": x.type, "durable": x.durable,
                     "auto_delete": x.auto_delete, "internal": x.internal, "arguments": _printable(x.arguments),
                     "policy": reg.exchange_policy_name(x.vhost, x.name)} for x in reg.exchanges(vhost)]
        if op == "list_bindings":
            return [{"vhost": b.vhost, "source_name": b.source, "source_kind": "exchange",
                     "destination_name": b.destination, "destination_kind": b.destination_kind,
                     "routing_key": b.routing_key, "arguments": _printable(b.arguments)}
                    for b in reg.bindings(vhost)] + [
                    {"vhost": q.vhost, "source_name": "", "source_kind": "exchange", "destination_name": q.name,
                     "destination_kind": "queue", "routing_key": q.name, "arguments": {}}
                    for q in reg.queues(vhost)]
        if op == "queue_policies":
            out = []
            for q in reg.queues(vhost):
                policy, operator, settings = reg.queue_policy(q)
                out.append({"vhost": q.vhost, "name": q.name, "policy": policy, "operator_policy": operator,
                            "effective_policy_definition": settings, "durable": q.durable,
                            "auto_delete": q.auto_delete, "exclusive": q.exclusive_owner is not None,
                            "arguments": _printable(q.arguments)})
            return out
        if op == "status":
            return {"vhosts": len(reg.vhosts()), "users": len(reg.users()), "queues": len(reg.queues()),
                    "exchanges": len(reg.exchanges()), "queue_hosts": self.queue_hosts,
                    "connection_hosts": sorted(sub.host for sub in self._connection_hosts()), "pid": os.getpid()}
        return {"error": f"unknown op {op!r}", "exit": 64}


def _printable(args: dict) -> dict:
    """Field-table values as JSON can carry them (bytes as text)."""
    return {k: (v.decode("utf-8", "replace") if isinstance(v, bytes) else v if isinstance(v, (str, int, float, bool))
                or v is None else repr(v)) for k, v in args.items()}


_OPS = {DeclareExchange: NodeActor._op_exchange_declare, DeleteExchange: NodeActor._op_exchange_delete,
        BindExchange: NodeActor._op_exchange_bind, UnbindExchange: NodeActor._op_exchange_unbind,
        DeclareQueue: NodeActor._op_queue_declare, DeleteQueue: NodeActor._op_queue_delete,
        BindQueue: NodeActor._op_queue_bind, UnbindQueue: NodeActor._op_queue_unbind,
        AutoDeleteQueue: NodeActor._op_queue_autodelete, ConnectionClosed: NodeActor._op_connection_closed,
        AdminOp: NodeActor._op_admin}
