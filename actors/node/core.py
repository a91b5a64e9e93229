"""NodeCore: the node's decisions about the cluster's metadata, as a pure core.

Theory of operation. The node owns the authoritative registry (metadata/) and is the one that
creates and deletes queue actors. Its inputs are typed messages (actors/messages/node.py: the
channels' metadata calls, `Subscribe` from the hosts' registry replicas, `AutoDeleteQueue` from
queues, `ConnectionClosed` from readers, the `Reply`s to its own calls, `Undelivered`) and admin
asks from warrenctl; its outputs are effects (effects/): `Send`, `Log`, `SaveDefinitions`,
`AnswerAdmin`.

- Serial order. Requests are served one at a time, in arrival order, so the registry sees a serial
  history. Each is an operation: a generator (a continuation) that yields steps, `Apply(cmd)` (run
  one of the registry machine's commands, metadata/commands.py) and `Ask(to, request, ...)` (a
  call to a queue or a queue host). `Apply` is carried out at once today; issue 11 makes it a
  proposal to the metadata Raft group, resumed when committed, and nothing else changes. An `Ask`
  sends `request(rid)` and the operation resumes when the `Reply` with that rid arrives (or, when
  the target does not exist, with the step's `unreachable` error); later requests wait behind it.
  An operation that raises is answered with 541 INTERNAL_ERROR and the node goes on serving.
- Order of effects for one change: `SaveDefinitions` (when the definitions file's bytes change),
  then `MetadataChanged` to every subscriber, then the reply. The reply and the change travel the
  same node->host pipe, so a channel that got declare-ok routes with a replica that has the queue.
- Queue lifecycle. declare creates the queue actor (`CreateQueue`, waiting for its reply) and tells
  it its policy before declare-ok; delete asks the queue first (`Dispose`: if-unused / if-empty are
  the queue's to check) and removes the record only when it agreed; a connection's close removes
  its exclusive queues and disposes of their actors. A queue host's replica subscribing means that
  host (re)started: it is given an actor for every queue placed on it, and if it had subscribed
  before, the connection hosts hear `QueueHostRestarted` (what was in flight to it is lost).
- Policies reach queues as `ApplyPolicy(settings)`, sent when a queue is created under a policy
  and whenever a change alters a queue's effective settings (remembered per queue).
- Admin asks take their turn in the same order. A change is answered only after every replica
  confirmed (`Sync`) that it applied it, because warrenctl's next command may go to any host; an
  admin error is answered at once. Passwords are hashed here with a salt from the injected `salt`
  source; only hashes enter commands. Deleting a vhost first asks each connection host's admin actor
  to close the connections on it (320), then deletes its queues.

Left out: a call in flight to a host that dies without the runtime answering `Undelivered` is
waited for (the operation stays in progress); clustering (issue 11).
"""
from __future__ import annotations

import traceback
from collections import deque
from collections.abc import Callable, Generator, Hashable
from dataclasses import dataclass
from typing import Any

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
from effects import AnswerAdmin, Effect, Log, SaveDefinitions, Send
from metadata import definitions, names, passwords
from metadata.admin_errors import EX_SOFTWARE, AdminError, no_vhost
from metadata.commands import (
    AddBinding, AddUser, AddVhost, ChangePassword, ClearPermissions, ClearPolicy, Command, PutExchange, PutQueue,
    RemoveBinding, RemoveExchange, RemoveOwnedQueues, RemoveQueue, RemoveUser, RemoveVhost, SetPermissions,
    SetPolicy, SetUserTags,
)
from metadata.records import EXCHANGE, QUEUE, QueueRecord
from metadata.registry import Registry
from wire.errors import CONNECTION_FORCED, INTERNAL_ERROR, NOT_FOUND, AmqpError

CONNECTION_ADMIN_NAME = "conn-admin"  # the actor in each connection host that closes connections


class DefinitionsCorrupt(RuntimeError):
    """The definitions file does not decode: the node must not start with the wrong users."""


@dataclass(frozen=True, slots=True)
class Apply:
    """An operation's step: apply `cmd` to the registry; resumes with (result, changes)."""

    cmd: Command


@dataclass(frozen=True, slots=True)
class Ask:
    """An operation's step: send `request(rid)` to `to`; resumes with the Reply, or with a Reply
    carrying `unreachable` when the target does not exist."""

    to: Address
    request: Callable[[int], Any]
    unreachable: AmqpError


@dataclass(frozen=True, slots=True)
class AdminAsk:
    """An admin command from warrenctl, in the serial order with the channels' requests."""

    ask: Hashable
    op: str
    args: dict[str, Any]


Op = Generator[Apply | Ask, Any, Any]
Origin = Address | None  # who sent a request (None for an admin ask)


def _down(name: str) -> AmqpError:
    return AmqpError(NOT_FOUND, f"queue '{name}' is down or inaccessible")


class NodeCore:
    def __init__(self, registry: Registry, queue_hosts: int, *, salt: Callable[[int], bytes],
                 persist: bool) -> None:
        self.registry = registry
        self.queue_hosts = queue_hosts
        self._salt = salt  # n -> n random bytes (the OS's, in the shell)
        self._persist = persist  # keep the definitions file (a node with a data dir)
        self.subscribers: dict[Address, None] = {}  # replicas, in subscription order
        self._queue_hosts_seen: set[str] = set()  # queue hosts whose replica subscribed already
        self._queue_settings: dict[tuple[str, str], dict] = {}  # what each queue was last sent
        self._saved: bytes | None = None  # the definitions file's current bytes
        self._work: deque[tuple[Origin, Any]] = deque()
        self._running: tuple[Origin, Any, Op] | None = None
        self._calls: dict[int, tuple[Callable[[Reply], None], AmqpError]] = {}  # rid -> resume, unreachable
        self._syncs: dict[Hashable, tuple[set[int], Any]] = {}  # admin ask -> Syncs awaited, its result
        self._rid = 0  # 0 is never a call's rid: fire-and-forget requests carry it
        self._out: list[Effect] = []

    # ------------------------------------------------------------------ inputs
    def start(self, saved: bytes | None, default_user: str, default_pass: str) -> list[Effect]:
        """Load the definitions file's bytes (None: there is none yet, so the default user is made,
        with full permissions on "/"). Raises DefinitionsCorrupt for a file that does not decode."""
        if not self._persist:
            return []
        if saved is None:
            self.registry.apply_command(AddUser(default_user, self._hash(default_pass), ("administrator",)))
            self.registry.apply_command(SetPermissions(default_user, "/", ".*", ".*", ".*"))
            self._save()
            self._out.append(Log("node.default_user_created", fields=(("user", default_user),)))
            return self._flush()
        records = definitions.decode(saved)
        if isinstance(records, definitions.DefinitionsError):
            raise DefinitionsCorrupt(records.reason)
        self.registry.load_definitions(records)
        return []

    def receive(self, sender: Address, msg: Any) -> list[Effect]:
        kind = type(msg)
        if kind is Reply:
            call = self._calls.pop(msg.rid, None)
            if call is not None:
                call[0](msg)
        elif kind in _OPS:
            self._work.append((sender, msg))
            self._pump()
        elif kind is Subscribe:
            self._subscribe(sender)
        elif kind is Undelivered:  # a call to an actor that does not exist (its host is restarting)
            rid = getattr(msg.msg, "rid", None)
            call = self._calls.pop(rid, None) if rid else None
            if call is not None:
                call[0](Reply(rid, error=call[1]))
        else:
            self._out.append(Log("node.unexpected_message", "warning", (("kind", kind.__name__),)))
        return self._flush()

    def admin(self, ask: Hashable, op: str, args: dict[str, Any]) -> list[Effect]:
        """An admin command (one of ADMIN_OPS); answered later with AnswerAdmin(ask, value)."""
        self._work.append((None, AdminAsk(ask, op, args)))
        self._pump()
        return self._flush()

    def connection_hosts(self) -> list[Address]:
        """The subscribers that are connection hosts' routers (queue hosts subscribe too)."""
        return [sub for sub in self.subscribers if sub.name == ROUTER_NAME]

    # ------------------------------------------------------------------ the serial order
    def _flush(self) -> list[Effect]:
        out, self._out = self._out, []
        return out

    def _pump(self) -> None:
        while self._running is None and self._work:
            origin, msg = self._work.popleft()
            self._running = (origin, msg, _OPS[type(msg)](self, msg))
            self._advance(None)

    def _advance(self, value: Any) -> None:
        """Run the current operation until it asks someone or finishes."""
        assert self._running is not None
        origin, msg, op = self._running
        try:
            while True:
                step = op.send(value)
                if type(step) is Apply:
                    value = self.registry.apply_command(step.cmd)
                    continue
                self._rid += 1
                self._calls[self._rid] = (self._resume, step.unreachable)
                self._out.append(Send(step.to, step.request(self._rid)))
                return
        except StopIteration as done:
            result = done.value
        except Exception:  # a bug in one request must not stop the node's metadata service
            self._out.append(Log("node.op_failed", "error", (("op", type(msg).__name__),
                                                             ("traceback", traceback.format_exc()))))
            name = "AdminOp" if type(msg) is AdminAsk else type(msg).__name__
            result = AmqpError(INTERNAL_ERROR, f"internal error in {name}", connection=True)
        self._running = None
        self._answer(origin, msg, result)

    def _resume(self, reply: Reply) -> None:
        self._advance(reply)
        self._pump()

    def _answer(self, origin: Origin, msg: Any, result: Any) -> None:
        if type(msg) is AdminAsk:
            self._admin_done(msg.ask, result)
        elif hasattr(msg, "rid"):  # a call (queue auto-delete and connection close are not)
            assert origin is not None
            reply = Reply(msg.rid, error=result) if isinstance(result, AmqpError) else Reply(msg.rid, result)
            self._out.append(Send(origin, reply))

    # ------------------------------------------------------------------ publication
    def _save(self) -> None:
        """Rewrite the definitions file if what it holds changed (a declare of a transient queue does
        not touch the disk; a durable one is on disk before declare-ok leaves)."""
        if not self._persist:
            return
        data = definitions.encode(self.registry.snapshot())
        if data != self._saved:
            self._out.append(SaveDefinitions(data))
            self._saved = data

    def _publish(self, changes: list, gone: list[tuple[str, str]] = ()) -> None:
        """Persist, then tell every replica: a change is on disk before anyone acts on it."""
        if changes:
            self._save()
        if changes or gone:
            for sub in self.subscribers:
                self._out.append(Send(sub, MetadataChanged(changes, list(gone))))

    def _command(self, cmd: Command) -> Op:
        """Apply one command and publish what it changed; its result."""
        result, changes = yield Apply(cmd)
        self._publish(changes)
        return result

    # ------------------------------------------------------------------ replicas and queue hosts
    def _subscribe(self, sender: Address) -> None:
        self.subscribers[sender] = None
        self._out.append(Send(sender, MetadataChanged(self.registry.snapshot(), [])))
        if sender.name != QUEUE_ROUTER_NAME:
            return
        host = sender.host
        if host in self._queue_hosts_seen:
            for sub in self.connection_hosts():
                self._out.append(Send(sub, QueueHostRestarted(host)))
        self._queue_hosts_seen.add(host)
        # durable queues after a node restart, all queues after a crash of that host alone
        for rec in self.registry.queues():
            if queue_host(rec.vhost, rec.name, self.queue_hosts) == host:
                self._out.append(Send(queue_manager(host), CreateQueue(0, rec.vhost, rec.name, rec.auto_delete,
                                                                       rec.arguments, rec.durable)))
                self._queue_settings.pop((rec.vhost, rec.name), None)  # the new actor knows no policy yet
                self._send_policy(rec)

    def _send_policy(self, rec: QueueRecord) -> None:
        """Tell the queue its effective settings when they differ from what it was last told
        (a new queue starts from its arguments, which is what "no policy" means)."""
        policy, operator, settings = self.registry.queue_policy(rec)
        key = (rec.vhost, rec.name)
        last = self._queue_settings.get(key)
        if last is None and not (policy or operator):
            return
        if settings != last:
            self._queue_settings[key] = settings
            self._out.append(Send(self._queue(rec), ApplyPolicy(settings)))

    def _queue(self, rec: QueueRecord) -> Address:
        return queue_address(rec.vhost, rec.name, self.queue_hosts)

    # ------------------------------------------------------------------ channels' requests
    def _exchange_declare(self, x: DeclareExchange) -> Op:
        if x.passive:
            return self.registry.check_exchange(x.vhost, x.exchange)
        return (yield from self._command(PutExchange(x.vhost, x.exchange, x.type, x.durable, x.auto_delete,
                                                     x.internal, x.arguments)))

    def _queue_declare(self, x: DeclareQueue) -> Op:
        changes: list = []
        if x.passive:
            rec = self.registry.check_queue_access(x.vhost, x.queue, x.owner)
        else:
            name, server_named = x.queue, names.strip_cr_lf(x.queue) == ""
            if server_named:
                name = self.registry.fresh_queue_name(x.vhost)
            rec, changes = yield Apply(PutQueue(x.vhost, name, x.durable, x.exclusive, x.auto_delete, x.arguments,
                                                x.owner, server_named))
        if isinstance(rec, AmqpError):
            return rec
        if rec.created:
            host = queue_host(rec.vhost, rec.name, self.queue_hosts)
            yield Ask(queue_manager(host), lambda rid: CreateQueue(rid, rec.vhost, rec.name, rec.auto_delete,
                                                                   rec.arguments, rec.durable), _down(rec.name))
            self._send_policy(rec)
            self._publish(changes)
            return QueueDeclared(rec.name, 0, 0)
        stats = yield Ask(self._queue(rec), QueueStats, _down(rec.name))
        if not stats.ok:
            return stats.error
        return QueueDeclared(rec.name, stats.value.messages, stats.value.consumers)

    def _queue_delete(self, x: DeleteQueue) -> Op:
        rec = self.registry.check_queue_access(x.vhost, x.queue, x.owner)
        if isinstance(rec, AmqpError):
            # deleting a queue that does not exist is not an error in RabbitMQ
            return 0 if rec.code == NOT_FOUND else rec
        return (yield from self._delete_queue(rec, x.if_unused, x.if_empty))

    def _queue_auto_delete(self, x: AutoDeleteQueue) -> Op:
        rec = self._find_queue(x.vhost, x.name)
        if rec is None:
            return 0
        return (yield from self._delete_queue(rec, True, False))

    def _delete_queue(self, rec: QueueRecord, if_unused: bool, if_empty: bool) -> Op:
        """The queue agrees (it checks if-unused / if-empty) and is gone, then the record: its count."""
        reply = yield Ask(self._queue(rec), lambda rid: Dispose(rid, if_unused, if_empty), _down(rec.name))
        if not reply.ok:
            return reply.error
        _, changes = yield Apply(RemoveQueue(rec.vhost, rec.name, rec.exclusive_owner))
        self._queue_settings.pop((rec.vhost, rec.name), None)
        self._publish(changes, [(rec.vhost, rec.name)])
        return reply.value

    def _connection_closed(self, x: ConnectionClosed) -> Op:
        records, changes = yield Apply(RemoveOwnedQueues(x.owner))
        yield from self._dispose_all(records)
        self._publish(changes, [(rec.vhost, rec.name) for rec in records])

    def _dispose_all(self, records: list[QueueRecord]) -> Op:
        """The actors of queues whose records are gone, one after the other."""
        for rec in records:
            self._queue_settings.pop((rec.vhost, rec.name), None)
            yield Ask(self._queue(rec), lambda rid: Dispose(rid, False, False), _down(rec.name))

    def _find_queue(self, vhost: str, name: str) -> QueueRecord | None:
        return next((q for q in self.registry.queues(vhost) if q.name == name), None)

    # ------------------------------------------------------------------ admin commands
    def _admin(self, a: AdminAsk) -> Op:
        return (yield from _ADMIN[a.op](self, a.args))

    def _admin_done(self, ask: Hashable, result: Any) -> None:
        """Errors at once; anything else once every replica has applied what was published so far."""
        if isinstance(result, AdminError):
            self._out.append(AnswerAdmin(ask, {"error": result.message, "exit": result.exit_code}))
            return
        if isinstance(result, AmqpError):  # the code lets the HTTP API answer as RabbitMQ's does
            self._out.append(AnswerAdmin(ask, {"error": result.detail, "exit": EX_SOFTWARE, "code": result.code}))
            return
        rids: set[int] = set()
        self._syncs[ask] = (rids, result)
        for sub in self.subscribers:
            self._rid += 1
            rids.add(self._rid)
            self._calls[self._rid] = (lambda reply, ask=ask: self._synced(ask, reply.rid),
                                      AmqpError(NOT_FOUND, f"replica {sub} is down"))
            self._out.append(Send(sub, Sync(self._rid)))
        if not rids:
            self._synced(ask, None)

    def _synced(self, ask: Hashable, rid: int | None) -> None:
        rids, result = self._syncs[ask]
        rids.discard(rid)
        if not rids:
            del self._syncs[ask]
            self._out.append(AnswerAdmin(ask, result))

    def _admin_command(self, cmd: Command) -> Op:
        result = yield from self._command(cmd)
        return {"ok": True} if result is None else result

    def _hash(self, password: str) -> str:
        return passwords.hash_password(password, self._salt(passwords.salt_bytes))

    def _set_policy(self, a: dict) -> Op:
        vhost = a.get("vhost", "/")
        result = yield from self._admin_command(SetPolicy(vhost, a["name"], a["pattern"], a["definition"],
                                                          a.get("priority", 0), a.get("apply_to", "all"),
                                                          a.get("operator", False)))
        self._policies_changed(vhost, result)
        return result

    def _clear_policy(self, a: dict) -> Op:
        vhost = a.get("vhost", "/")
        result = yield from self._admin_command(ClearPolicy(vhost, a["name"], a.get("operator", False)))
        self._policies_changed(vhost, result)
        return result

    def _policies_changed(self, vhost: str, result: Any) -> None:
        if not isinstance(result, AdminError):
            for rec in self.registry.queues(vhost):
                self._send_policy(rec)

    def _delete_vhost(self, a: dict) -> Op:
        vhost = a["name"]
        if not self.registry.vhost_exists(vhost):
            return no_vhost(vhost)
        for sub in self.connection_hosts():
            self._out.append(Send(Address(sub.host, CONNECTION_ADMIN_NAME),
                                  CloseConnections(vhost, None, CONNECTION_FORCED, f"vhost '{vhost}' is deleted")))
        gone, changes = yield Apply(RemoveVhost(vhost))
        yield from self._dispose_all(gone)
        self._publish(changes, [(rec.vhost, rec.name) for rec in gone])
        return {"ok": True}

    def _purge_queue(self, a: dict) -> Op:
        rec = self._admin_queue(a)
        if isinstance(rec, AdminError):
            return rec
        reply = yield Ask(self._queue(rec), Purge, _down(rec.name))
        return {"messages": reply.value} if reply.ok else AdminError(reply.error.detail)

    def _delete_queue_admin(self, a: dict) -> Op:
        rec = self._admin_queue(a)
        if isinstance(rec, AdminError):
            return rec
        result = yield from self._delete_queue(rec, a.get("if_unused", False), a.get("if_empty", False))
        return AdminError(result.detail) if isinstance(result, AmqpError) else {"messages": result}

    # the HTTP API's declarations: the channels' operations, with no connection behind them
    def _declare_exchange_admin(self, a: dict) -> Op:
        result = yield from self._exchange_declare(DeclareExchange(
            0, a.get("vhost", "/"), a["name"], a["type"], False, a.get("durable", True), a.get("auto_delete", False),
            a.get("internal", False), dict(a.get("arguments") or {})))
        return result if isinstance(result, AmqpError) else {"ok": True}

    def _delete_exchange_admin(self, a: dict) -> Op:
        return (yield from self._admin_command(RemoveExchange(a.get("vhost", "/"), a["name"],
                                                              a.get("if_unused", False))))

    def _declare_queue_admin(self, a: dict) -> Op:
        result = yield from self._queue_declare(DeclareQueue(
            0, a.get("vhost", "/"), a["name"], False, a.get("durable", True), False, a.get("auto_delete", False),
            dict(a.get("arguments") or {}), None))
        return result if isinstance(result, AmqpError) else {"ok": True}

    def _binding_admin(self, command: type, a: dict) -> Op:
        return (yield from self._admin_command(command(a.get("vhost", "/"), a["destination_kind"], a["destination"],
                                                       a["source"], a.get("routing_key", ""),
                                                       dict(a.get("arguments") or {}))))

    def _put_user(self, a: dict) -> Op:
        """Create or update a user from a password or a ready hash (definitions carry hashes)."""
        name, tags = a["name"], tuple(a.get("tags", ()))
        digest = a.get("password_hash")
        if digest is None:
            digest = self._hash(a["password"]) if a.get("password") is not None else ""
        if not any(u.name == name for u in self.registry.users()):
            return (yield from self._admin_command(AddUser(name, digest, tags)))
        if a.get("password") is not None or a.get("password_hash") is not None:
            yield from self._command(ChangePassword(name, digest))
        return (yield from self._admin_command(SetUserTags(name, tags)))

    def _import_definitions(self, a: dict) -> Op:
        """RabbitMQ's definitions document, applied in dependency order; the first error stops it."""
        d = a["definitions"]
        steps: list[tuple[Callable[[NodeCore, dict], Op], dict]] = []
        steps += [(_ADMIN["add_vhost"], {"name": v["name"]}) for v in d.get("vhosts", [])]
        steps += [(NodeCore._put_user, {"name": u["name"], "password_hash": u.get("password_hash", ""),
                                        "tags": _tags(u.get("tags", ""))}) for u in d.get("users", [])]
        steps += [(_ADMIN["set_permissions"], p) for p in d.get("permissions", [])]
        steps += [(NodeCore._set_policy, {"vhost": p["vhost"], "name": p["name"], "pattern": p["pattern"],
                                          "definition": p["definition"], "priority": p.get("priority", 0),
                                          "apply_to": p.get("apply-to", "all")}) for p in d.get("policies", [])]
        steps += [(NodeCore._declare_exchange_admin, x) for x in d.get("exchanges", [])]
        steps += [(NodeCore._declare_queue_admin, q) for q in d.get("queues", [])]
        steps += [(lambda core, b: core._binding_admin(AddBinding, b),
                   {**b, "destination_kind": b.get("destination_type", "queue")}) for b in d.get("bindings", [])]
        for op, args in steps:
            result = yield from op(self, args)
            if isinstance(result, (AdminError, AmqpError)):
                return result
        return {"ok": True}

    def _admin_queue(self, a: dict) -> QueueRecord | AdminError:
        vhost, name = a.get("vhost", "/"), a["name"]
        if not self.registry.vhost_exists(vhost):
            return no_vhost(vhost)
        rec = self._find_queue(vhost, name)
        return rec if rec is not None else AdminError(f"Queue '{name}' in vhost '{vhost}' does not exist")


# the channels' calls that are one registry command each, as that command
_COMMANDS: dict[type, Callable[[Any], Command]] = {
    DeleteExchange: lambda x: RemoveExchange(x.vhost, x.exchange, x.if_unused),
    BindExchange: lambda x: AddBinding(x.vhost, EXCHANGE, x.destination, x.source, x.routing_key, x.arguments),
    UnbindExchange: lambda x: RemoveBinding(x.vhost, EXCHANGE, x.destination, x.source, x.routing_key, x.arguments),
    BindQueue: lambda x: AddBinding(x.vhost, QUEUE, x.queue, x.exchange, x.routing_key, x.arguments, x.owner),
    UnbindQueue: lambda x: RemoveBinding(x.vhost, QUEUE, x.queue, x.exchange, x.routing_key, x.arguments, x.owner),
}

_OPS: dict[type, Callable[[NodeCore, Any], Op]] = {
    **{kind: (lambda core, x, to_command=to_command: core._command(to_command(x)))
       for kind, to_command in _COMMANDS.items()},
    DeclareExchange: NodeCore._exchange_declare, DeclareQueue: NodeCore._queue_declare,
    DeleteQueue: NodeCore._queue_delete, AutoDeleteQueue: NodeCore._queue_auto_delete,
    ConnectionClosed: NodeCore._connection_closed, AdminAsk: NodeCore._admin,
}

_ADMIN: dict[str, Callable[[NodeCore, dict], Op]] = {
    "add_user": lambda core, a: core._admin_command(AddUser(a["name"], core._hash(a["password"]),
                                                            tuple(a.get("tags", ())))),
    "delete_user": lambda core, a: core._admin_command(RemoveUser(a["name"])),
    "change_password": lambda core, a: core._admin_command(ChangePassword(a["name"], core._hash(a["password"]))),
    "set_user_tags": lambda core, a: core._admin_command(SetUserTags(a["name"], tuple(a.get("tags", ())))),
    "set_permissions": lambda core, a: core._admin_command(SetPermissions(a["user"], a.get("vhost", "/"),
                                                                          a["configure"], a["write"], a["read"])),
    "clear_permissions": lambda core, a: core._admin_command(ClearPermissions(a["user"], a.get("vhost", "/"))),
    "add_vhost": lambda core, a: core._admin_command(AddVhost(a["name"])),
    "delete_vhost": NodeCore._delete_vhost,
    "set_policy": NodeCore._set_policy, "clear_policy": NodeCore._clear_policy,
    "purge_queue": NodeCore._purge_queue, "delete_queue": NodeCore._delete_queue_admin,
}
_ADMIN.update({
    "declare_exchange": NodeCore._declare_exchange_admin, "delete_exchange": NodeCore._delete_exchange_admin,
    "declare_queue": NodeCore._declare_queue_admin, "put_user": NodeCore._put_user,
    "bind": lambda core, a: core._binding_admin(AddBinding, a),
    "unbind": lambda core, a: core._binding_admin(RemoveBinding, a),
    "import_definitions": NodeCore._import_definitions,
})
ADMIN_OPS = frozenset(_ADMIN)


def _tags(tags: Any) -> tuple[str, ...]:
    """Tags as definitions carry them: a list, or RabbitMQ's comma-separated string."""
    if isinstance(tags, str):
        return tuple(t.strip() for t in tags.split(",") if t.strip())
    return tuple(tags)
