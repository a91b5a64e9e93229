"""What each message a classic queue receives means for its core (`ClassicQueue.handle`): the
messages of actors/messages/channel_queue.py and node.py, each turned into one call of the core's
public operations, and a request's answer as a `Reply` to its sender before the call's effects.

A Dispose runs after the shell has flushed the queue's storage, so what was confirmable is
confirmed before the answer; an `Undelivered` (something the queue sent found no actor) means the
channel is gone, as its ChannelDown would.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

from actors.messages.calls import Reply
from actors.messages.channel_queue import Cancel, ChannelDown, Consume, Get, GetResult, Grant, Publish, Purge, Settle
from actors.messages.node import ApplyPolicy, Dispose, QueueCounts, QueueStats
from actors.messages.runtime import Undelivered
from effects import Effect, Send
from wire.errors import AmqpError

if TYPE_CHECKING:
    from actors.queue.core import ClassicQueue


def _publish(q: ClassicQueue, sender: Hashable, msg: Publish, now: int | None) -> list[Effect]:
    return q.publish(sender, msg.messages, now_ms=now)


def _settle(q: ClassicQueue, sender: Hashable, msg: Settle, now: int | None) -> list[Effect]:
    return q.settle(sender, acked=msg.acked, requeued=msg.requeued, discarded=msg.discarded, now_ms=now)


def _grant(q: ClassicQueue, sender: Hashable, msg: Grant, now: int | None) -> list[Effect]:
    return q.grant(sender, msg.consumer_tag, msg.credit, now_ms=now)


def _consume(q: ClassicQueue, sender: Hashable, msg: Consume, now: int | None) -> list[Effect]:
    res = q.consume(sender, msg.consumer_tag, ack_required=msg.ack_required, credit=msg.credit,
                    exclusive=msg.exclusive, arguments=msg.arguments, now_ms=now)
    if isinstance(res, AmqpError):
        return [Send(sender, Reply(msg.rid, error=res))]
    return [Send(sender, Reply(msg.rid)), *res]


def _cancel(q: ClassicQueue, sender: Hashable, msg: Cancel, now: int | None) -> list[Effect]:
    return [Send(sender, Reply(msg.rid)), *q.cancel(sender, msg.consumer_tag, now_ms=now)]


def _get(q: ClassicQueue, sender: Hashable, msg: Get, now: int | None) -> list[Effect]:
    message, remaining, effects = q.get(sender, ack_required=msg.ack_required, now_ms=now)
    return [Send(sender, Reply(msg.rid, GetResult(message, remaining))), *effects]


def _channel_down(q: ClassicQueue, sender: Hashable, msg: ChannelDown, now: int | None) -> list[Effect]:
    return q.channel_down(sender, now_ms=now)


def _undelivered(q: ClassicQueue, sender: Hashable, msg: Undelivered, now: int | None) -> list[Effect]:
    """What the queue sent to `sender` (a Deliver, a Confirm ...) found no such actor: the channel
    is gone and its ChannelDown may never come (it closed while the delivery was on its way, or on
    a node that went away and came back): requeue what it held, drop its consumers."""
    return q.channel_down(sender, now_ms=now)


def _purge(q: ClassicQueue, sender: Hashable, msg: Purge, now: int | None) -> list[Effect]:
    return [Send(sender, Reply(msg.rid, q.purge()))]


def _stats(q: ClassicQueue, sender: Hashable, msg: QueueStats, now: int | None) -> list[Effect]:
    effects = q.touch(now_ms=now)  # the node asks on every redeclare: a use, for x-expires
    return [Send(sender, Reply(msg.rid, QueueCounts(q.message_count, q.consumer_count))), *effects]


def _apply_policy(q: ClassicQueue, sender: Hashable, msg: ApplyPolicy, now: int | None) -> list[Effect]:
    return q.apply_policy(msg.settings, now_ms=now)


def _dispose(q: ClassicQueue, sender: Hashable, msg: Dispose, now: int | None) -> list[Effect]:
    """The node deletes the queue: consumers are cancelled, what was confirmable is confirmed (the
    shell has flushed the queue's storage before it runs these), then the answer."""
    res = q.delete(if_unused=msg.if_unused, if_empty=msg.if_empty)
    if isinstance(res, AmqpError):
        return [Send(sender, Reply(msg.rid, error=res))]
    count, effects = res
    q.deleted = True
    q.sync_started()  # the shell flushed the storage first; a deleted queue's messages are gone anyway
    return [*effects, *q.flushed(), Send(sender, Reply(msg.rid, count))]


HANDLERS: dict[type, Callable[[ClassicQueue, Hashable, Any, int | None], list[Effect]]] = {
    Publish: _publish, Settle: _settle, Grant: _grant, Consume: _consume, Cancel: _cancel, Get: _get,
    ChannelDown: _channel_down, Purge: _purge, QueueStats: _stats, ApplyPolicy: _apply_policy, Dispose: _dispose,
    Undelivered: _undelivered,
}
