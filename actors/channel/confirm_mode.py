"""Publisher confirms on the channel: confirm.select and the confirms queues send back.

Theory of operation: in confirm mode every publish takes the next seq and the ConfirmTracker
(confirms.py) decides when each is acked or nacked: once every queue it was routed to has confirmed
it (a queue confirms by range, "everything up to seq N", after what it promises is true, e.g. on
disk for a persistent message to a durable queue), nacked if one refused it (x-overflow
reject-publish sends Rejected with exactly those seqs) or crashed. The channel writes what the
tracker releases once per flush, so a burst of confirms coalesces into multiple=true acks, and
never on a channel that is no longer open. A tx.commit in progress (transactions.py) has a tracker
of its own for the committed publishes, which takes the queues' confirms while it waits.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Hashable

from actors.channel import transactions
from actors.channel.confirms import ConfirmTracker
from actors.channel.lifecycle import OPEN
from wire import methods as m
from wire.errors import PRECONDITION_FAILED, AmqpError
from wire.inbound import Command

if TYPE_CHECKING:
    from actors.channel.core import ChannelCore


def confirm_select(ch: ChannelCore, cmd: Command) -> None:
    x = cmd.method
    if ch.tx is not None:
        ch.error(AmqpError(PRECONDITION_FAILED, "cannot switch from tx to confirm mode"), x)
        return
    if ch.confirm is None:
        ch.confirm = ConfirmTracker()
    if not x.nowait:
        ch.send_method(m.ConfirmSelectOk())


def confirmed(ch: ChannelCore, queue: Hashable, upto: int) -> None:
    """`queue` has every publish up to seq `upto` that this channel sent it."""
    _tell_tracker(ch, lambda tracker: tracker.confirmed(queue, upto))


def refused(ch: ChannelCore, queue: Hashable, seqs: list[int]) -> None:
    """`queue` refused these publishes (x-overflow reject-publish): nack exactly them."""
    _tell_tracker(ch, lambda tracker: tracker.refused(queue, seqs))


def _tell_tracker(ch: ChannelCore, tell: Callable[[ConfirmTracker], None]) -> None:
    if ch.commit is not None:
        tell(ch.commit[0])
        transactions.finish_commit(ch)
    elif ch.confirm is not None:
        tell(ch.confirm)
        send_confirms(ch)


def trackers(ch: ChannelCore) -> Iterator[ConfirmTracker]:
    """The trackers waiting for queues: confirm mode's and a tx.commit's in progress."""
    if ch.confirm is not None:
        yield ch.confirm
    if ch.commit is not None:
        yield ch.commit[0]


def send_confirms(ch: ChannelCore) -> None:
    if ch.confirm is None or ch.state != OPEN:
        return
    for ack, tag, multiple in ch.confirm.take():
        ch.send_method(m.BasicAck(delivery_tag=tag, multiple=multiple) if ack
                       else m.BasicNack(delivery_tag=tag, multiple=multiple, requeue=False))
