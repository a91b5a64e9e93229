"""Queues that go away under a channel: deleted, crashed with their host, or unreachable.

Theory of operation, as RabbitMQ's channel sees a queue process go down:
- a queue deleted normally (QueuesGone from the node) owes no more confirms: its publishes still
  waiting count as confirmed (a deleted queue dropped them on purpose);
- a queue host that crashed and came back (QueueHostRestarted): publishes waiting for its queues are
  nacked (they may or may not have been enqueued), a call waiting for one of them fails with
  RabbitMQ's 404 "down or inaccessible" (its answer died with the host), their consumers are cancelled, and deliveries
  still unacked become orphans whose later ack, nack or reject is accepted and goes nowhere (their
  queue will redeliver them);
- a message the runtime could not deliver to a queue actor (Undelivered) because the queue was
  deleted while the news was on its way here (`gone`): as a deletion (the publish is confirmed, a
  call fails with 404 "no queue"); because its host is restarting: a publish is treated as a crash
  of that queue (nacked), and a call waiting for that queue fails with RabbitMQ's 404 "down or
  inaccessible";
- a queue whose node the cluster sees down (`nodes_down`): what was in flight to it is lost as when
  its host restarts, a later publish to it is nacked at once (publishing.reachable: RabbitMQ's
  channel nacks what it sent to a queue process that went down) and a consume, get or purge gets RabbitMQ's 404
  "home node ... is down or inaccessible" (resources.queue_record_for).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Hashable

from actors.channel import consuming, transactions
from actors.channel.confirm_mode import send_confirms, trackers
from actors.messages.calls import Reply
from actors.messages.channel_queue import Cancel, Consume, Get, Publish, Purge
from actors.placement import node_of
from metadata import texts
from wire.errors import NOT_FOUND, AmqpError

if TYPE_CHECKING:
    from actors.channel.core import ChannelCore


def queue_deleted(ch: ChannelCore, queue: Hashable) -> None:
    _confirms_lost(ch, [queue], abnormal=False)


def queue_host_restarted(ch: ChannelCore, host: str) -> None:
    lost = [q for q in _queues_owing(ch) if getattr(q, "host", None) == host]
    _confirms_lost(ch, lost, abnormal=True)
    call = ch.call_to()
    if call is not None and getattr(call[1], "host", None) == host:  # its answer died with the host
        ch.reply(call[0], Reply(call[0], error=_down(call[1], ch.vhost)))
    for tag, (queue, _) in list(ch.consumers.items()):
        if getattr(queue, "host", None) == host:
            consuming.server_cancel(ch, tag)
    ch.unacked.orphan(lambda entry: getattr(entry.queue, "host", None) == host)


def undelivered(ch: ChannelCore, queue: Hashable, msg: Any, gone: bool) -> None:
    if type(msg) is Publish:
        _confirms_lost(ch, [queue], abnormal=not gone)
    elif type(msg) in (Consume, Cancel, Get, Purge) and ch.is_waiting_for(msg.rid):
        name = getattr(queue, "name", str(queue)).split(":", 2)[-1]
        error = texts.not_found("queue", name, ch.vhost) if gone else _down(queue, ch.vhost)
        ch.reply(msg.rid, Reply(msg.rid, error=error))


def _down(queue: Hashable, vhost: str) -> AmqpError:
    name = getattr(queue, "name", str(queue)).split(":", 2)[-1]
    return AmqpError(NOT_FOUND, f"{texts.resource('queue', name, vhost)} is down or inaccessible")


def nodes_down(ch: ChannelCore, down: frozenset[str]) -> None:
    """The nodes the cluster sees down now."""
    newly = down - ch.down_nodes
    ch.down_nodes = down
    for host in sorted({q.host for q in _queues_owing(ch)}):
        if node_of(host) in newly:
            queue_host_restarted(ch, host)


def _queues_owing(ch: ChannelCore) -> set:
    """Queues that may hold this channel's consumers, unacked deliveries or unconfirmed publishes."""
    queues = set(ch.touched)
    for tracker in trackers(ch):
        queues.update(tracker.queues())
    return queues


def _confirms_lost(ch: ChannelCore, queues: list, *, abnormal: bool) -> None:
    for tracker in trackers(ch):
        for queue in queues:
            tracker.queue_gone(queue, abnormal=abnormal)
    send_confirms(ch)
    transactions.finish_commit(ch)
