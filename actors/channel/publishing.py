"""basic.publish: checks, routing, basic.return, and the per-queue publish batches.

Theory of operation: the exchange and routing come from the host's registry replica (read-only
here); the routed queue names are placed on queue actors by `place`. The write permission on the
exchange, then (a topic exchange) the write topic permission on the routing key, are checked
through the channel's permission cache (permissions.py), in rabbit_channel's order: size, write,
the exchange's existence, the topic permission, then the properties. Publish property rules (user-id, expiration, CC/BCC, reply-to) live in
publish_checks.py and cost nothing for messages that carry none of those properties; CC and BCC
keys add their routes to the routing key's. Publishes to direct reply-to names are sent to their
channel at once (direct_reply.py). In tx mode the routed publish waits in the tx buffer until
tx.commit (transactions.py). Otherwise `route` appends it to the batch of each destination queue
(one Send per queue per flush, outbox.py), after a basic.return (312 NO_ROUTE) if it is mandatory
and routed nowhere; in confirm mode it takes the next seq from the ConfirmTracker first.

Before anything else, as rabbit_channel: a body above max_message_size closes the channel (406,
publish_checks.py). This is the hot path: a publish that needs no inspection costs a size
comparison, a cached permission lookup, one route and one append per queue.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from actors.channel import direct_reply
from actors.channel.lazy_headers import LazyHeaders
from actors.channel.permissions import EXCHANGE, WRITE
from actors.channel.publish_checks import REPLY_TO_PREFIX, inspect, needs_inspection, size_error
from actors.messages.channel_queue import Published
from actors.placement import node_of
from wire import methods as m
from wire.errors import INTERNAL_ERROR, NOT_IMPLEMENTED, AmqpError
from wire.frames import content_frames
from wire.inbound import Command
from wire.properties import properties_decode

if TYPE_CHECKING:
    from actors.channel.confirms import ConfirmTracker
    from actors.channel.core import ChannelCore

_new = tuple.__new__


def basic_publish(ch: ChannelCore, cmd: Command) -> None:
    x = cmd.method
    if x.immediate:
        ch.error(AmqpError(NOT_IMPLEMENTED, "immediate=true", connection=True), x)
        return
    denied = size_error(len(cmd.body), ch.max_message_size) or ch.permissions.check(WRITE, EXCHANGE, x.exchange)
    if denied is not None:
        ch.error(denied, x)
        return
    vhost = ch.vhost
    exchange = ch.router.exchange_for_publish(vhost, x.exchange)
    if isinstance(exchange, AmqpError):
        ch.error(exchange, x)
        return
    if exchange.type == "topic":
        denied = ch.permissions.check_topic(exchange, WRITE, x.routing_key)
        if denied is not None:
            ch.error(denied, x)
            return
    header, body = cmd.header, cmd.body
    if not properties_decode(header):
        # RabbitMQ's channel crashes decoding them and its reader closes the connection so
        ch.error(AmqpError(INTERNAL_ERROR, "", connection=True))
        return
    extra: list[str] = []
    if needs_inspection(header):
        inspected = inspect(header, ch.user, lambda: direct_reply.my_reply_name(ch), ch.impersonator)
        if isinstance(inspected, AmqpError):
            ch.error(inspected, x)
            return
        header, extra = inspected
    route_to, routing_key = ch.router.route, x.routing_key
    if not extra:
        routed = route_to(vhost, x.exchange, routing_key, LazyHeaders(header))
    else:  # CC/BCC: the union of the routes of every key
        lazy = LazyHeaders(header)
        routed = list(dict.fromkeys(name for key in (routing_key, *extra)
                                    for name in route_to(vhost, x.exchange, key, lazy)))
    if x.exchange == "" and (routing_key.startswith(REPLY_TO_PREFIX)
                             or any(key.startswith(REPLY_TO_PREFIX) for key in extra)):
        direct_reply.send(ch, [routing_key, *extra], x, header, body)
    queues = [ch.place(vhost, name) for name in routed]
    if ch.tx is not None:
        ch.tx.append(("publish", queues, x, header, body))
        return
    route(ch, queues, x, header, body, ch.confirm)


def route(ch: ChannelCore, queues: list, x: m.BasicPublish, header: bytes, body: bytes,
          tracker: ConfirmTracker | None) -> None:
    """Hand a routed publish to its queues' batches (after its basic.return if unroutable and
    mandatory); with a tracker, it takes the next confirm seq."""
    counters = ch.counters
    counters.publish += 1
    exchange = ch.exchange_counts.get(x.exchange)
    if exchange is None:
        ch.exchange_counts[x.exchange] = [1, len(queues)]
    else:
        exchange[0] += 1
        exchange[1] += len(queues)
    if not queues:
        if x.mandatory:
            counters.return_unroutable += 1
            ret = m.BasicReturn(reply_code=312, reply_text="NO_ROUTE", exchange=x.exchange,
                                routing_key=x.routing_key)
            ch.out.frames.extend(content_frames(ch.number, ret, header, body, ch.frame_max))
        else:
            counters.drop_unroutable += 1
    seq = tracker.publish(queues) if tracker is not None else 0
    if ch.down_nodes:
        queues = reachable(ch, queues, seq, tracker)
    record = _new(Published, (seq, x.exchange, x.routing_key, header, body))  # half of Published(...)'s cost
    pub = ch.out.publishes
    for queue in queues:
        batch = pub.get(queue)
        if batch is None:
            pub[queue] = [record]
        else:
            batch.append(record)
    # confirms of unroutable publishes go out once per flush (after this batch's returns)


def reachable(ch: ChannelCore, queues: list, seq: int, tracker: ConfirmTracker | None) -> list:
    """The queues of a publish whose node is up; for the others the publish is nacked at once."""
    down = [q for q in queues if node_of(q.host) in ch.down_nodes]
    if not down:
        return queues
    if tracker is not None:
        for queue in down:
            tracker.refused(queue, [seq])
    return [q for q in queues if q not in down]
