"""The exchange and queue classes: calls to the node, and queue.purge to the queue.

Theory of operation: declare, delete, bind and unbind change the registry, which only the node
writes, so each is a call to the node (the channel takes no further command until the reply, see
core.py) after the permission checks RabbitMQ makes on the channel (resources.py). Errors about the
resource itself (type, equivalence, existence, exclusivity, reserved names) are the node's to
report, in RabbitMQ's order: a permission check here only runs where RabbitMQ's channel would make
it before those. A server-named queue is named here, as rabbit_channel names it, so its configure
permission and the vhost's max-queues are checked against the name it gets (the node declares it
under that name); the max-queues check is the registry's (metadata/limits.py), made again by the
node when it applies the declare. queue.purge goes to the queue itself. A queue.declare of a direct reply-to name
is answered by the channel (direct_reply.py).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from actors.channel import direct_reply
from actors.channel.generated_names import QUEUE_NAME_PREFIX, new_tag
from actors.channel.permissions import CONFIGURE, EXCHANGE, QUEUE
from actors.channel.publish_checks import REPLY_TO_QUEUE
from actors.channel.resources import binding_denied, denied, denied_via, queue_record_for
from actors.messages.calls import Reply
from actors.messages.channel_queue import Purge
from actors.messages.node import (
    BindExchange, BindQueue, DeclareExchange, DeclareQueue, DeleteExchange, DeleteQueue, UnbindExchange,
    UnbindQueue,
)
from metadata import names, quorum, stream
from metadata.registry import EXCHANGE_TYPES
from wire import methods as m
from wire.inbound import Command

if TYPE_CHECKING:
    from actors.channel.core import ChannelCore


def node_call(ch: ChannelCore, cmd: Command, request: Callable[[int], Any],
              ok: Callable[[Any], m.Method | None]) -> None:
    """Ask the node; answer with `ok(value)` unless it failed or the method said nowait."""
    method = cmd.method

    def then(result: Reply) -> None:
        if not ch.failed(result, method):
            reply = ok(result.value)
            if reply is not None and not getattr(method, "nowait", False):
                ch.send_method(reply)
    ch.call(ch.node, request, then)


def exchange_declare(ch: ChannelCore, cmd: Command) -> None:
    x = cmd.method
    # type and default-exchange errors come first in RabbitMQ; the node reports those
    if not x.passive and x.type in EXCHANGE_TYPES and x.exchange != "":
        if denied(ch, x, CONFIGURE, EXCHANGE, x.exchange):
            return
        if not names.is_reserved(x.exchange) and denied_via(
                ch, x, EXCHANGE, x.exchange, EXCHANGE, dict(x.arguments).get("alternate-exchange")):
            return
    node_call(ch, cmd, lambda rid: DeclareExchange(rid, ch.vhost, x.exchange, x.type, x.passive, x.durable,
                                                   x.auto_delete, x.internal, dict(x.arguments)),
              lambda _: m.ExchangeDeclareOk())


def exchange_delete(ch: ChannelCore, cmd: Command) -> None:
    x = cmd.method
    if x.exchange != "" and not names.is_reserved(x.exchange) and denied(ch, x, CONFIGURE, EXCHANGE, x.exchange):
        return
    node_call(ch, cmd, lambda rid: DeleteExchange(rid, ch.vhost, x.exchange, x.if_unused),
              lambda _: m.ExchangeDeleteOk())


def exchange_bind(ch: ChannelCore, cmd: Command) -> None:
    x = cmd.method
    _binding(ch, cmd, EXCHANGE, x.destination, x.source, BindExchange, m.ExchangeBindOk())


def exchange_unbind(ch: ChannelCore, cmd: Command) -> None:
    x = cmd.method
    _binding(ch, cmd, EXCHANGE, x.destination, x.source, UnbindExchange, m.ExchangeUnbindOk())


def _binding(ch: ChannelCore, cmd: Command, kind: str, destination: str, source: str,
             request: Callable[..., Any], ok: m.Method, *owner: Any) -> None:
    """A bind or unbind: the node's request is (rid, vhost, destination, source, routing key,
    arguments), queue bindings add the channel's owner (exclusivity)."""
    x = cmd.method
    if binding_denied(ch, x, kind, destination, source):
        return
    node_call(ch, cmd, lambda rid: request(rid, ch.vhost, destination, source, x.routing_key, dict(x.arguments),
                                           *owner),
              lambda _: ok)


def queue_declare(ch: ChannelCore, cmd: Command) -> None:
    x = cmd.method
    if x.queue.startswith(REPLY_TO_QUEUE):
        direct_reply.declare(ch, x)
        return
    server_name = ""
    if not x.passive and not (x.queue and names.is_reserved(x.queue)):
        name = names.strip_cr_lf(x.queue)
        if not name:  # server-named: the channel names it, so the checks see the name it gets
            refused = quorum.server_named_error(x.arguments) or stream.server_named_error(x.arguments)
            if refused is not None:
                ch.error(refused, x)
                return
            name = server_name = new_tag(ch.rng, QUEUE_NAME_PREFIX)
        if denied(ch, x, CONFIGURE, QUEUE, name):
            return
        refused = ch.router.queue_limit_error(ch.vhost, name)  # a new queue over the vhost's max-queues
        if refused is not None:
            ch.error(refused, x)
            return
        if denied_via(ch, x, QUEUE, name, EXCHANGE, dict(x.arguments).get("x-dead-letter-exchange")):
            return
    node_call(ch, cmd, lambda rid: DeclareQueue(rid, ch.vhost, x.queue, x.passive, x.durable, x.exclusive,
                                                x.auto_delete, dict(x.arguments), ch.owner, server_name),
              lambda r: m.QueueDeclareOk(queue=r.queue, message_count=r.message_count,
                                         consumer_count=r.consumer_count))


def queue_delete(ch: ChannelCore, cmd: Command) -> None:
    x = cmd.method
    if denied(ch, x, CONFIGURE, QUEUE, x.queue):
        return
    node_call(ch, cmd, lambda rid: DeleteQueue(rid, ch.vhost, x.queue, x.if_unused, x.if_empty, ch.owner),
              lambda n: m.QueueDeleteOk(message_count=n))


def queue_bind(ch: ChannelCore, cmd: Command) -> None:
    x = cmd.method
    _binding(ch, cmd, QUEUE, x.queue, x.exchange, BindQueue, m.QueueBindOk(), ch.owner)


def queue_unbind(ch: ChannelCore, cmd: Command) -> None:
    x = cmd.method
    _binding(ch, cmd, QUEUE, x.queue, x.exchange, UnbindQueue, m.QueueUnbindOk(), ch.owner)


def queue_purge(ch: ChannelCore, cmd: Command) -> None:
    x = cmd.method
    found = queue_record_for(ch, x, x.queue)
    if found is None:
        return
    queue, record = found
    if stream.is_stream(record.arguments):
        ch.error(stream.purge_refused(record.name, ch.vhost), x)
        return

    def then(result: Reply) -> None:
        if not ch.failed(result, x) and not x.nowait:
            ch.send_method(m.QueuePurgeOk(message_count=result.value))
    ch.call(queue, Purge, then)
