"""The registry's change records: what one applied command did, as data every copy can replay.

Theory of operation: the authoritative registry expresses the whole effect of a command, cascades
included, as a list of these records, applying each to itself as it produces it (registry.py).
Every other copy (each host's replica, a registry rebuilt from the definitions file, a late joiner
fed a snapshot) only applies records, so after the same records every copy holds the same state.
A snapshot is itself a record list that starts with `Reset`.

Invariants:
- applying a record never fails on a copy that held the state the authority held when it made it:
  records carry no validation, only facts;
- a queue or exchange is deleted only after the `Unbound` records of every binding that names it,
  so every prefix of a record list leaves a consistent registry;
- `VhostDeleted` drops the vhost with its exchanges, queues, bindings, policies and limits in one
  step (its permissions and topic permissions are cleared by records before it); `UserDeleted`
  drops the user with its limits (its permissions are cleared before it the same way).

The records are frozen dataclasses of plain values (str, int, bool, bytes, dict, tuple), so they
cross processes inside `MetadataChanged` (actors/messages/node.py registers them as messages) and
they are what the definitions file encodes (definitions.py). Sequences arrive as tuples from
msgpack; `tags` is a tuple for that reason.
"""
from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Hashable

from wire.codec import FieldTable


# -- the whole state --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reset:
    """Forget everything (the first record of a snapshot)."""


# -- topology: vhosts, exchanges, queues, bindings --------------------------------------------------


@dataclass(frozen=True, slots=True)
class VhostCreated:
    vhost: str


@dataclass(frozen=True, slots=True)
class VhostDeleted:
    vhost: str


@dataclass(frozen=True, slots=True)
class ExchangeCreated:
    vhost: str
    name: str
    type: str
    durable: bool
    auto_delete: bool
    internal: bool
    arguments: FieldTable


@dataclass(frozen=True, slots=True)
class ExchangeDeleted:
    vhost: str
    name: str


@dataclass(frozen=True, slots=True)
class QueueCreated:
    vhost: str
    name: str
    durable: bool
    exclusive_owner: Hashable | None  # the connection that owns an exclusive queue
    auto_delete: bool
    arguments: FieldTable
    home: str = ""  # the host its actor runs on (actors/placement.py); "" until a node adopts it
    members: tuple[str, ...] = ()  # a quorum queue's member nodes (QueueRecord.members)
    created_ms: int = 0
    replicas: tuple[str, ...] = ()  # a replicated stream's member nodes (QueueRecord.replicas)


@dataclass(frozen=True, slots=True)
class QueueDeleted:
    vhost: str
    name: str
    home: str = ""  # where its actor ran, so every copy can tell that actor's host it is gone
    replicas: tuple[str, ...] = ()  # a replicated stream's member nodes (each tells its own member)
    members: tuple[str, ...] = ()  # a quorum queue's member nodes (each deletes its own member)


@dataclass(frozen=True, slots=True)
class QueueMembersSet:
    """A quorum queue's member nodes changed (in the order they joined: the first leader's node first)."""

    vhost: str
    name: str
    members: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class StreamReplicasSet:
    """A replicated stream's member nodes changed (QueueRecord.replicas; new members last)."""

    vhost: str
    name: str
    replicas: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Binding:
    vhost: str
    source: str
    destination_kind: str  # "queue" or "exchange"
    destination: str
    routing_key: str
    arguments: FieldTable


@dataclass(frozen=True, slots=True)
class Bound(_Binding):
    pass


@dataclass(frozen=True, slots=True)
class Unbound(_Binding):
    pass


# -- access: users and permissions ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class UserSet:
    """A user added, or its password hash or tags replaced (only hashes, never passwords)."""

    name: str
    password_hash: str
    tags: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class UserDeleted:
    name: str


@dataclass(frozen=True, slots=True)
class PermissionSet:
    user: str
    vhost: str
    configure: str
    write: str
    read: str


@dataclass(frozen=True, slots=True)
class PermissionCleared:
    user: str
    vhost: str


@dataclass(frozen=True, slots=True)
class TopicPermissionSet:
    """A user's write and read regexes for the routing keys of one topic exchange of a vhost."""

    user: str
    vhost: str
    exchange: str
    write: str
    read: str


@dataclass(frozen=True, slots=True)
class TopicPermissionCleared:
    user: str
    vhost: str
    exchange: str


# -- limits: per vhost (a runtime parameter in RabbitMQ) and per user ---------------------------------


@dataclass(frozen=True, slots=True)
class VhostLimitsSet:
    """The vhost's whole limits value, as set (`{}` is a value: RabbitMQ keeps an empty parameter)."""

    vhost: str
    limits: dict[str, Any]


@dataclass(frozen=True, slots=True)
class VhostLimitsCleared:
    vhost: str


@dataclass(frozen=True, slots=True)
class UserLimitsSet:
    """The user's whole limits value after the change (`{}`: none)."""

    user: str
    limits: dict[str, Any]


# -- policies ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PolicySet:
    vhost: str
    name: str
    pattern: str
    apply_to: str
    definition: dict[str, Any]
    priority: int
    operator: bool


@dataclass(frozen=True, slots=True)
class PolicyCleared:
    vhost: str
    name: str
    operator: bool


Change = (Reset | VhostCreated | VhostDeleted | ExchangeCreated | ExchangeDeleted | QueueCreated | QueueDeleted
          | QueueMembersSet | StreamReplicasSet | Bound | Unbound | UserSet | UserDeleted | PermissionSet
          | PermissionCleared | TopicPermissionSet | TopicPermissionCleared | VhostLimitsSet | VhostLimitsCleared
          | UserLimitsSet
          | PolicySet | PolicyCleared)
RECORDS: tuple[type, ...] = typing.get_args(Change)
# how a command hands its records to the registry, which applies each one as it is emitted
Emit = Callable[[Change], None]
