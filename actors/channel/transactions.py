"""The tx class: tx.select, tx.commit, tx.rollback.

Theory of operation: in tx mode publishes (already routed) and settlements wait in the channel's tx
buffer. tx.commit carries them out in order, the publishes through a ConfirmTracker of the commit's
own, and answers commit-ok only when every queue has confirmed the committed publishes, as
RabbitMQ's tx does; until then the channel takes no further command (the commit waits like a call,
core.py). tx.rollback drops the buffer. A channel is in confirm mode or tx mode, never both
(406 either way, RabbitMQ's texts).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from actors.channel.confirms import ConfirmTracker
from actors.channel.publishing import route
from actors.channel.settling import apply_settle
from actors.messages.calls import Reply
from wire import methods as m
from wire.errors import PRECONDITION_FAILED, AmqpError
from wire.inbound import Command

if TYPE_CHECKING:
    from actors.channel.core import ChannelCore

NOT_TRANSACTIONAL = "channel is not transactional"


def tx_select(ch: ChannelCore, cmd: Command) -> None:
    if ch.confirm is not None:
        ch.error(AmqpError(PRECONDITION_FAILED, "cannot switch from confirm to tx mode"), cmd.method)
        return
    if ch.tx is None:
        ch.tx = []
    ch.send_method(m.TxSelectOk())


def tx_commit(ch: ChannelCore, cmd: Command) -> None:
    if ch.tx is None:
        ch.error(AmqpError(PRECONDITION_FAILED, NOT_TRANSACTIONAL), cmd.method)
        return
    work, ch.tx = ch.tx, []
    tracker = ConfirmTracker()
    for item in work:
        if item[0] == "publish":
            _, queues, x, header, body = item
            route(ch, queues, x, header, body, tracker)
        else:
            apply_settle(ch, item[1], item[2])
    ch.commit = (tracker, ch.wait(lambda _: None))
    finish_commit(ch)


def finish_commit(ch: ChannelCore) -> None:
    """Answer commit-ok once every queue has the committed publishes."""
    if ch.commit is None:
        return
    tracker, rid = ch.commit
    if len(tracker):
        return
    ch.commit = None
    ch.send_method(m.TxCommitOk())
    ch.reply(rid, Reply(rid))


def tx_rollback(ch: ChannelCore, cmd: Command) -> None:
    if ch.tx is None:
        ch.error(AmqpError(PRECONDITION_FAILED, NOT_TRANSACTIONAL), cmd.method)
        return
    ch.tx = []
    ch.send_method(m.TxRollbackOk())
