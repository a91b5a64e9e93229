"""Consumers: basic.qos, basic.consume, basic.cancel, and the deliveries queues push.

Theory of operation: a consumer is (tag -> queue, ack_required) on the channel and a consumer
record on its queue. Prefetch is consumer credit granted to queues (flow/qos.py): basic.consume
carries the first grant, and the core hands out more as deliveries are settled (`flush`). Each
delivery gets the next delivery tag of the channel; those that need an ack are remembered in
`Unacked` (acks.py) until settled (settling.py). A delivery for a consumer the channel no longer
has (cancelled meanwhile) goes back to its queue, requeued. A queue that drops a consumer (queue
deleted, its host restarted, single-active handover) cancels it here, and the client hears
basic.cancel only if it announced consumer_cancel_notify.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Hashable

from actors.channel import direct_reply
from actors.channel.acks import Outstanding
from actors.channel.generated_names import CONSUMER_TAG_PREFIX, new_tag
from actors.channel.lifecycle import OPEN
from actors.channel.publish_checks import REPLY_TO_QUEUE
from actors.channel.resources import queue_record_for
from actors.placement import quorum_uid
from actors.messages.calls import Reply
from actors.messages.channel_queue import Cancel, Consume
from metadata import stream
from wire import methods as m
from wire.errors import NOT_ALLOWED, NOT_IMPLEMENTED, AmqpError
from wire.frames import content_frames
from wire.inbound import Command

if TYPE_CHECKING:
    from actors.channel.core import ChannelCore


def basic_qos(ch: ChannelCore, cmd: Command) -> None:
    x = cmd.method
    if x.prefetch_size:
        # RabbitMQ refuses a byte-based prefetch the same way
        ch.error(AmqpError(NOT_IMPLEMENTED, f"prefetch_size!=0 ({x.prefetch_size})", connection=True), x)
        return
    ch.qos.set_qos(x.prefetch_count, x.global_)
    ch.send_method(m.BasicQosOk())


def basic_consume(ch: ChannelCore, cmd: Command) -> None:
    x = cmd.method
    if x.queue == REPLY_TO_QUEUE:
        direct_reply.consume(ch, x)
        return
    found = queue_record_for(ch, x, x.queue or "")
    if found is None:
        return
    queue, record = found
    if stream.is_stream(record.arguments):
        # rabbit_stream_queue:consume: no auto-ack, and a per-consumer prefetch is required
        if x.no_ack:
            ch.error(stream.no_ack_refused(record.name, ch.vhost), x)
            return
        if not ch.qos.consumer_limit:
            ch.error(stream.no_prefetch(record.name, ch.vhost), x)
            return
        ch.streams[queue] = record.name
    else:  # a classic or quorum queue of a name a stream had before
        ch.streams.pop(queue, None)
    if ch.qos.channel_limit and quorum_uid(queue.host) is not None:
        # rabbit_quorum_queue:consume refuses an active channel-wide limiter (a connection error)
        ch.error(AmqpError(NOT_IMPLEMENTED, f"queue '{x.queue}' in vhost '{ch.vhost}' does not support global qos",
                           connection=True), x)
        return
    tag = x.consumer_tag or new_tag(ch.rng, CONSUMER_TAG_PREFIX)
    if direct_reply.tag_in_use(ch, tag):
        ch.error(AmqpError(NOT_ALLOWED, f"attempt to reuse consumer tag '{tag}'", connection=True), x)
        return
    ack_required = not x.no_ack
    ch.qos.add(tag, queue, ack_required)
    credit = ch.qos.take_grant(tag, True)
    ch.consumers[tag] = (queue, ack_required)
    ch.touched.add(queue)

    def then(result: Reply) -> None:
        if result.error is not None:
            ch.qos.remove(tag)
            ch.consumers.pop(tag, None)
            ch.failed(result, x)
            return
        if not x.nowait:
            ch.send_method(m.BasicConsumeOk(consumer_tag=tag))
    ch.call(queue, lambda rid: Consume(rid, tag, ack_required, credit, x.exclusive, dict(x.arguments)), then)


def basic_cancel(ch: ChannelCore, cmd: Command) -> None:
    x = cmd.method
    if direct_reply.cancel(ch, x):
        return
    found = ch.consumers.get(x.consumer_tag)
    if found is None:  # RabbitMQ answers cancel-ok for an unknown tag
        if not x.nowait:
            ch.send_method(m.BasicCancelOk(consumer_tag=x.consumer_tag))
        return

    def then(_: Reply) -> None:
        ch.consumers.pop(x.consumer_tag, None)
        ch.qos.remove(x.consumer_tag)
        if not x.nowait:
            ch.send_method(m.BasicCancelOk(consumer_tag=x.consumer_tag))
    ch.call(found[0], lambda rid: Cancel(rid, x.consumer_tag), then)


def server_cancel(ch: ChannelCore, tag: str) -> None:
    """The queue dropped consumer `tag`."""
    if ch.consumers.pop(tag, None) is None:
        return
    ch.qos.remove(tag)
    if ch.state == OPEN and ch.capabilities.get("consumer_cancel_notify"):
        ch.send_method(m.BasicCancel(consumer_tag=tag, nowait=True))


def deliver(ch: ChannelCore, queue: Hashable, tag: str, messages: Any) -> None:
    """Messages from `queue` for consumer `tag`, as (msg_id, redelivered, exchange, routing_key,
    header, body) tuples."""
    found = ch.consumers.get(tag)
    if found is None:
        # cancelled by the queue meanwhile: hand ack-requiring ones back
        ch.out.settle(queue, requeued=[msg[0] for msg in messages])
        return
    ack_required = found[1]
    number, frame_max, write, now = ch.number, ch.frame_max, ch.out.frames.extend, ch.now
    unacked_add = ch.unacked.add
    dtag = ch.delivery_tag
    redelivers = 0
    for msg_id, redelivered, exchange, routing_key, header, body in messages:
        dtag += 1
        if redelivered:
            redelivers += 1
        frame = m.BasicDeliver(consumer_tag=tag, delivery_tag=dtag, redelivered=redelivered,
                               exchange=exchange, routing_key=routing_key)
        write(content_frames(number, frame, header, body, frame_max))
        if ack_required:
            unacked_add(dtag, Outstanding(queue, msg_id, tag, now))
    ch.delivery_tag = dtag
    ch.qos.delivered(tag, len(messages))
    counters = ch.counters
    if ack_required:
        counters.deliver += len(messages)
    else:
        counters.deliver_no_ack += len(messages)
    counters.redeliver += redelivers
