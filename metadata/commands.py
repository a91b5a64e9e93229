"""The registry machine's command set: every change to vhosts, users, permissions, policies,
exchanges, queues and bindings is one of these commands, applied in one place,
`Registry.apply_command(cmd) -> (result, changes)` (registry.py).

Theory of operation: a command is a frozen record of plain values that says everything its
outcome depends on besides the registry's state, so applying it is a deterministic function of
(state, command): the same command log applied to the same start state gives the same results,
the same change records (changes.py) and the same state on every copy. That is what lets the
metadata be replicated as a Raft log of these commands (issue 11): whoever proposes a command
decides its inputs before proposing, e.g. a server-named queue's name (`PutQueue.server_named`,
named by `Registry.fresh_queue_name`) and a password's salted hash (`AddUser.password_hash`: the
plain password never enters a command). Validation happens when the command is applied, against
the state it is applied to, exactly as RabbitMQ 3.10 validates (first failure wins); a refused
command produces no change records.

Results, by command: topology commands answer AMQP errors as values (`AmqpError`, wire/errors.py),
admin commands answer `AdminError` values (admin_errors.py):
- `PutExchange`, `RemoveExchange`, `AddBinding`, `RemoveBinding`: None or an AmqpError;
- `PutQueue`: the QueueRecord (`created` set when this command made it) or an AmqpError;
- `RemoveQueue`: the removed QueueRecord, None when there was none (RabbitMQ answers delete-ok), or
  an AmqpError;
- `RemoveOwnedQueues`: the QueueRecords removed (an owner connection closed);
- `RemoveNodeTransients`, `ForgetNodeQueues`: the QueueRecords removed (their node restarted, is
  gone, or was forgotten);
- `SetQueueMembers`, `SetStreamReplicas`: the updated QueueRecord, or None when the queue (that
  incarnation) is gone;
- `LoadDefinitions`: None;
- `AddVhost`: None; `RemoveVhost`: the QueueRecords that went with the vhost, or an AdminError;
- user, permission, topic permission, limit and policy commands: None or an AdminError.

Deliberately not commands: queries (passive declares, access checks, listings) change nothing and
are answered from a copy (registry.py's query methods). Queue-level if-unused / if-empty are the
queue actor's to check before `RemoveQueue` is applied.
"""
from __future__ import annotations

import typing
from dataclasses import dataclass, field
from typing import Any, Hashable

from wire.codec import FieldTable


# -- topology -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PutExchange:
    """exchange.declare (not passive): create, or check equivalence with the existing exchange."""

    vhost: str
    name: str
    type: str
    durable: bool = False
    auto_delete: bool = False
    internal: bool = False
    arguments: FieldTable = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RemoveExchange:
    vhost: str
    name: str
    if_unused: bool = False


@dataclass(frozen=True, slots=True)
class PutQueue:
    """queue.declare (not passive). `server_named`: the proposer chose `name` for a declare that
    named no queue, so the reserved "amq." prefix is the server's own and is allowed."""

    vhost: str
    name: str
    durable: bool = False
    exclusive: bool = False
    auto_delete: bool = False
    arguments: FieldTable = field(default_factory=dict)
    owner: Hashable | None = None
    server_named: bool = False
    home: str = ""  # the host the proposer places a new queue on (client-local: one of its own)
    members: tuple[str, ...] = ()  # a new quorum queue's member nodes, as the proposer placed them
    created_ms: int = 0  # and when (the proposer's clock)
    relaxed: bool = False  # the proposer's relaxed_checks_on_redeclaration (metadata/quorum.py)
    replicas: tuple[str, ...] = ()  # a new replicated stream's member nodes, the leader first


@dataclass(frozen=True, slots=True)
class RemoveQueue:
    vhost: str
    name: str
    owner: Hashable | None = None


@dataclass(frozen=True, slots=True)
class _Binding:
    vhost: str
    destination_kind: str  # "queue" (queue.bind) or "exchange" (exchange.bind)
    destination: str
    source: str
    routing_key: str = ""
    arguments: FieldTable = field(default_factory=dict)
    owner: Hashable | None = None


@dataclass(frozen=True, slots=True)
class AddBinding(_Binding):
    pass


@dataclass(frozen=True, slots=True)
class RemoveBinding(_Binding):
    pass


@dataclass(frozen=True, slots=True)
class RemoveOwnedQueues:
    """The connection `owner` closed: its exclusive queues go, with their bindings. With `prefix`,
    every owner whose name starts with `owner` (the connections of a connection host that
    restarted: owners are named `HOST:...`)."""

    owner: Hashable
    prefix: bool = False


@dataclass(frozen=True, slots=True)
class RemoveNodeTransients:
    """`node` restarted or is gone: the queues that cannot outlive it go, with their bindings -
    the non-durable queues homed on it and the exclusive queues of its connections (RabbitMQ deletes
    both when their node goes down). Hosts and owners are named `NODE:...` (actors/placement.py)."""

    node: str


@dataclass(frozen=True, slots=True)
class ForgetNodeQueues:
    """`node` left the cluster for good (forget_cluster_node): every queue homed on it goes, durable
    ones too, as RabbitMQ deletes a forgotten node's durable classic queues; a replicated stream
    stays, as rabbit_amqqueue:forget_node_for_queue/2 leaves streams, and loses its member there
    by a SetStreamReplicas of its own."""

    node: str


@dataclass(frozen=True, slots=True)
class LoadDefinitions:
    """Load a definitions file's records (metadata/definitions.py) into the machine: a node that
    held a definitions file before the metadata was replicated brings it in once, as its first entry."""

    records: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class SetQueueMembers:
    """A quorum queue's member nodes after a membership change its Raft group has committed
    (actors/node/quorum_membership.py). `home` names the incarnation: a change that arrives after
    the queue was deleted and declared again changes nothing."""

    vhost: str
    name: str
    home: str
    members: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SetStreamReplicas:
    """A replicated stream's member nodes after `warrenctl add_replica` / `delete_replica`
    (actors/node/stream_membership.py); its members act on the committed record. `home` names the
    incarnation, as for SetQueueMembers."""

    vhost: str
    name: str
    home: str
    replicas: tuple[str, ...]


# -- vhosts, users, permissions -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AddVhost:
    vhost: str


@dataclass(frozen=True, slots=True)
class RemoveVhost:
    vhost: str


@dataclass(frozen=True, slots=True)
class AddUser:
    name: str
    password_hash: str
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RemoveUser:
    name: str


@dataclass(frozen=True, slots=True)
class ChangePassword:
    name: str
    password_hash: str


@dataclass(frozen=True, slots=True)
class SetUserTags:
    name: str
    tags: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SetPermissions:
    user: str
    vhost: str
    configure: str
    write: str
    read: str


@dataclass(frozen=True, slots=True)
class ClearPermissions:
    user: str
    vhost: str


@dataclass(frozen=True, slots=True)
class SetTopicPermissions:
    user: str
    vhost: str
    exchange: str
    write: str
    read: str


@dataclass(frozen=True, slots=True)
class ClearTopicPermissions:
    """One exchange's topic permissions of the user in the vhost, or (`exchange` None) all of them."""

    user: str
    vhost: str
    exchange: str | None = None


# -- limits ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SetVhostLimits:
    """rabbitmqctl set_vhost_limits (the value replaces the vhost's limits), or with `merge` the
    HTTP API's PUT of one limit (rabbit_vhost_limit:update_limit)."""

    vhost: str
    limits: dict[str, Any]
    merge: bool = False


@dataclass(frozen=True, slots=True)
class ClearVhostLimits:
    """rabbitmqctl clear_vhost_limits (`name` None: the whole value), or the HTTP API's DELETE of
    one limit (rabbit_vhost_limit:clear_limit: the others stay)."""

    vhost: str
    name: str | None = None


@dataclass(frozen=True, slots=True)
class SetUserLimits:
    """rabbitmqctl set_user_limits: merged into the user's limits (internal_user:update_limits)."""

    user: str
    limits: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ClearUserLimits:
    """One limit of the user, or every one (`name` "all", as rabbitmqctl's clear_user_limits)."""

    user: str
    name: str


# -- policies -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SetPolicy:
    vhost: str
    name: str
    pattern: str
    definition: dict[str, Any]
    priority: int = 0
    apply_to: str = "all"
    operator: bool = False


@dataclass(frozen=True, slots=True)
class ClearPolicy:
    vhost: str
    name: str
    operator: bool = False


Command = (PutExchange | RemoveExchange | PutQueue | RemoveQueue | AddBinding | RemoveBinding | RemoveOwnedQueues
           | RemoveNodeTransients | ForgetNodeQueues | SetQueueMembers | SetStreamReplicas
           | LoadDefinitions | AddVhost | RemoveVhost | AddUser
           | RemoveUser | ChangePassword | SetUserTags | SetPermissions | ClearPermissions | SetTopicPermissions
           | ClearTopicPermissions | SetVhostLimits | ClearVhostLimits | SetUserLimits | ClearUserLimits | SetPolicy
           | ClearPolicy)
COMMANDS: tuple[type, ...] = typing.get_args(Command)
