"""The checks RabbitMQ's channel makes before it touches a named resource.

Theory of operation: rabbit_channel checks the user's permission first, so a refused operation
fails with 403 ACCESS_REFUSED even when the resource does not exist; only then does it look the
resource up (404 NOT_FOUND) and check exclusivity (405 RESOURCE_LOCKED). Each check here closes the
channel itself when it fails and tells its caller to stop (True from the `denied` family, None from
`queue_record_for`). The channel's PermissionCache (permissions.py) asks the registry.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Hashable

from actors.channel.permissions import EXCHANGE, QUEUE, READ, WRITE
from actors.placement import node_of
from metadata import texts
from metadata.records import QueueRecord
from wire import methods as m
from wire.errors import NOT_FOUND, AmqpError

if TYPE_CHECKING:
    from actors.channel.core import ChannelCore


def denied(ch: ChannelCore, method: m.Method, perm: str, kind: str, name: str) -> bool:
    """Close the channel and say True when the user lacks `perm` on the resource."""
    error = ch.permissions.check(perm, kind, name)
    if error is None:
        return False
    ch.error(error, method)
    return True


def exists(ch: ChannelCore, kind: str, name: str) -> bool:
    if kind == QUEUE:
        found = ch.router.check_queue_access(ch.vhost, name, ch.owner)
    else:
        found = ch.router.exchange_for_publish(ch.vhost, name)
    return not (isinstance(found, AmqpError) and found.code == NOT_FOUND)


def denied_via(ch: ChannelCore, method: m.Method, kind: str, name: str, target_kind: str, target: Any) -> bool:
    """RabbitMQ's check for a new resource naming another (alternate or dead-letter exchange):
    read on the new one, write on the one it names."""
    if not isinstance(target, (str, bytes)) or exists(ch, kind, name):
        return False
    target = target.decode("utf-8", "replace") if isinstance(target, bytes) else target
    return denied(ch, method, READ, kind, name) or denied(ch, method, WRITE, target_kind, target)


def binding_denied(ch: ChannelCore, x: m.Method, kind: str, destination: str, source: str) -> bool:
    """rabbit_channel:binding_action: write on the destination, then (unless the default exchange
    is involved, which the node refuses) read on the source, then, when the source exists and is a
    topic exchange, the read topic permission on the binding key (for queue and exchange
    destinations alike)."""
    if denied(ch, x, WRITE, kind, destination):
        return True
    if source == "" or (kind == EXCHANGE and destination == ""):
        return False
    if denied(ch, x, READ, EXCHANGE, source):
        return True
    exchange = ch.router.exchange(ch.vhost, source)
    error = ch.permissions.check_topic(exchange, READ, x.routing_key) if exchange is not None else None
    if error is None:
        return False
    ch.error(error, x)
    return True


def queue_record_for(ch: ChannelCore, method: m.Method, name: str) -> tuple[Hashable, QueueRecord] | None:
    """The queue actor for `name` and its record (its type decides what the channel allows), after
    RabbitMQ's read permission, existence and exclusivity checks."""
    if denied(ch, method, READ, QUEUE, name):
        return None
    found = ch.router.check_queue_access(ch.vhost, name, ch.owner)
    if isinstance(found, AmqpError):
        ch.error(found, method)
        return None
    queue = ch.place(ch.vhost, found.name)
    if ch.down_nodes and node_of(queue.host) in ch.down_nodes:
        ch.error(texts.home_node_down(node_of(queue.host), found.name, ch.vhost), method)
        return None
    return queue, found
