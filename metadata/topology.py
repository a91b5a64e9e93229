"""Topology: each vhost's exchanges, queues and bindings, the indexes routing reads, and the
commands that change them.

Theory of operation: `Topology` is plain state changed only by applying change records
(`VhostCreated`, `VhostDeleted`, `ExchangeCreated`, `ExchangeDeleted`, `QueueCreated`,
`QueueDeleted`, `QueueMembersSet`, `StreamReplicasSet`, `Bound`, `Unbound`; changes.py). Its commands (`PutExchange`,
`RemoveExchange`, `PutQueue`, `RemoveQueue`, `SetQueueMembers`, `SetStreamReplicas`, `AddBinding`, `RemoveBinding`,
`RemoveOwnedQueues`; commands.py)
validate exactly as RabbitMQ 3.10 does (first failure wins, texts from texts.py) and then express
their whole effect as records handed to `emit`, which applies each one before the command goes on:
a cascade reads the state its earlier records made. A refused command emits nothing.

Cascades: deleting a queue or an exchange first unbinds everything that names it, then deletes
it, then deletes the auto-delete exchanges that were left with no bindings as sources (and so on,
as rabbit_binding's auto-delete does). Each vhost indexes bindings by source and by destination
and keeps one matcher per exchange (matchers.py), which routing.py walks.

Left out here: queue-level if-unused / if-empty (the queue actor checks those before the node
applies `RemoveQueue`) and auto-deleting a queue when its last consumer goes (the queue asks).
"""
from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import replace
from typing import Any

from metadata import arguments as qargs
from metadata import names, quorum, stream, texts
from metadata.changes import (
    Bound, Change, Emit, ExchangeCreated, ExchangeDeleted, QueueCreated, QueueDeleted, QueueMembersSet,
    StreamReplicasSet, Unbound, VhostCreated, VhostDeleted,
)
from metadata.commands import (AddBinding, ForgetNodeQueues, PutExchange, PutQueue, RemoveBinding, RemoveExchange,
                               RemoveNodeTransients, RemoveOwnedQueues, RemoveQueue, SetQueueMembers,
                               SetStreamReplicas)
from metadata.fieldvalues import MISSING, inequivalence, table_key, type_name
from metadata.headers import validate_binding
from metadata.matchers import MATCHERS, Matcher
from metadata.records import EXCHANGE, QUEUE, BindingRecord, ExchangeRecord, QueueRecord
from wire.errors import NOT_FOUND, AmqpError

EXCHANGE_TYPES = ("direct", "fanout", "topic", "headers")
DEFAULT_EXCHANGE = ""
# name, type, internal: what every vhost is created with (all durable, none auto-delete)
PREDECLARED_EXCHANGES = (
    ("", "direct", False), ("amq.direct", "direct", False), ("amq.fanout", "fanout", False),
    ("amq.topic", "topic", False), ("amq.headers", "headers", False), ("amq.match", "headers", False),
    ("amq.rabbitmq.trace", "topic", True),
)
BindingKey = tuple[str, str, str, str, tuple]  # source, kind, destination, routing key, args identity


class VhostTopology:
    __slots__ = ("exchanges", "queues", "bindings", "by_source", "by_destination", "matchers")

    def __init__(self) -> None:
        self.exchanges: dict[str, ExchangeRecord] = {}
        self.queues: dict[str, QueueRecord] = {}
        self.bindings: dict[BindingKey, BindingRecord] = {}
        self.by_source: dict[str, dict[BindingKey, None]] = {}
        self.by_destination: dict[tuple[str, str], dict[BindingKey, None]] = {}
        self.matchers: dict[str, Matcher] = {}


def binding_key(source: str, kind: str, destination: str, routing_key: str, args: dict | None) -> BindingKey:
    return (source, kind, destination, routing_key, table_key(args))


class Topology:
    def __init__(self) -> None:
        self.vhosts: dict[str, VhostTopology] = {}
        # a vhost's max-queues refusal for a new queue (limits.py; the registry sets it)
        self.queue_refusal: Callable[[str, str, int], AmqpError | None] = lambda vhost, name, count: None

    # ---------------------------------------------------------------- change records
    def vhost_created(self, c: VhostCreated) -> None:
        self.vhosts.setdefault(c.vhost, VhostTopology())

    def vhost_deleted(self, c: VhostDeleted) -> None:
        del self.vhosts[c.vhost]

    def exchange_created(self, c: ExchangeCreated) -> None:
        vh = self.vhosts[c.vhost]
        vh.exchanges[c.name] = ExchangeRecord(c.vhost, c.name, c.type, c.durable, c.auto_delete, c.internal,
                                              dict(c.arguments))
        vh.matchers.setdefault(c.name, MATCHERS[c.type]())

    def exchange_deleted(self, c: ExchangeDeleted) -> None:
        vh = self.vhosts[c.vhost]
        assert not vh.by_source.get(c.name) and not vh.by_destination.get((EXCHANGE, c.name)), "unbind first"
        del vh.exchanges[c.name]
        del vh.matchers[c.name]

    def queue_created(self, c: QueueCreated) -> None:
        self.vhosts[c.vhost].queues[c.name] = QueueRecord(c.vhost, c.name, c.durable, c.exclusive_owner,
                                                          c.auto_delete, dict(c.arguments), home=c.home,
                                                          members=tuple(c.members), created_ms=c.created_ms,
                                                          replicas=tuple(c.replicas))

    def queue_members_set(self, c: QueueMembersSet) -> None:
        queues = self.vhosts[c.vhost].queues
        queues[c.name] = replace(queues[c.name], members=tuple(c.members))

    def stream_replicas_set(self, c: StreamReplicasSet) -> None:
        queues = self.vhosts[c.vhost].queues
        queues[c.name] = replace(queues[c.name], replicas=tuple(c.replicas))

    def queue_deleted(self, c: QueueDeleted) -> None:
        vh = self.vhosts[c.vhost]
        assert not vh.by_destination.get((QUEUE, c.name)), "unbind first"
        del vh.queues[c.name]

    def bound(self, c: Bound) -> None:
        vh = self.vhosts[c.vhost]
        key = binding_key(c.source, c.destination_kind, c.destination, c.routing_key, c.arguments)
        vh.bindings[key] = BindingRecord(c.vhost, c.source, c.destination_kind, c.destination, c.routing_key,
                                         dict(c.arguments))
        vh.by_source.setdefault(c.source, {})[key] = None
        vh.by_destination.setdefault((c.destination_kind, c.destination), {})[key] = None
        vh.matchers[c.source].add(c.routing_key, c.arguments, (c.destination_kind, c.destination))

    def unbound(self, c: Unbound) -> None:
        vh = self.vhosts[c.vhost]
        key = binding_key(c.source, c.destination_kind, c.destination, c.routing_key, c.arguments)
        del vh.bindings[key]
        _discard(vh.by_source, c.source, key)
        _discard(vh.by_destination, (c.destination_kind, c.destination), key)
        vh.matchers[c.source].remove(c.routing_key, c.arguments, (c.destination_kind, c.destination))

    def reset(self) -> None:
        self.vhosts.clear()

    def snapshot(self) -> list[Change]:
        """Per vhost (by name): the vhost, its exchanges, queues and bindings, in an order `apply` takes."""
        out: list[Change] = []
        for vhost in sorted(self.vhosts):
            out.append(VhostCreated(vhost))
            out.extend(_exchange_created(x) for x in self.exchanges(vhost))
            out.extend(QueueCreated(q.vhost, q.name, q.durable, q.exclusive_owner, q.auto_delete, dict(q.arguments),
                                    q.home, q.members, q.created_ms, q.replicas) for q in self.queues(vhost))
            out.extend(_binding(Bound, b) for b in self.bindings(vhost))
        return out

    # ---------------------------------------------------------------- commands: vhosts
    def add_vhost(self, vhost: str, emit: Emit) -> None:
        """A new vhost comes with RabbitMQ's predeclared exchanges; an existing one is left as it is."""
        if vhost in self.vhosts:
            return
        emit(VhostCreated(vhost))
        for name, type_, internal in PREDECLARED_EXCHANGES:
            emit(ExchangeCreated(vhost, name, type_, True, False, internal, {}))

    # ---------------------------------------------------------------- commands: exchanges
    def put_exchange(self, cmd: PutExchange, emit: Emit) -> AmqpError | None:
        vh = self.vhost(cmd.vhost)
        if isinstance(vh, AmqpError):
            return vh
        args = cmd.arguments or {}
        if cmd.type not in EXCHANGE_TYPES:
            return texts.unknown_exchange_type(cmd.type)
        name = names.strip_cr_lf(cmd.name)
        if name == DEFAULT_EXCHANGE:
            return texts.default_exchange()
        current = vh.exchanges.get(name)
        if current is not None:
            return _exchange_inequivalence(current, cmd.type, cmd.durable, cmd.auto_delete, cmd.internal, args)
        if names.is_reserved(name):
            return texts.reserved_prefix("exchange", name)
        ae = args.get("alternate-exchange", MISSING)
        if ae is not MISSING and not isinstance(ae, (str, bytes)):
            return texts.invalid_arg_type("exchange", name, cmd.vhost, "alternate-exchange", type_name(ae))
        emit(ExchangeCreated(cmd.vhost, name, cmd.type, cmd.durable, cmd.auto_delete, cmd.internal, dict(args)))
        return None

    def remove_exchange(self, cmd: RemoveExchange, emit: Emit) -> AmqpError | None:
        vh = self.vhost(cmd.vhost)
        if isinstance(vh, AmqpError):
            return vh
        name = names.strip_cr_lf(cmd.name)
        if name == DEFAULT_EXCHANGE:
            return texts.default_exchange()
        if names.is_reserved(name):
            return texts.system_exchange_deletion(name, cmd.vhost)
        if name not in vh.exchanges:
            return None  # RabbitMQ answers delete-ok
        if cmd.if_unused and vh.by_source.get(name):
            return texts.exchange_in_use(name, cmd.vhost)
        self._delete_exchange(vh, cmd.vhost, name, emit)
        return None

    def _delete_exchange(self, vh: VhostTopology, vhost: str, name: str, emit: Emit) -> None:
        keys = list(vh.by_source.get(name, ())) + list(vh.by_destination.get((EXCHANGE, name), ()))
        sources = _unbind_all(vh, keys, emit)
        emit(ExchangeDeleted(vhost, name))
        self._auto_delete(vh, vhost, sources, emit)

    def _auto_delete(self, vh: VhostTopology, vhost: str, sources: list[str], emit: Emit) -> None:
        """Delete auto-delete exchanges among `sources` left with no bindings, cascading."""
        for source in sources:
            x = vh.exchanges.get(source)
            if x is not None and x.auto_delete and not vh.by_source.get(source):
                self._delete_exchange(vh, vhost, source, emit)

    # ---------------------------------------------------------------- commands: queues
    def put_queue(self, cmd: PutQueue, emit: Emit) -> QueueRecord | AmqpError:
        vh = self.vhost(cmd.vhost)
        if isinstance(vh, AmqpError):
            return vh
        args = cmd.arguments or {}
        name = names.strip_cr_lf(cmd.name)
        assert name, "the proposer names a server-named queue (Registry.fresh_queue_name)"
        if not cmd.server_named and names.is_reserved(name):
            return texts.reserved_prefix("queue", name)
        owner = cmd.owner if cmd.exclusive else None
        current = vh.queues.get(name)
        if current is not None and current.quorum:
            return quorum.redeclare_error(name, cmd.vhost, current.arguments, args, durable=cmd.durable,
                                          auto_delete=cmd.auto_delete,
                                          owner_matches=current.exclusive_owner == owner,
                                          relaxed=cmd.relaxed) or current
        if current is not None:
            if current.exclusive_owner != owner:
                return texts.resource_locked(name, cmd.vhost)
            for key, have, got in (("durable", current.durable, cmd.durable),
                                   ("auto_delete", current.auto_delete, cmd.auto_delete)):
                pair = inequivalence(have, got)
                if pair is not None:
                    return texts.inequivalent("queue", name, cmd.vhost, key, *pair)
            return qargs.queue_inequivalence(name, cmd.vhost, current.arguments, args) or current
        refused = self.queue_refusal(cmd.vhost, name, len(vh.queues))  # new queues only, before their arguments
        if refused is not None:
            return refused
        if quorum.is_quorum(args):
            error = quorum.new_queue_error(name, cmd.vhost, args, durable=cmd.durable, exclusive=cmd.exclusive,
                                           auto_delete=cmd.auto_delete)
        else:
            error = qargs.validate_new_queue(name, cmd.vhost, args, durable=cmd.durable, exclusive=cmd.exclusive,
                                             auto_delete=cmd.auto_delete)
        if error is not None:
            return error
        emit(QueueCreated(cmd.vhost, name, cmd.durable, owner, cmd.auto_delete, dict(args), cmd.home,
                          *((cmd.members, cmd.created_ms) if quorum.is_quorum(args) else ((), 0)),
                          tuple(cmd.replicas) if stream.is_stream(args) else ()))
        return replace(vh.queues[name], created=True)

    def remove_queue(self, cmd: RemoveQueue, emit: Emit) -> QueueRecord | AmqpError | None:
        found = self.check_queue_access(cmd.vhost, cmd.name, cmd.owner)
        if isinstance(found, AmqpError):
            return None if found.code == NOT_FOUND else found
        self._delete_queue(self.vhosts[cmd.vhost], found, emit)
        return found

    def remove_owned_queues(self, cmd: RemoveOwnedQueues, emit: Emit) -> list[QueueRecord]:
        owned = ((lambda owner: str(owner).startswith(str(cmd.owner))) if cmd.prefix
                 else (lambda owner: owner == cmd.owner))
        removed = [q for q in self.queues() if q.exclusive_owner is not None and owned(q.exclusive_owner)]
        for q in removed:
            self._delete_queue(self.vhosts[q.vhost], q, emit)
        return removed

    def remove_node_transients(self, cmd: RemoveNodeTransients, emit: Emit) -> list[QueueRecord]:
        prefix = cmd.node + ":"
        removed = [q for q in self.queues()
                   if (q.exclusive_owner is not None and str(q.exclusive_owner).startswith(prefix))
                   or (not q.durable and q.home.startswith(prefix))]
        for q in removed:
            self._delete_queue(self.vhosts[q.vhost], q, emit)
        return removed

    def forget_node_queues(self, cmd: ForgetNodeQueues, emit: Emit) -> list[QueueRecord]:
        prefix = cmd.node + ":"
        # quorum queues' homes name no node; a replicated stream's home names the node it was
        # declared on, but it lives on in its other members (forget_node then removes the gone one)
        removed = [q for q in self.queues() if q.home.startswith(prefix) and not q.replicas]
        for q in removed:
            self._delete_queue(self.vhosts[q.vhost], q, emit)
        return removed

    def set_queue_members(self, cmd: SetQueueMembers, emit: Emit) -> QueueRecord | None:
        """A quorum queue's members after a committed Raft membership change; nothing when that
        incarnation of the queue is gone (or nothing changed)."""
        vh = self.vhosts.get(cmd.vhost)
        current = None if vh is None else vh.queues.get(cmd.name)
        if current is None or current.home != cmd.home or not current.quorum or not cmd.members:
            return None
        if tuple(cmd.members) != current.members:
            emit(QueueMembersSet(cmd.vhost, cmd.name, tuple(cmd.members)))
        return vh.queues[cmd.name]

    def set_stream_replicas(self, cmd: SetStreamReplicas, emit: Emit) -> QueueRecord | None:
        """A stream's members after add_replica / delete_replica; nothing when that incarnation is
        gone, the queue is no stream, or no member would be left."""
        vh = self.vhosts.get(cmd.vhost)
        current = None if vh is None else vh.queues.get(cmd.name)
        if (current is None or current.home != cmd.home or not stream.is_stream(current.arguments)
                or not cmd.replicas):
            return None
        if tuple(cmd.replicas) != current.replicas:
            emit(StreamReplicasSet(cmd.vhost, cmd.name, tuple(cmd.replicas)))
        return vh.queues[cmd.name]

    def _delete_queue(self, vh: VhostTopology, q: QueueRecord, emit: Emit) -> None:
        sources = _unbind_all(vh, list(vh.by_destination.get((QUEUE, q.name), ())), emit)
        emit(QueueDeleted(q.vhost, q.name, q.home, q.replicas, q.members))
        self._auto_delete(vh, q.vhost, sources, emit)

    # ---------------------------------------------------------------- commands: bindings
    def add_binding(self, cmd: AddBinding, emit: Emit) -> AmqpError | None:
        ends = self._binding_ends(cmd)
        if isinstance(ends, AmqpError):
            return ends
        vh, dest, source = ends
        kind, args = cmd.destination_kind, cmd.arguments or {}
        x = vh.exchanges.get(source)
        if x is None:
            return texts.not_found("exchange", source, cmd.vhost)
        targets = vh.queues if kind == QUEUE else vh.exchanges
        if dest not in targets:
            return texts.not_found(kind, dest, cmd.vhost)
        if x.type == "headers":
            error = validate_binding(args)
            if error is not None:
                return error
        error = _locked(vh, cmd.vhost, kind, dest, cmd.owner)
        if error is not None:
            return error
        if binding_key(source, kind, dest, cmd.routing_key, args) not in vh.bindings:
            emit(Bound(cmd.vhost, source, kind, dest, cmd.routing_key, dict(args)))
        return None

    def remove_binding(self, cmd: RemoveBinding, emit: Emit) -> AmqpError | None:
        ends = self._binding_ends(cmd)
        if isinstance(ends, AmqpError):
            return ends
        vh, dest, source = ends
        binding = vh.bindings.get(binding_key(source, cmd.destination_kind, dest, cmd.routing_key,
                                              cmd.arguments or {}))
        if binding is None:
            return None  # RabbitMQ 3.10 answers unbind-ok, even for a missing queue or exchange
        error = _locked(vh, cmd.vhost, cmd.destination_kind, dest, cmd.owner)
        if error is not None:
            return error
        emit(_binding(Unbound, binding))
        self._auto_delete(vh, cmd.vhost, [source], emit)
        return None

    def _binding_ends(self, cmd: AddBinding | RemoveBinding) -> tuple[VhostTopology, str, str] | AmqpError:
        """The vhost and the cleaned names of a binding's ends; the default exchange takes none."""
        vh = self.vhost(cmd.vhost)
        if isinstance(vh, AmqpError):
            return vh
        dest, source = names.strip_cr_lf(cmd.destination), names.strip_cr_lf(cmd.source)
        if source == DEFAULT_EXCHANGE or (cmd.destination_kind == EXCHANGE and dest == DEFAULT_EXCHANGE):
            return texts.default_exchange()
        return vh, dest, source

    # ---------------------------------------------------------------- queries
    def vhost(self, vhost: str) -> VhostTopology | AmqpError:
        vh = self.vhosts.get(vhost)
        return vh if vh is not None else AmqpError(NOT_FOUND, f"no vhost '{vhost}'")

    def check_exchange(self, vhost: str, name: str) -> AmqpError | None:
        """A passive exchange.declare: None when the exchange exists."""
        vh = self.vhost(vhost)
        if isinstance(vh, AmqpError):
            return vh
        name = names.strip_cr_lf(name)
        if name == DEFAULT_EXCHANGE:
            return texts.default_exchange()
        return texts.not_found("exchange", name, vhost) if name not in vh.exchanges else None

    def check_queue_access(self, vhost: str, name: str, owner: Hashable | None) -> QueueRecord | AmqpError:
        """For passive declare, consume, get, purge and delete: 404, or 405 for another's exclusive queue."""
        vh = self.vhost(vhost)
        if isinstance(vh, AmqpError):
            return vh
        name = names.strip_cr_lf(name)
        q = vh.queues.get(name)
        if q is None:
            return texts.not_found("queue", name, vhost)
        if q.exclusive_owner is not None and q.exclusive_owner != owner:
            return texts.resource_locked(name, vhost)
        return q

    def has_queue(self, vhost: str, name: str) -> bool:
        vh = self.vhosts.get(vhost)
        return vh is not None and name in vh.queues

    def queues(self, vhost: str | None = None) -> list[QueueRecord]:
        return [q for vh in self._selected(vhost) for q in sorted(vh.queues.values(), key=lambda q: q.name)]

    def exchanges(self, vhost: str | None = None) -> list[ExchangeRecord]:
        return [x for vh in self._selected(vhost) for x in sorted(vh.exchanges.values(), key=lambda x: x.name)]

    def bindings(self, vhost: str | None = None) -> list[BindingRecord]:
        return [b for vh in self._selected(vhost)
                for _, b in sorted(vh.bindings.items(), key=lambda kv: repr(kv[0]))]

    def _selected(self, vhost: str | None) -> list[VhostTopology]:
        if vhost is None:
            return [self.vhosts[v] for v in sorted(self.vhosts)]
        return [self.vhosts[vhost]] if vhost in self.vhosts else []


def _unbind_all(vh: VhostTopology, keys: list[BindingKey], emit: Emit) -> list[str]:
    """Unbind every binding in `keys`; the sources they had, in order, without repeats."""
    sources: dict[str, None] = {}
    for key in keys:
        if key in vh.bindings:  # an exchange bound to itself appears twice
            emit(_binding(Unbound, vh.bindings[key]))
            sources[key[0]] = None
    return list(sources)


def _locked(vh: VhostTopology, vhost: str, kind: str, dest: str, owner: Hashable | None) -> AmqpError | None:
    """Binding another connection's exclusive queue: 405."""
    if kind == QUEUE:
        q = vh.queues[dest]
        if q.exclusive_owner is not None and q.exclusive_owner != owner:
            return texts.resource_locked(dest, vhost)
    return None


def _discard(index: dict, key: Hashable, binding: BindingKey) -> None:
    entries = index[key]
    del entries[binding]
    if not entries:
        del index[key]


def _exchange_created(x: ExchangeRecord) -> ExchangeCreated:
    return ExchangeCreated(x.vhost, x.name, x.type, x.durable, x.auto_delete, x.internal, dict(x.arguments))


def _binding(record: type[Bound] | type[Unbound], b: BindingRecord) -> Bound | Unbound:
    return record(b.vhost, b.source, b.destination_kind, b.destination, b.routing_key, dict(b.arguments))


def _exchange_inequivalence(current: ExchangeRecord, type_: str, durable: bool, auto_delete: bool,
                            internal: bool, args: dict[str, Any]) -> AmqpError | None:
    """rabbit_exchange:assert_equivalence: type, durable, auto_delete, internal, then arguments."""
    for key, have, got in (("type", current.type, type_), ("durable", current.durable, durable),
                           ("auto_delete", current.auto_delete, auto_delete), ("internal", current.internal, internal)):
        pair = inequivalence(have, got)
        if pair is not None:
            return texts.inequivalent("exchange", current.name, current.vhost, key, *pair)
    return qargs.exchange_args_inequivalence(current.name, current.vhost, current.arguments, args)
