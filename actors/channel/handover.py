"""A channel handed to another connection host with its connection: when it can go, and what goes.

Theory of operation: a connection moves between the connection hosts of a node only at a quiet
point (actors/reader/mover.py), where none of its channels is owed anything by an actor and owes
nothing to its client: no call in flight and no command waiting behind one, no consumer and no
unacknowledged delivery (a queue would keep delivering to the old channel), nothing produced and
not yet carried out, no publish waiting for its confirm (the queue's confirm would reach the old
channel), no transaction, no direct reply-to consumer (replies are addressed to the old channel)
and no quorum queue client (its members know the old channel). A channel that published without confirm mode does not move at all: nothing
tells when its last publishes reached their queues, and a publish from the new host could
overtake them. What is left of such a channel is what the client set and still relies on: its
number, its prefetch settings, confirm mode with the next publish sequence number, and the last
delivery tag (tags go on from there). Its message counters stay with the old host's totals.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from actors.channel.confirms import ConfirmTracker
from actors.channel.lifecycle import OPEN

if TYPE_CHECKING:
    from actors.channel.core import ChannelCore


@dataclass(frozen=True, slots=True)
class ChannelHandover:
    number: int
    consumer_limit: int
    channel_limit: int
    confirm_next_seq: int  # 0: not in confirm mode
    delivery_tag: int

    def as_list(self) -> list[int]:
        return [self.number, self.consumer_limit, self.channel_limit, self.confirm_next_seq, self.delivery_tag]


def busy(ch: ChannelCore) -> str | None:
    """Why `ch` cannot move now, or None at a quiet point."""
    if ch.state != OPEN:
        return "closing"
    if not ch.out.empty():
        return "not flushed"
    if ch.is_calling():
        return "call in flight"
    if ch.consumers or ch.reply_consumer is not None:
        return "consuming"
    if len(ch.unacked):
        return "unacked deliveries"
    if ch.tx is not None or ch.commit is not None:
        return "transactional"
    if ch.quorum.clients():
        return "quorum queues"
    if ch.confirm is None:
        return "published without confirms" if ch.counters.publish else None
    if not ch.confirm.idle():
        return "confirms pending"
    return None


def take(ch: ChannelCore) -> ChannelHandover:
    """What goes with a channel that is not `busy`."""
    return ChannelHandover(ch.number, ch.qos.consumer_limit, ch.qos.channel_limit,
                           0 if ch.confirm is None else ch.confirm.next_seq, ch.delivery_tag)


def resume(ch: ChannelCore, h: ChannelHandover) -> None:
    """Give a channel just made on the new host what went with it."""
    ch.qos.consumer_limit = h.consumer_limit
    ch.qos.channel_limit = h.channel_limit
    if h.confirm_next_seq:
        ch.confirm = ConfirmTracker(h.confirm_next_seq)
    ch.delivery_tag = h.delivery_tag
