"""The registry of vhosts, exchanges, queues, bindings, users, permissions and policies, and routing.

Theory of operation: one class serves both roles. The authoritative copy (the node actor) runs
commands; a command validates against the current state exactly as RabbitMQ 3.10 does (first
failure wins, texts from texts.py) and, when it succeeds, expresses its whole effect - cascades
included - as change records, each applied to itself as it is produced. Replicas (one per
connection host) only `apply` those records, so a replica is the authoritative copy minus
validation, and every mutation is a deterministic function of (state, command): ready for Raft.
Change records are plain tuples (str/int/bool/bytes/dict/list), msgpack-able:
  ("reset",)  ("vhost", vh)
  ("exchange", vh, name, type, durable, auto_delete, internal, arguments)  ("exchange_deleted", vh, name)
  ("queue", vh, name, durable, exclusive_owner, auto_delete, arguments)    ("queue_deleted", vh, name)
  ("bound", vh, source, kind, destination, routing_key, arguments)         ("unbound", ...same)
  ("vhost_deleted", vh): drops the vhost with its exchanges, queues and bindings in one step
  users and permissions: see access.py; policies: see policies.py
Ordering rule: a queue or exchange is deleted only after the records unbinding everything that
names it, so every prefix of a change list leaves a consistent registry.
Routing walks exchange-to-exchange bindings and alternate exchanges breadth-first with a seen set
(RabbitMQ's route1/3): an exchange whose own bindings match nothing hands the message to its
alternate exchange. Results of walks that touch no headers exchange are cached per (vhost,
exchange, routing key); any applied change clears the cache (metadata changes are rare, routes are
not). An exchange without an alternate-exchange argument takes one from the policy that applies to
it. Admin commands (users, permissions, vhosts, policies) answer AdminError values with rabbitmqctl's
texts; only password hashes reach this module. Out of scope here: queue-level if-unused/if-empty
(the queue actor checks those before calling delete_queue) and auto-deleting queues on last consumer.
"""
from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from metadata import arguments as qargs
from metadata import names, policies, texts
from metadata.access import AccessControl, Permission, User, cleared_permissions, compile_pattern
from metadata.admin_errors import EX_NOUSER, EX_SOFTWARE, AdminError, no_user, no_vhost
from metadata.policies import Policy
from metadata.fieldvalues import MISSING, inequivalence, table_key, type_name
from metadata.headers import validate_binding
from metadata.matchers import MATCHERS, Matcher
from metadata.records import EXCHANGE, QUEUE, BindingRecord, ExchangeRecord, QueueRecord
from wire.errors import NOT_FOUND, AmqpError

if TYPE_CHECKING:
    from random import Random

EXCHANGE_TYPES = ("direct", "fanout", "topic", "headers")
DEFAULT_EXCHANGE = ""
# name, type, internal: what every vhost is created with (all durable, none auto-delete)
PREDECLARED_EXCHANGES = (
    ("", "direct", False), ("amq.direct", "direct", False), ("amq.fanout", "fanout", False),
    ("amq.topic", "topic", False), ("amq.headers", "headers", False), ("amq.match", "headers", False),
    ("amq.rabbitmq.trace", "topic", True),
)
route_cache_entries_max = 16384
BindingKey = tuple[str, str, str, str, tuple]  # source, kind, destination, routing key, args identity
Changes = list[tuple]


class _VHost:
    __slots__ = ("exchanges", "queues", "bindings", "by_source", "by_destination", "matchers")

    def __init__(self) -> None:
        self.exchanges: dict[str, ExchangeRecord] = {}
        self.queues: dict[str, QueueRecord] = {}
        self.bindings: dict[BindingKey, BindingRecord] = {}
        self.by_source: dict[str, dict[BindingKey, None]] = {}
        self.by_destination: dict[tuple[str, str], dict[BindingKey, None]] = {}
        self.matchers: dict[str, Matcher] = {}


def _binding_key(source: str, kind: str, destination: str, routing_key: str, args: dict | None) -> BindingKey:
    return (source, kind, destination, routing_key, table_key(args))


class Registry:
    def __init__(self, rng: "Random | None" = None) -> None:
        self._rng = rng
        self._names_issued = 0
        self._vhosts: dict[str, _VHost] = {}
        self._route_cache: dict[tuple[str, str, str], tuple[str, ...]] = {}
        self.access = AccessControl()
        self._policies: dict[str, dict[tuple[str, bool], Policy]] = {}  # vhost -> (name, operator) -> policy
        self.add_vhost("/")

    # ---------------------------------------------------------------- replica side
    def apply(self, changes: Sequence[tuple]) -> None:
        for change in changes:
            self._apply_one(change)

    def snapshot(self) -> list[tuple]:
        out: list[tuple] = [("reset",)]
        for vhost in sorted(self._vhosts):
            vh = self._vhosts[vhost]
            out.append(("vhost", vhost))
            out.extend(_exchange_change(x) for x in sorted(vh.exchanges.values(), key=lambda x: x.name))
            out.extend(_queue_change(q) for q in sorted(vh.queues.values(), key=lambda q: q.name))
            out.extend(_binding_change("bound", b) for _, b in sorted(vh.bindings.items(), key=lambda kv: repr(kv[0])))
        out.extend(self.access.snapshot())
        out.extend(policies.policy_change(p) for p in self.policies())
        return out

    def _apply_one(self, change: tuple) -> None:
        self._route_cache.clear()
        op = change[0]
        if op == "reset":
            self._vhosts.clear()
            self.access.reset()
            self._policies.clear()
        elif op == "vhost":
            self._vhosts.setdefault(change[1], _VHost())
        elif op == "vhost_deleted":
            del self._vhosts[change[1]]
            self._policies.pop(change[1], None)
        elif op in ("user", "user_deleted", "permission", "permission_cleared"):
            self.access.apply_one(change)
        elif op == "policy":
            p = policies.from_change(change)
            self._policies.setdefault(p.vhost, {})[(p.name, p.operator)] = p
        elif op == "policy_cleared":
            _, vhost, name, operator = change
            del self._policies[vhost][(name, operator)]
        elif op == "exchange":
            _, vhost, name, type_, durable, auto_delete, internal, args = change
            vh = self._vhosts[vhost]
            vh.exchanges[name] = ExchangeRecord(vhost, name, type_, durable, auto_delete, internal, dict(args))
            vh.matchers.setdefault(name, MATCHERS[type_]())
        elif op == "exchange_deleted":
            vh = self._vhosts[change[1]]
            assert not vh.by_source.get(change[2]) and not vh.by_destination.get((EXCHANGE, change[2]))
            del vh.exchanges[change[2]]
            del vh.matchers[change[2]]
        elif op == "queue":
            _, vhost, name, durable, owner, auto_delete, args = change
            self._vhosts[vhost].queues[name] = QueueRecord(vhost, name, durable, owner, auto_delete, dict(args))
        elif op == "queue_deleted":
            vh = self._vhosts[change[1]]
            assert not vh.by_destination.get((QUEUE, change[2]))
            del vh.queues[change[2]]
        elif op in ("bound", "unbound"):
            _, vhost, source, kind, dest, routing_key, args = change
            vh = self._vhosts[vhost]
            key = _binding_key(source, kind, dest, routing_key, args)
            if op == "bound":
                vh.bindings[key] = BindingRecord(vhost, source, kind, dest, routing_key, dict(args))
                vh.by_source.setdefault(source, {})[key] = None
                vh.by_destination.setdefault((kind, dest), {})[key] = None
                vh.matchers[source].add(routing_key, args, (kind, dest))
            else:
                del vh.bindings[key]
                _discard(vh.by_source, source, key)
                _discard(vh.by_destination, (kind, dest), key)
                vh.matchers[source].remove(routing_key, args, (kind, dest))
        else:
            raise AssertionError(f"unknown change record {op!r}")

    def _emit(self, changes: Changes, change: tuple) -> None:
        self._apply_one(change)
        changes.append(change)

    # ---------------------------------------------------------------- vhosts
    def add_vhost(self, vhost: str) -> tuple[None, Changes]:
        changes: Changes = []
        if vhost in self._vhosts:
            return None, changes
        self._emit(changes, ("vhost", vhost))
        for name, type_, internal in PREDECLARED_EXCHANGES:
            self._emit(changes, ("exchange", vhost, name, type_, True, False, internal, {}))
        return None, changes

    def _vhost(self, vhost: str) -> _VHost | AmqpError:
        vh = self._vhosts.get(vhost)
        return vh if vh is not None else AmqpError(NOT_FOUND, f"no vhost '{vhost}'")

    # ---------------------------------------------------------------- exchanges
    def declare_exchange(self, vhost: str, name: str, type: str, *, passive: bool = False,
                         durable: bool = False, auto_delete: bool = False, internal: bool = False,
                         arguments: dict[str, Any] | None = None) -> tuple[AmqpError | None, Changes]:
        vh = self._vhost(vhost)
        if isinstance(vh, AmqpError):
            return vh, []
        args = arguments or {}
        if not passive and type not in EXCHANGE_TYPES:
            return texts.unknown_exchange_type(type), []
        name = names.strip_cr_lf(name)
        if name == DEFAULT_EXCHANGE:
            return texts.default_exchange(), []
        current = vh.exchanges.get(name)
        if passive:
            return (texts.not_found("exchange", name, vhost) if current is None else None), []
        if current is not None:
            return _exchange_inequivalence(current, type, durable, auto_delete, internal, args), []
        if names.is_reserved(name):
            return texts.reserved_prefix("exchange", name), []
        ae = args.get("alternate-exchange", MISSING)
        if ae is not MISSING and not isinstance(ae, (str, bytes)):
            return texts.invalid_arg_type("exchange", name, vhost, "alternate-exchange", type_name(ae)), []
        changes: Changes = []
        self._emit(changes, ("exchange", vhost, name, type, durable, auto_delete, internal, dict(args)))
        return None, changes

    def delete_exchange(self, vhost: str, name: str, *, if_unused: bool = False) -> tuple[AmqpError | None, Changes]:
        vh = self._vhost(vhost)
        if isinstance(vh, AmqpError):
            return vh, []
        name = names.strip_cr_lf(name)
        if name == DEFAULT_EXCHANGE:
            return texts.default_exchange(), []
        if names.is_reserved(name):
            return texts.system_exchange_deletion(name, vhost), []
        if name not in vh.exchanges:
            return None, []  # RabbitMQ answers delete-ok
        if if_unused and vh.by_source.get(name):
            return texts.exchange_in_use(name, vhost), []
        changes: Changes = []
        self._delete_exchange(vh, vhost, name, changes)
        return None, changes

    def _delete_exchange(self, vh: _VHost, vhost: str, name: str, changes: Changes) -> None:
        keys = list(vh.by_source.get(name, ())) + list(vh.by_destination.get((EXCHANGE, name), ()))
        sources = self._unbind_all(vh, keys, changes)
        self._emit(changes, ("exchange_deleted", vhost, name))
        self._auto_delete(vh, vhost, sources, changes)

    def _unbind_all(self, vh: _VHost, keys: list[BindingKey], changes: Changes) -> list[str]:
        sources: dict[str, None] = {}
        for key in keys:
            if key in vh.bindings:  # an exchange bound to itself appears twice
                self._emit(changes, _binding_change("unbound", vh.bindings[key]))
                sources[key[0]] = None
        return list(sources)

    def _auto_delete(self, vh: _VHost, vhost: str, sources: list[str], changes: Changes) -> None:
        """Delete auto-delete exchanges among `sources` left with no bindings, cascading."""
        for source in sources:
            x = vh.exchanges.get(source)
            if x is not None and x.auto_delete and not vh.by_source.get(source):
                self._delete_exchange(vh, vhost, source, changes)

    # ---------------------------------------------------------------- queues
    def declare_queue(self, vhost: str, name: str, *, passive: bool = False, durable: bool = False,
                      exclusive: bool = False, auto_delete: bool = False,
                      arguments: dict[str, Any] | None = None,
                      owner: Hashable | None = None) -> tuple[QueueRecord | AmqpError, Changes]:
        vh = self._vhost(vhost)
        if isinstance(vh, AmqpError):
            return vh, []
        args = arguments or {}
        name = names.strip_cr_lf(name)
        if passive:
            return self.check_queue_access(vhost, name, owner), []
        if name == "":
            name = self._fresh_queue_name(vh)
        elif names.is_reserved(name):
            return texts.reserved_prefix("queue", name), []
        current = vh.queues.get(name)
        if current is not None:
            if current.exclusive_owner != (owner if exclusive else None):
                return texts.resource_locked(name, vhost), []
            for key, have, got in (("durable", current.durable, durable), ("auto_delete", current.auto_delete, auto_delete)):
                pair = inequivalence(have, got)
                if pair is not None:
                    return texts.inequivalent("queue", name, vhost, key, *pair), []
            return qargs.queue_inequivalence(name, vhost, current.arguments, args) or current, []
        error = qargs.validate_new_queue(name, vhost, args, durable=durable, exclusive=exclusive, auto_delete=auto_delete)
        if error is not None:
            return error, []
        changes: Changes = []
        self._emit(changes, ("queue", vhost, name, durable, owner if exclusive else None, auto_delete, dict(args)))
        return replace(vh.queues[name], created=True), changes

    def _fresh_queue_name(self, vh: _VHost) -> str:
        while True:
            self._names_issued += 1
            name = names.server_name(self._rng, self._names_issued)
            if name not in vh.queues:
                return name

    def check_queue_access(self, vhost: str, name: str, owner: Hashable | None) -> QueueRecord | AmqpError:
        """For passive declare, consume, get, purge and delete: 404, or 405 for another's exclusive queue."""
        vh = self._vhost(vhost)
        if isinstance(vh, AmqpError):
            return vh
        name = names.strip_cr_lf(name)
        q = vh.queues.get(name)
        if q is None:
            return texts.not_found("queue", name, vhost)
        if q.exclusive_owner is not None and q.exclusive_owner != owner:
            return texts.resource_locked(name, vhost)
        return q

    def delete_queue(self, vhost: str, name: str, owner: Hashable | None) -> tuple[QueueRecord | AmqpError | None, Changes]:
        """None when there is no such queue: RabbitMQ 3.10 answers delete-ok (message_count 0)."""
        found = self.check_queue_access(vhost, name, owner)
        if isinstance(found, AmqpError):
            return (None if found.code == NOT_FOUND else found), []
        changes: Changes = []
        self._delete_queue(self._vhosts[vhost], found, changes)
        return found, changes

    def _delete_queue(self, vh: _VHost, q: QueueRecord, changes: Changes) -> None:
        sources = self._unbind_all(vh, list(vh.by_destination.get((QUEUE, q.name), ())), changes)
        self._emit(changes, ("queue_deleted", q.vhost, q.name))
        self._auto_delete(vh, q.vhost, sources, changes)

    def connection_closed(self, owner: Hashable) -> tuple[list[QueueRecord], Changes]:
        removed: list[QueueRecord] = []
        changes: Changes = []
        for vhost in sorted(self._vhosts):
            vh = self._vhosts[vhost]
            for name in sorted(vh.queues):
                q = vh.queues[name]
                if q.exclusive_owner is not None and q.exclusive_owner == owner:
                    self._delete_queue(vh, q, changes)
                    removed.append(q)
        return removed, changes

    # ---------------------------------------------------------------- bindings
    def bind_queue(self, vhost: str, queue: str, exchange: str, routing_key: str,
                   arguments: dict[str, Any] | None, owner: Hashable | None) -> tuple[AmqpError | None, Changes]:
        return self._bind(vhost, QUEUE, queue, exchange, routing_key, arguments or {}, owner)

    def unbind_queue(self, vhost: str, queue: str, exchange: str, routing_key: str,
                     arguments: dict[str, Any] | None, owner: Hashable | None) -> tuple[AmqpError | None, Changes]:
        return self._unbind(vhost, QUEUE, queue, exchange, routing_key, arguments or {}, owner)

    def bind_exchange(self, vhost: str, destination: str, source: str, routing_key: str,
                      arguments: dict[str, Any] | None) -> tuple[AmqpError | None, Changes]:
        return self._bind(vhost, EXCHANGE, destination, source, routing_key, arguments or {}, None)

    def unbind_exchange(self, vhost: str, destination: str, source: str, routing_key: str,
                        arguments: dict[str, Any] | None) -> tuple[AmqpError | None, Changes]:
        return self._unbind(vhost, EXCHANGE, destination, source, routing_key, arguments or {}, None)

    def _binding_ends(self, vhost: str, kind: str, dest: str,
                      source: str) -> tuple[_VHost, str, str] | AmqpError:
        """The vhost and the cleaned names of a binding's ends; the default exchange takes none."""
        vh = self._vhost(vhost)
        if isinstance(vh, AmqpError):
            return vh
        dest, source = names.strip_cr_lf(dest), names.strip_cr_lf(source)
        if source == DEFAULT_EXCHANGE or (kind == EXCHANGE and dest == DEFAULT_EXCHANGE):
            return texts.default_exchange()
        return vh, dest, source

    def _bind(self, vhost: str, kind: str, dest: str, source: str, routing_key: str,
              args: dict[str, Any], owner: Hashable | None) -> tuple[AmqpError | None, Changes]:
        ends = self._binding_ends(vhost, kind, dest, source)
        if isinstance(ends, AmqpError):
            return ends, []
        vh, dest, source = ends
        x = vh.exchanges.get(source)
        if x is None:
            return texts.not_found("exchange", source, vhost), []
        targets = vh.queues if kind == QUEUE else vh.exchanges
        if dest not in targets:
            return texts.not_found(kind, dest, vhost), []
        if x.type == "headers":
            error = validate_binding(args)
            if error is not None:
                return error, []
        if kind == QUEUE:
            q = vh.queues[dest]
            if q.exclusive_owner is not None and q.exclusive_owner != owner:
                return texts.resource_locked(dest, vhost), []
        changes: Changes = []
        if _binding_key(source, kind, dest, routing_key, args) not in vh.bindings:
            self._emit(changes, ("bound", vhost, source, kind, dest, routing_key, dict(args)))
        return None, changes

    def _unbind(self, vhost: str, kind: str, dest: str, source: str, routing_key: str,
                args: dict[str, Any], owner: Hashable | None) -> tuple[AmqpError | None, Changes]:
        ends = self._binding_ends(vhost, kind, dest, source)
        if isinstance(ends, AmqpError):
            return ends, []
        vh, dest, source = ends
        binding = vh.bindings.get(_binding_key(source, kind, dest, routing_key, args))
        if binding is None:
            return None, []  # RabbitMQ 3.10 answers unbind-ok, even for a missing queue or exchange
        if kind == QUEUE:
            q = vh.queues[dest]
            if q.exclusive_owner is not None and q.exclusive_owner != owner:
                return texts.resource_locked(dest, vhost), []
        changes: Changes = []
        self._emit(changes, _binding_change("unbound", binding))
        self._auto_delete(vh, vhost, [source], changes)
        return None, changes

    # ---------------------------------------------------------------- listing
    def vhost_exists(self, vhost: str) -> bool:
        return vhost in self._vhosts

    def queues(self, vhost: str | None = None) -> list[QueueRecord]:
        return [q for vh in self._selected(vhost) for q in sorted(vh.queues.values(), key=lambda q: q.name)]

    def exchanges(self, vhost: str | None = None) -> list[ExchangeRecord]:
        return [x for vh in self._selected(vhost) for x in sorted(vh.exchanges.values(), key=lambda x: x.name)]

    def bindings(self, vhost: str | None = None) -> list[BindingRecord]:
        return [b for vh in self._selected(vhost)
                for _, b in sorted(vh.bindings.items(), key=lambda kv: repr(kv[0]))]

    def _selected(self, vhost: str | None) -> list[_VHost]:
        if vhost is None:
            return [self._vhosts[v] for v in sorted(self._vhosts)]
        return [self._vhosts[vhost]] if vhost in self._vhosts else []

    # ---------------------------------------------------------------- vhosts, users, permissions (admin)
    def delete_vhost(self, vhost: str) -> tuple[list[QueueRecord] | AdminError, Changes]:
        """The queues that went with the vhost (their actors must be deleted), or an error."""
        vh = self._vhosts.get(vhost)
        if vh is None:
            return no_vhost(vhost), []
        gone = sorted(vh.queues.values(), key=lambda q: q.name)
        changes: Changes = []
        for change in cleared_permissions(p for p in list(self.access.permissions.values()) if p.vhost == vhost):
            self._emit(changes, change)
        for (name, operator) in sorted(self._policies.get(vhost, {})):
            self._emit(changes, ("policy_cleared", vhost, name, operator))
        self._emit(changes, ("vhost_deleted", vhost))
        return gone, changes

    def load_definitions(self, records: Sequence[tuple]) -> Changes:
        """Apply a definitions file's records; a vhost gets its predeclared exchanges as add_vhost gives."""
        changes: Changes = []
        for record in records:
            if record[0] == "vhost":
                changes += self.add_vhost(record[1])[1]
            else:
                self._emit(changes, record)
        return changes

    def vhosts(self) -> list[str]:
        return sorted(self._vhosts)

    def add_user(self, name: str, password_hash: str, tags: Sequence[str] = ()) -> tuple[AdminError | None, Changes]:
        if name in self.access.users:
            return AdminError(f'User "{name}" already exists', EX_SOFTWARE), []
        changes: Changes = []
        self._emit(changes, ("user", name, password_hash, list(tags)))
        return None, changes

    def delete_user(self, name: str) -> tuple[AdminError | None, Changes]:
        if name not in self.access.users:
            return no_user(name), []
        changes: Changes = []
        for change in cleared_permissions(self.access.permissions_of_user(name)):
            self._emit(changes, change)
        self._emit(changes, ("user_deleted", name))
        return None, changes

    def change_password(self, name: str, password_hash: str) -> tuple[AdminError | None, Changes]:
        return self._replace_user(name, password_hash=password_hash)

    def set_user_tags(self, name: str, tags: Sequence[str]) -> tuple[AdminError | None, Changes]:
        return self._replace_user(name, tags=list(tags))

    def _replace_user(self, name: str, **fields: Any) -> tuple[AdminError | None, Changes]:
        u = self.access.users.get(name)
        if u is None:
            return no_user(name), []
        changes: Changes = []
        self._emit(changes, ("user", name, fields.get("password_hash", u.password_hash),
                             list(fields.get("tags", u.tags))))
        return None, changes

    def users(self) -> list[User]:
        return [u for _, u in sorted(self.access.users.items())]

    def set_permissions(self, user: str, vhost: str, configure: str, write: str,
                        read: str) -> tuple[AdminError | None, Changes]:
        """rabbit_auth_backend_internal:set_permissions: regexes first, then the user, then the vhost."""
        for pattern in (configure, write, read):
            compiled = compile_pattern(pattern)
            if isinstance(compiled, str):
                return AdminError(f"invalid regular expression '{pattern}': {compiled}"), []
        if user not in self.access.users:
            return AdminError(f"User {user} does not exist", EX_NOUSER), []
        if vhost not in self._vhosts:
            return AdminError(f"Virtual host {vhost} does not exist"), []
        changes: Changes = []
        self._emit(changes, ("permission", user, vhost, configure, write, read))
        return None, changes

    def clear_permissions(self, user: str, vhost: str) -> tuple[AdminError | None, Changes]:
        if user not in self.access.users:
            return AdminError(f"User {user} does not exist", EX_NOUSER), []
        if vhost not in self._vhosts:
            return AdminError(f"Virtual host {vhost} does not exist"), []
        changes: Changes = []
        if (user, vhost) in self.access.permissions:
            self._emit(changes, ("permission_cleared", user, vhost))
        return None, changes

    def permissions(self, vhost: str | None = None, user: str | None = None) -> list[Permission]:
        return [p for _, p in sorted(self.access.permissions.items())
                if (vhost is None or p.vhost == vhost) and (user is None or p.user == user)]

    def check_login(self, user: str, password: str) -> bool:
        return self.access.check_login(user, password)

    def vhost_access_error(self, user: str, vhost: str) -> AmqpError | None:
        return self.access.vhost_access_error(user, vhost)

    def check_permission(self, user: str, vhost: str, perm: str, kind: str, name: str) -> AmqpError | None:
        """None when `user` may `perm` ("configure"/"write"/"read") the queue or exchange `name`, else 403."""
        return self.access.check_permission(user, vhost, perm, kind, name)

    # ---------------------------------------------------------------- policies (admin)
    def set_policy(self, vhost: str, name: str, pattern: str, definition: dict[str, Any], *, priority: int = 0,
                   apply_to: str = "all", operator: bool = False) -> tuple[AdminError | None, Changes]:
        if vhost not in self._vhosts:
            return no_vhost(vhost), []
        error = policies.validate(pattern, apply_to, definition, operator=operator)
        if error is not None:
            return error, []
        changes: Changes = []
        self._emit(changes, policies.policy_change(Policy(vhost, name, pattern, apply_to, dict(definition),
                                                          priority, operator)))
        return None, changes

    def clear_policy(self, vhost: str, name: str, *, operator: bool = False) -> tuple[AdminError | None, Changes]:
        if vhost not in self._vhosts:
            return no_vhost(vhost), []
        if (name, operator) not in self._policies.get(vhost, {}):
            return AdminError("Parameter does not exist"), []
        changes: Changes = []
        self._emit(changes, ("policy_cleared", vhost, name, operator))
        return None, changes

    def policies(self, vhost: str | None = None, *, operator: bool | None = None) -> list[Policy]:
        """By vhost, then priority (highest first), then name, as list_policies shows them."""
        return [p for v in sorted(self._policies) if vhost is None or v == vhost
                for p in sorted(self._policies[v].values(), key=lambda p: (-p.priority, p.name))
                if operator is None or p.operator == operator]

    def queue_policy(self, q: QueueRecord) -> tuple[str, str, dict[str, Any]]:
        """(policy name, operator policy name, effective settings) for a queue; names "" when none."""
        pols = list(self._policies.get(q.vhost, {}).values())
        policy = policies.select([p for p in pols if not p.operator], "queue", q.name)
        operator = policies.select([p for p in pols if p.operator], "queue", q.name)
        values = policies.merged(policy, operator)
        return (policy.name if policy else "", operator.name if operator else "",
                policies.queue_settings(q.arguments, values))

    def _exchange_policy(self, vhost: str, exchange: str) -> Policy | None:
        pols = [p for p in self._policies.get(vhost, {}).values() if not p.operator]
        return policies.select(pols, "exchange", exchange) if pols else None

    def exchange_policy_name(self, vhost: str, exchange: str) -> str:
        policy = self._exchange_policy(vhost, exchange)
        return policy.name if policy is not None else ""

    def _policy_alternate(self, vhost: str, exchange: str) -> str | None:
        policy = self._exchange_policy(vhost, exchange)
        value = policy.definition.get("alternate-exchange") if policy is not None else None
        return value if isinstance(value, str) else None

    # ---------------------------------------------------------------- routing (hot path)
    def exchange_for_publish(self, vhost: str, name: str) -> ExchangeRecord | AmqpError:
        vh = self._vhosts.get(vhost)
        x = vh.exchanges.get(name) if vh is not None else None
        if x is None:
            return texts.not_found("exchange", name, vhost)
        if x.internal:
            return texts.publish_to_internal(name, vhost)
        return x

    def route(self, vhost: str, exchange: str, routing_key: str, headers: dict | None = None) -> list[str]:
        """Names of the queues a message reaches, deduplicated; [] when none (or no such exchange)."""
        vh = self._vhosts.get(vhost)
        if vh is None:
            return []
        if exchange == DEFAULT_EXCHANGE:
            return [routing_key] if routing_key in vh.queues else []
        cache_key = (vhost, exchange, routing_key)
        hit = self._route_cache.get(cache_key)
        if hit is not None:
            return list(hit)
        x = vh.exchanges.get(exchange)
        if x is None:
            return []
        queues: dict[str, None] = {}
        seen = {exchange}
        work = [x]
        cacheable = True
        while work:
            x = work.pop(0)
            if x.type == "headers":
                cacheable = False
            matcher = vh.matchers.get(x.name)
            next_exchanges: list[str] = []
            matched = False
            for kind, name in (matcher.match(routing_key, headers) if matcher is not None else ()):
                matched = True
                if kind == QUEUE:
                    queues[name] = None
                else:
                    next_exchanges.append(name)
            alternate = x.alternate if x.alternate is not None else self._policy_alternate(vhost, x.name)
            if not matched and alternate is not None:
                next_exchanges.append(alternate)
            for name in next_exchanges:
                if name not in seen:
                    seen.add(name)
                    nx = vh.exchanges.get(name)
                    if nx is not None:
                        work.append(nx)
        result = tuple(queues)
        if cacheable:
            if len(self._route_cache) >= route_cache_entries_max:
                self._route_cache.clear()
            self._route_cache[cache_key] = result
        return list(result)


def _discard(index: dict, key: Hashable, binding: BindingKey) -> None:
    entries = index[key]
    del entries[binding]
    if not entries:
        del index[key]


def _exchange_change(x: ExchangeRecord) -> tuple:
    return ("exchange", x.vhost, x.name, x.type, x.durable, x.auto_delete, x.internal, dict(x.arguments))


def _queue_change(q: QueueRecord) -> tuple:
    return ("queue", q.vhost, q.name, q.durable, q.exclusive_owner, q.auto_delete, dict(q.arguments))


def _binding_change(op: str, b: BindingRecord) -> tuple:
    return (op, b.vhost, b.source, b.destination_kind, b.destination, b.routing_key, dict(b.arguments))


def _exchange_inequivalence(current: ExchangeRecord, type_: str, durable: bool, auto_delete: bool,
                            internal: bool, args: dict[str, Any]) -> AmqpError | None:
    """rabbit_exchange:assert_equivalence: type, durable, auto_delete, internal, then arguments."""
    for key, have, got in (("type", current.type, type_), ("durable", current.durable, durable),
                           ("auto_delete", current.auto_delete, auto_delete), ("internal", current.internal, internal)):
        pair = inequivalence(have, got)
        if pair is not None:
            return texts.inequivalent("exchange", current.name, current.vhost, key, *pair)
    return qargs.exchange_args_inequivalence(current.name, current.vhost, current.arguments, args)
