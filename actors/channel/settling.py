"""Settling deliveries: basic.ack, basic.nack, basic.reject and basic.recover.

Theory of operation: a delivery tag (or, with `multiple`, every tag up to it) is taken out of
`Unacked` (acks.py) and its queue's message id is settled there: acked, requeued or discarded
(dead-lettered where the queue says so). Settlements are gathered per queue and leave as one
Settle per queue per flush (outbox.py). An unknown tag closes the channel (406, RabbitMQ's text).
Each settled delivery of a consumer gives its prefetch credit back (flow/qos.py); an ack of a
stream's delivery is only that (a stream removes nothing), so no Settle goes to the stream. In tx mode the
settlement waits in the tx buffer until tx.commit (transactions.py). A delivery whose queue host
restarted is an orphan: settling it is accepted and goes nowhere, as RabbitMQ accepts acks for a
queue that went down.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from actors.channel.acks import Outstanding
from metadata import stream
from wire import methods as m
from wire.errors import NOT_IMPLEMENTED, PRECONDITION_FAILED, AmqpError
from wire.inbound import Command

if TYPE_CHECKING:
    from actors.channel.core import ChannelCore

ACK, REQUEUE, DISCARD = "ack", "requeue", "discard"


def settle(ch: ChannelCore, method: m.Method, tag: int, multiple: bool, how: str) -> None:
    entries = ch.unacked.take(tag, multiple)
    if entries is None:
        ch.error(AmqpError(PRECONDITION_FAILED, f"unknown delivery tag {tag}"), method)
        return
    if how != ACK and ch.streams:
        for entry in entries:
            if entry.queue in ch.streams:  # a stream keeps every message: nothing to requeue or discard
                ch.error(stream.nack_refused(ch.streams[entry.queue], ch.vhost), method)
                return
    if ch.tx is not None:
        ch.tx.append(("settle", entries, how))
        return
    apply_settle(ch, entries, how)


def apply_settle(ch: ChannelCore, entries: list[Outstanding], how: str) -> None:
    per_consumer: dict[str, int] = {}
    if how == ACK:
        ch.counters.ack += len(entries)
    out = ch.out
    # an ack takes nothing out of a stream (its credit comes back by the Grant below): no Settle goes there
    streams = ch.streams if how == ACK else {}
    for queue, msg_id, ctag, _ in entries:
        if queue is None:  # an orphan of a queue host that restarted
            continue
        if queue not in streams:
            if how == ACK:
                out.settle(queue, acked=(msg_id,))
            elif how == REQUEUE:
                out.settle(queue, requeued=(msg_id,))
            else:
                out.settle(queue, discarded=(msg_id,))
        if ctag is not None:
            per_consumer[ctag] = per_consumer.get(ctag, 0) + 1
    for ctag, n in per_consumer.items():
        ch.qos.settled(ctag, n)


def basic_ack(ch: ChannelCore, cmd: Command) -> None:
    x = cmd.method
    settle(ch, x, x.delivery_tag, x.multiple, ACK)


def basic_nack(ch: ChannelCore, cmd: Command) -> None:
    x = cmd.method
    settle(ch, x, x.delivery_tag, x.multiple, REQUEUE if x.requeue else DISCARD)


def basic_reject(ch: ChannelCore, cmd: Command) -> None:
    x = cmd.method
    settle(ch, x, x.delivery_tag, False, REQUEUE if x.requeue else DISCARD)


def basic_recover(ch: ChannelCore, cmd: Command) -> None:
    """basic.recover and basic.recover-async: requeue everything unacked (requeue=false is refused,
    as RabbitMQ does)."""
    x = cmd.method
    if not x.requeue:
        ch.error(AmqpError(NOT_IMPLEMENTED, "requeue=false", connection=True), x)
        return
    apply_settle(ch, ch.unacked.take_all(), REQUEUE)
    if isinstance(x, m.BasicRecover):
        ch.send_method(m.BasicRecoverOk())
