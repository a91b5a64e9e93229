"""basic.get: one message pulled from a queue.

Theory of operation: a get is a call to the queue (the channel takes no other command until the
answer). The queue answers with one message and how many remain, or with none (basic.get-empty).
A message fetched with no_ack=false takes the next delivery tag and waits in `Unacked` like a
delivery, with no consumer tag, so settling it returns no prefetch credit.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from actors.channel.acks import Outstanding
from actors.channel.resources import queue_record_for
from actors.messages.calls import Reply
from actors.messages.channel_queue import Get
from metadata import stream
from wire import methods as m
from wire.frames import content_frames
from wire.inbound import Command

if TYPE_CHECKING:
    from actors.channel.core import ChannelCore


def basic_get(ch: ChannelCore, cmd: Command) -> None:
    x = cmd.method
    found = queue_record_for(ch, x, x.queue)
    if found is None:
        return
    queue, record = found
    if stream.is_stream(record.arguments):
        ch.error(stream.get_refused(record.name, ch.vhost), x)
        return
    ack_required = not x.no_ack
    ch.touched.add(queue)

    def then(result: Reply) -> None:
        if ch.failed(result, x):
            return
        got, remaining = result.value.message, result.value.remaining
        if got is None:
            ch.counters.get_empty += 1
            ch.send_method(m.BasicGetEmpty())
            return
        msg_id, redelivered, exchange, routing_key, header, body = got
        if ack_required:
            ch.counters.get += 1
        else:
            ch.counters.get_no_ack += 1
        if redelivered:
            ch.counters.redeliver += 1
        ch.delivery_tag += 1
        if ack_required:
            ch.unacked.add(ch.delivery_tag, Outstanding(queue, msg_id, None, ch.now))
        ok = m.BasicGetOk(delivery_tag=ch.delivery_tag, redelivered=redelivered, exchange=exchange,
                          routing_key=routing_key, message_count=remaining)
        ch.out.frames.extend(content_frames(ch.number, ok, header, body, ch.frame_max))
    ch.call(queue, lambda rid: Get(rid, ack_required), then)
