"""The registry: vhosts, users, permissions, policies, exchanges, queues and bindings as one
deterministic state machine, and the reads every host makes of it (routing, access checks).

Theory of operation: one class serves every copy. The authoritative copy (the node) runs the
machine's commands (commands.py, the machine's command set) through `apply_command(cmd) ->
(result, changes)`, the one place state changes: the command validates against the current state
exactly as RabbitMQ 3.10 does and expresses its whole effect, cascades included, as change records
(changes.py), each applied to this copy as it is produced. Every other copy (a host's replica, a
registry loaded from the definitions file, a late joiner) only `apply`s records, so a copy is the
authoritative registry minus validation. Applying a command is a deterministic function of (state,
command): what is not in the state comes in the command (a server-named queue's name, a password's
hash), which is what lets issue 11 replicate the commands as the metadata Raft group's log.

The parts, by concern: topology.py (per vhost: exchanges, queues, bindings, their cascades),
access.py (users, permissions, topic permissions, and the access decisions: logins, vhost access,
resource and topic permissions), limits.py (vhost and user limits and the refusals they make),
policies.py (policies and what they give queues and exchanges), routing.py (publishes through the
topology, with a route cache that every applied record clears). This module owns what crosses
them: vhost lifecycle (a vhost comes with its predeclared exchanges and goes with its permissions,
topic permissions, limits, policies and queues), a user's (it goes with its limits), the dispatch
of records and commands by type, snapshots, and loading the definitions file.

`fresh_queue_name` is for proposers, not the machine: it draws from the injected rng (a replica has
none and names deterministically from a counter) and names a queue no copy has yet.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any

from metadata import names
from metadata.access import AccessControl, Permission, TopicPermission, User
from metadata.admin_errors import AdminError, no_vhost
from metadata.changes import (
    Bound, Change, Emit, ExchangeCreated, ExchangeDeleted, PermissionCleared, PermissionSet, PolicyCleared, PolicySet,
    QueueCreated, QueueDeleted, QueueMembersSet, Reset, StreamReplicasSet, TopicPermissionCleared, TopicPermissionSet,
    Unbound, UserDeleted, UserLimitsSet, UserSet, VhostCreated, VhostDeleted, VhostLimitsCleared, VhostLimitsSet,
)
from metadata.commands import (
    AddBinding, AddUser, AddVhost, ChangePassword, ClearPermissions, ClearPolicy, ClearTopicPermissions,
    ClearUserLimits, ClearVhostLimits, Command, ForgetNodeQueues, LoadDefinitions, PutExchange, PutQueue,
    RemoveBinding, RemoveExchange, RemoveNodeTransients, RemoveOwnedQueues, RemoveQueue, RemoveUser, RemoveVhost,
    SetPermissions, SetPolicy, SetQueueMembers, SetStreamReplicas, SetTopicPermissions, SetUserLimits, SetUserTags,
    SetVhostLimits,
)
from metadata.limits import LimitTable
from metadata.policies import Policy, PolicyTable
from metadata.records import EXCHANGE, QUEUE, BindingRecord, ExchangeRecord, QueueRecord
from metadata.routing import Router
from metadata.topology import EXCHANGE_TYPES, Topology
from wire.errors import AmqpError

if TYPE_CHECKING:
    from random import Random

__all__ = ["Registry", "EXCHANGE_TYPES"]


class Registry:
    def __init__(self, rng: "Random | None" = None) -> None:
        self._rng = rng
        self._names_issued = 0
        self.topology = Topology()
        self.access = AccessControl(self.vhost_exists)
        self.limits = LimitTable(self.vhost_exists, self.access.users.__contains__)
        self.topology.queue_refusal = self.limits.queue_refusal
        self.policies_table = PolicyTable(self.vhost_exists)
        self._router = Router(self.topology, self.policies_table)
        # the hot path (every publish) calls these without a forwarding frame
        self.route = self._router.route
        self.exchange_for_publish = self._router.exchange_for_publish
        self.check_queue_access = self.topology.check_queue_access
        self._appliers: dict[type, Callable[[Any], None]] = {
            Reset: self._reset, VhostCreated: self.topology.vhost_created, VhostDeleted: self._vhost_deleted,
            ExchangeCreated: self.topology.exchange_created, ExchangeDeleted: self.topology.exchange_deleted,
            QueueCreated: self.topology.queue_created, QueueDeleted: self.topology.queue_deleted,
            QueueMembersSet: self.topology.queue_members_set, StreamReplicasSet: self.topology.stream_replicas_set,
            Bound: self.topology.bound, Unbound: self.topology.unbound,
            UserSet: self.access.user_set, UserDeleted: self._user_deleted,
            PermissionSet: self.access.permission_set, PermissionCleared: self.access.permission_cleared,
            TopicPermissionSet: self.access.topic_permission_set,
            TopicPermissionCleared: self.access.topic_permission_cleared,
            VhostLimitsSet: self.limits.vhost_limits_set, VhostLimitsCleared: self.limits.vhost_limits_cleared,
            UserLimitsSet: self.limits.user_limits_set,
            PolicySet: self.policies_table.policy_set, PolicyCleared: self.policies_table.policy_cleared,
        }
        self._commands: dict[type, Callable[[Any, Emit], Any]] = {
            PutExchange: self.topology.put_exchange, RemoveExchange: self.topology.remove_exchange,
            PutQueue: self.topology.put_queue, RemoveQueue: self.topology.remove_queue,
            AddBinding: self.topology.add_binding, RemoveBinding: self.topology.remove_binding,
            RemoveOwnedQueues: self.topology.remove_owned_queues,
            RemoveNodeTransients: self.topology.remove_node_transients,
            ForgetNodeQueues: self.topology.forget_node_queues,
            SetQueueMembers: self.topology.set_queue_members, SetStreamReplicas: self.topology.set_stream_replicas,
            LoadDefinitions: lambda cmd, emit: self._load(cmd.records, emit),
            AddVhost: self._add_vhost, RemoveVhost: self._remove_vhost,
            AddUser: self.access.add_user, RemoveUser: self.access.remove_user,
            ChangePassword: self.access.change_password, SetUserTags: self.access.set_user_tags,
            SetPermissions: self.access.set_permissions, ClearPermissions: self.access.clear_permissions,
            SetTopicPermissions: self.access.set_topic_permissions,
            ClearTopicPermissions: self.access.clear_topic_permissions,
            SetVhostLimits: self.limits.set_vhost, ClearVhostLimits: self.limits.clear_vhost,
            SetUserLimits: self.limits.set_user, ClearUserLimits: self.limits.clear_user,
            SetPolicy: self.policies_table.set, ClearPolicy: self.policies_table.clear,
        }
        self.apply_command(AddVhost("/"))

    # ---------------------------------------------------------------- the machine
    def apply_command(self, cmd: Command) -> tuple[Any, list[Change]]:
        """Run one command of the machine's command set (commands.py): its result and the change
        records it applied, in order (none when it was refused)."""
        changes: list[Change] = []

        def emit(change: Change) -> None:
            self._apply_one(change)
            changes.append(change)
        return self._commands[type(cmd)](cmd, emit), changes

    def apply(self, changes: Sequence[Change]) -> None:
        """Apply change records made by another copy (a replica's only input)."""
        for change in changes:
            self._apply_one(change)

    def _apply_one(self, change: Change) -> None:
        self._router.clear()
        applier = self._appliers.get(type(change))
        if applier is None:
            raise AssertionError(f"not a change record: {change!r}")
        applier(change)

    def _reset(self, _: Reset) -> None:
        self.topology.reset()
        self.access.reset()
        self.limits.reset()
        self.policies_table.reset()

    def _user_deleted(self, c: UserDeleted) -> None:
        self.access.user_deleted(c)
        self.limits.user_deleted(c.name)

    def _vhost_deleted(self, c: VhostDeleted) -> None:
        self.topology.vhost_deleted(c)
        self.policies_table.vhost_deleted(c.vhost)
        self.limits.vhost_deleted(c.vhost)

    def snapshot(self) -> list[Change]:
        """Records that rebuild this registry on any copy: `Reset` first."""
        return [Reset(), *self.topology.snapshot(), *self.access.snapshot(), *self.limits.snapshot(),
                *self.policies_table.snapshot()]

    def load_definitions(self, records: Sequence[Change]) -> list[Change]:
        """Apply a definitions file's records; a vhost gets its predeclared exchanges as AddVhost gives."""
        return self.apply_command(LoadDefinitions(tuple(records)))[1]

    def _load(self, records: Sequence[Change], emit: Emit) -> None:
        for record in records:
            if isinstance(record, VhostCreated):
                self.topology.add_vhost(record.vhost, emit)
            else:
                emit(record)

    # ---------------------------------------------------------------- vhost lifecycle
    def _add_vhost(self, cmd: AddVhost, emit: Emit) -> None:
        self.topology.add_vhost(cmd.vhost, emit)

    def _remove_vhost(self, cmd: RemoveVhost, emit: Emit) -> list[QueueRecord] | AdminError:
        """The queues that went with the vhost (their actors must be deleted), or an error."""
        if not self.vhost_exists(cmd.vhost):
            return no_vhost(cmd.vhost)
        gone = self.topology.queues(cmd.vhost)
        for cleared in self.access.vhost_deleted(cmd.vhost):
            emit(cleared)
        for cleared in self.policies_table.cleared_with_vhost(cmd.vhost):
            emit(cleared)
        emit(VhostDeleted(cmd.vhost))
        return gone

    # ---------------------------------------------------------------- proposer's helper
    def fresh_queue_name(self, vhost: str) -> str:
        """An "amq.gen-..." name no queue of `vhost` has, for a declare that named no queue."""
        while True:
            self._names_issued += 1
            name = names.server_name(self._rng, self._names_issued)
            if not self.topology.has_queue(vhost, name):
                return name

    # ---------------------------------------------------------------- queries
    def vhost_exists(self, vhost: str) -> bool:
        return vhost in self.topology.vhosts

    def vhosts(self) -> list[str]:
        return sorted(self.topology.vhosts)

    def check_exchange(self, vhost: str, name: str) -> AmqpError | None:
        """A passive exchange.declare: None when the exchange exists."""
        return self.topology.check_exchange(vhost, name)

    def queues(self, vhost: str | None = None) -> list[QueueRecord]:
        return self.topology.queues(vhost)

    def queue_count(self) -> int:
        return sum(len(vh.queues) for vh in self.topology.vhosts.values())

    def queue(self, vhost: str, name: str) -> QueueRecord | None:
        vh = self.topology.vhosts.get(vhost)
        return None if vh is None else vh.queues.get(name)

    def quorum_members(self, home: str) -> tuple[str, ...]:
        """The member nodes of the quorum queue with this home; () when there is none (a scan: a
        channel asks once per quorum queue it starts talking to)."""
        for rec in self.topology.queues():
            if rec.home == home:
                return rec.members
        return ()

    def queue_home(self, vhost: str, name: str) -> str:
        """The host a queue's actor runs on (on every publish's path: a dict look-up each)."""
        return self.topology.vhosts[vhost].queues[name].home

    def exchange(self, vhost: str, name: str) -> ExchangeRecord | None:
        vh = self.topology.vhosts.get(vhost)
        return None if vh is None else vh.exchanges.get(name)

    def exchanges(self, vhost: str | None = None) -> list[ExchangeRecord]:
        return self.topology.exchanges(vhost)

    def bindings(self, vhost: str | None = None) -> list[BindingRecord]:
        return self.topology.bindings(vhost)

    def users(self) -> list[User]:
        return [u for _, u in sorted(self.access.users.items())]

    def permissions(self, vhost: str | None = None, user: str | None = None) -> list[Permission]:
        return [p for _, p in sorted(self.access.permissions.items())
                if (vhost is None or p.vhost == vhost) and (user is None or p.user == user)]

    def topic_permissions(self, vhost: str | None = None, user: str | None = None) -> list[TopicPermission]:
        return self.access.topic_permission_list(vhost, user)

    def vhost_limits(self) -> dict[str, dict[str, Any]]:
        """Each vhost's limits value (those that have one), by vhost."""
        return dict(sorted(self.limits.vhosts.items()))

    def user_limits(self, user: str) -> dict[str, Any]:
        return dict(self.limits.users.get(user, {}))

    # access decisions (metadata/access.py, metadata/limits.py): pure functions of the registry
    # and the facts a shell brings
    def check_login(self, user: str, password: str) -> bool:
        return self.access.login(user, password)

    def vhost_access_error(self, user: str, vhost: str) -> AmqpError | None:
        return self.access.vhost_access_error(user, vhost)

    def check_permission(self, user: str, vhost: str, perm: str, kind: str, name: str) -> AmqpError | None:
        """None when `user` may `perm` ("configure"/"write"/"read") the queue or exchange `name`, else 403."""
        return self.access.check_permission(user, vhost, perm, kind, name)

    def check_topic_permission(self, user: str, vhost: str, exchange: str, perm: str, routing_key: str,
                               variables: dict[str, str]) -> AmqpError | None:
        """None when `user` may write (publish) or read (bind) `routing_key` on topic exchange `exchange`."""
        return self.access.check_topic_permission(user, vhost, exchange, perm, routing_key, variables)

    def queue_limit_error(self, vhost: str, name: str) -> AmqpError | None:
        """The vhost's max-queues refusal for a declare of `name`, when it does not exist yet."""
        vh = self.topology.vhosts.get(vhost)
        if vh is None or name in vh.queues:
            return None
        return self.limits.queue_refusal(vhost, name, len(vh.queues))

    def policies(self, vhost: str | None = None, *, operator: bool | None = None) -> list[Policy]:
        """By vhost, then priority (highest first), then name, as list_policies shows them."""
        return self.policies_table.list(vhost, operator=operator)

    def queue_policy(self, q: QueueRecord) -> tuple[str, str, dict[str, Any]]:
        """(policy name, operator policy name, effective settings) for a queue; names "" when none."""
        return self.policies_table.queue_policy(q)

    def queue_policy_definition(self, vhost: str, name: str, queue_type: str = "classic") -> dict[str, Any]:
        """What the policies that apply to a queue (existing or about to be) set, merged: rabbit_policy:get/2."""
        return self.policies_table.definition(vhost, name, queue_type)

    def exchange_policy_name(self, vhost: str, exchange: str) -> str:
        policy = self.policies_table.exchange_policy(vhost, exchange)
        return policy.name if policy is not None else ""

    # ---------------------------------------------------------------- shorthands
    # One command each, by the names tests and benchmarks drive a registry with; the node builds
    # commands itself. A passive declare is a query and changes nothing.
    def declare_exchange(self, vhost: str, name: str, type: str, *, passive: bool = False, durable: bool = False,
                         auto_delete: bool = False, internal: bool = False,
                         arguments: dict[str, Any] | None = None) -> tuple[AmqpError | None, list[Change]]:
        if passive:
            return self.check_exchange(vhost, name), []
        return self.apply_command(PutExchange(vhost, name, type, durable, auto_delete, internal, arguments or {}))

    def delete_exchange(self, vhost: str, name: str, *, if_unused: bool = False) -> tuple[Any, list[Change]]:
        return self.apply_command(RemoveExchange(vhost, name, if_unused))

    def declare_queue(self, vhost: str, name: str, *, passive: bool = False, durable: bool = False,
                      exclusive: bool = False, auto_delete: bool = False, arguments: dict[str, Any] | None = None,
                      owner: Hashable | None = None) -> tuple[QueueRecord | AmqpError, list[Change]]:
        if passive:
            return self.check_queue_access(vhost, name, owner), []
        server_named = names.strip_cr_lf(name) == ""
        if server_named:
            name = self.fresh_queue_name(vhost)
        return self.apply_command(PutQueue(vhost, name, durable, exclusive, auto_delete, arguments or {}, owner,
                                           server_named))

    def delete_queue(self, vhost: str, name: str, owner: Hashable | None) -> tuple[Any, list[Change]]:
        return self.apply_command(RemoveQueue(vhost, name, owner))

    def bind_queue(self, vhost: str, queue: str, exchange: str, routing_key: str, arguments: dict[str, Any] | None,
                   owner: Hashable | None) -> tuple[AmqpError | None, list[Change]]:
        return self.apply_command(AddBinding(vhost, QUEUE, queue, exchange, routing_key, arguments or {}, owner))

    def unbind_queue(self, vhost: str, queue: str, exchange: str, routing_key: str,
                     arguments: dict[str, Any] | None, owner: Hashable | None) -> tuple[AmqpError | None, list[Change]]:
        return self.apply_command(RemoveBinding(vhost, QUEUE, queue, exchange, routing_key, arguments or {}, owner))

    def bind_exchange(self, vhost: str, destination: str, source: str, routing_key: str,
                      arguments: dict[str, Any] | None) -> tuple[AmqpError | None, list[Change]]:
        return self.apply_command(AddBinding(vhost, EXCHANGE, destination, source, routing_key, arguments or {}))

    def unbind_exchange(self, vhost: str, destination: str, source: str, routing_key: str,
                        arguments: dict[str, Any] | None) -> tuple[AmqpError | None, list[Change]]:
        return self.apply_command(RemoveBinding(vhost, EXCHANGE, destination, source, routing_key, arguments or {}))

    def connection_closed(self, owner: Hashable) -> tuple[list[QueueRecord], list[Change]]:
        return self.apply_command(RemoveOwnedQueues(owner))

    def add_vhost(self, vhost: str) -> tuple[None, list[Change]]:
        return self.apply_command(AddVhost(vhost))

    def delete_vhost(self, vhost: str) -> tuple[list[QueueRecord] | AdminError, list[Change]]:
        return self.apply_command(RemoveVhost(vhost))

    def add_user(self, name: str, password_hash: str, tags: Sequence[str] = ()) -> tuple[Any, list[Change]]:
        return self.apply_command(AddUser(name, password_hash, tuple(tags)))

    def set_permissions(self, user: str, vhost: str, configure: str, write: str, read: str) -> tuple[Any, list[Change]]:
        return self.apply_command(SetPermissions(user, vhost, configure, write, read))

    def set_policy(self, vhost: str, name: str, pattern: str, definition: dict[str, Any], *, priority: int = 0,
                   apply_to: str = "all", operator: bool = False) -> tuple[Any, list[Change]]:
        return self.apply_command(SetPolicy(vhost, name, pattern, definition, priority, apply_to, operator))
