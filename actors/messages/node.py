"""The node protocol: metadata calls from channels, the registry replicas' feed, the queues'
lifecycle, and the connection hosts' admin face.

Channel -> node (each answered with a `Reply`, calls.py): `DeclareExchange`, `DeleteExchange`,
`BindExchange`, `UnbindExchange`, `DeclareQueue` (its value: `QueueDeclared`), `DeleteQueue` (its
value: the message count), `BindQueue`, `UnbindQueue`. The node serves them one at a time, in
arrival order, so the registry sees a serial history.

Replica <-> node: a replica sends `Subscribe` (when its host starts, and when the node host says
`NodeStarted`); the node answers with the snapshot as a first `MetadataChanged` and sends every
later change the same way (the registry's typed change records, metadata/changes.py, registered
here), on the same pipe as its replies (so a channel that got declare-ok routes with a replica that
has the queue). `Sync` asks a replica to answer once everything sent before it is applied.
`QueueHostRestarted` tells connection hosts that a queue host lost its state; a replica passes
`QueuesGone` and `QueueHostRestarted` to its host's channels.

Queue lifecycle: node -> queue manager `CreateQueue`; node -> queue `QueueStats` (value:
`QueueCounts`), `ApplyPolicy`, `Dispose` (value: the message count) and `Purge`
(channel_queue.py); queue -> node `AutoDeleteQueue`; reader -> node `ConnectionClosed`. Node ->
connection admin: `CloseConnections`; connection admin -> connection admin: `TrackedCounts`.

The registry machine's commands (metadata/commands.py) are registered here too: they are what the
metadata Raft group's log will carry between nodes.
"""
from __future__ import annotations

from typing import Any, Hashable

from actors.messages import message, register
from actors.runtime.address import Address
from metadata.changes import RECORDS, Change
from metadata.commands import COMMANDS
from wire.codec import FieldTable

for _cls in RECORDS + COMMANDS:
    register(_cls)

# -- channel -> node: metadata calls ------------------------------------------------------------


@message
class DeclareExchange:
    rid: int
    vhost: str
    exchange: str
    type: str
    passive: bool
    durable: bool
    auto_delete: bool
    internal: bool
    arguments: FieldTable


@message
class DeleteExchange:
    rid: int
    vhost: str
    exchange: str
    if_unused: bool


@message
class BindExchange:
    rid: int
    vhost: str
    destination: str
    source: str
    routing_key: str
    arguments: FieldTable


@message
class UnbindExchange:
    rid: int
    vhost: str
    destination: str
    source: str
    routing_key: str
    arguments: FieldTable


@message
class DeclareQueue:
    rid: int
    vhost: str
    queue: str
    passive: bool
    durable: bool
    exclusive: bool
    auto_delete: bool
    arguments: FieldTable
    owner: Hashable
    server_name: str = ""  # the name the channel gave a declare that named no queue


@message
class QueueDeclared:
    """The value of a DeclareQueue's Reply (queue.declare-ok's fields)."""

    queue: str
    message_count: int
    consumer_count: int


@message
class DeleteQueue:
    rid: int
    vhost: str
    queue: str
    if_unused: bool
    if_empty: bool
    owner: Hashable


@message
class BindQueue:
    rid: int
    vhost: str
    queue: str
    exchange: str
    routing_key: str
    arguments: FieldTable
    owner: Hashable


@message
class UnbindQueue:
    rid: int
    vhost: str
    queue: str
    exchange: str
    routing_key: str
    arguments: FieldTable
    owner: Hashable


# -- replicas ------------------------------------------------------------------------------------


@message
class Subscribe:
    """A replica asks for the snapshot and every later change. `incarnation` tells a host process
    that asks again (the node host restarted) from a new one (this host restarted: what was in
    flight to it is lost)."""

    incarnation: int


@message
class NodeStarted:
    """node host -> every local host's cluster view: the node host (re)started; subscribe again."""


@message
class MetadataChanged:
    """Registry changes to apply (the first one after Subscribe is the snapshot, `Reset` first)."""

    changes: list[Change]


@message
class Sync:
    rid: int


@message
class QueueHostRestarted:
    host: str


@message
class QueuesGone:
    """To the channels of a connection host: these queue actors are deleted."""

    queues: list[Address]


# -- queue lifecycle -----------------------------------------------------------------------------


@message
class CreateQueue:
    rid: int
    vhost: str
    name: str
    auto_delete: bool
    arguments: FieldTable
    durable: bool
    members: tuple[str, ...] = ()  # a replicated stream's member nodes, the leader first (QueueRecord.replicas)


@message
class QueueStats:
    rid: int


@message
class QueueCounts:
    messages: int
    consumers: int


@message
class Dispose:
    """node -> queue: delete yourself, unless if-unused / if-empty say otherwise (value: messages)."""

    rid: int
    if_unused: bool
    if_empty: bool


@message
class ApplyPolicy:
    """The queue's effective settings: its arguments met with the policies that apply to it."""

    settings: dict[str, Any]


@message
class AutoDeleteQueue:
    vhost: str
    name: str


@message
class ConnectionClosed:
    owner: Hashable


@message
class CloseConnections:
    """Close every connection on `vhost` (or the one named `owner`, or every one of `user`) with
    connection.close `code`."""

    vhost: str | None
    owner: str | None
    code: int
    text: str
    user: str | None = None


@message
class TrackedCounts:
    """Connection host -> every other connection host of the cluster: its open connections per
    vhost and per user, and its channels per user, for the vhosts and users that have limits
    (actors/reader/tracking.py). `ask`: answer with yours (the sender has just started)."""

    host: str
    vhosts: dict[str, int]
    users: dict[str, int]
    channels: dict[str, int]
    ask: bool = False


@message
class StreamStatus:
    """node -> stream queue: its log and readers (value: the rows of `warrenctl stream_status`)."""

    rid: int


@message
class StreamMembers:
    """node -> a replicated stream's member: the stream's member nodes are now `members` (its
    committed record's replicas, actors/node/stream_membership.py); answered once it took them."""

    rid: int
    members: tuple[str, ...]
