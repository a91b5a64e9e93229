"""The channel core: one AMQP channel's decisions, without IO.

Theory of operation. The reader hands the core every complete command of its channel
(`command`), and the runtime hands it what queues and the node send back (`receive`). The core
accumulates effects in its Outbox (outbox.py) and the shell takes them with `flush()` once per
socket read or mailbox batch, so a burst of publishes becomes one `Send` per destination queue and
one `Write` of frames.

This module holds the channel's state and the machinery every method shares (the outbox, calls,
errors, release); what each method does lives in the module of its concern, as functions over this
state, chosen by the table in dispatch.py:
- lifecycle.py: open -> closing -> closed, and the channel class;
- topology.py: exchange.* and queue.* (calls to the node); resources.py: the permission, existence
  and exclusivity checks RabbitMQ makes before it touches a resource (permissions.py asks the
  registry, and remembers what was allowed as rabbit_channel does, until the channel hibernates:
  hibernation.py);
- publishing.py: basic.publish, routing, basic.return; confirm_mode.py: publisher confirms
  (ConfirmTracker in confirms.py); transactions.py: tx.*;
- consuming.py: basic.qos/consume/cancel and deliveries; basic_get.py; settling.py: ack, nack,
  reject, recover (Unacked in acks.py); direct_reply.py: direct reply-to;
- lost_queues.py: queues deleted, crashed or unreachable.
Each method family bumps the channel's message counters (`counters`, actors/stats/counters.py) where
it handles its messages.

Rules kept here:
- Synchronous methods that need another actor (declare, bind, consume, get, purge, delete ...) are
  calls: the core sends a request with a request id and stops taking commands; later commands wait
  in `_backlog`, in order, until the reply arrives. That keeps AMQP's per-channel ordering: a
  publish after a queue.declare is routed only after the declare has reached this host's replica.
  A consumer cancelled by its queue during a call is cancelled after the call's answer, as in
  RabbitMQ, whose channel is blocked in the call (queue.delete-ok before basic.cancel).
- Errors are values: a soft error closes the channel (channel.close, then only close-ok is
  awaited), a hard one is handed to the connection with `CloseConnection`.
- When the channel ends, every queue it touched gets `channel_down`, which requeues its unacked
  messages there and drops its consumers.
- Time is `tick()`: a delivery left unacked for more than consumer_timeout closes the channel (406).

Ordering rule: all effects leave in the order they were produced (outbox.py), so a queue sees
publishes, settlements and calls in channel order.
"""
from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Hashable

from actors.channel import confirm_mode, consuming, direct_reply, lifecycle, lost_queues
from actors.channel.acks import Unacked
from actors.channel.dispatch import dispatch
from actors.channel.lifecycle import CLOSED, CLOSING, OPEN
from actors.channel.outbox import Outbox
from actors.channel.quorum_links import QuorumLinks
from actors.channel.hibernation import Hibernation
from actors.channel.permissions import PermissionCache
from actors.channel.publish_checks import MAX_MESSAGE_SIZE_DEFAULT
from actors.messages.calls import Reply
from actors.messages.channel_queue import (
    ChannelDown, Confirm, ConsumerCancelled, Deliver, Grant, Rejected,
)
from actors.messages.direct_reply import DirectReply
from actors.messages.node import QueueHostRestarted, QueuesGone
from actors.messages.runtime import Undelivered
from actors.stats.counters import ExchangeCounts, MessageCounters
from effects import CloseConnection, Send
from flow.qos import QosLedger
from wire import methods as m
from wire.errors import PRECONDITION_FAILED, AmqpError
from wire.frames import method_frame
from wire.inbound import Command

if TYPE_CHECKING:
    import random

    from actors.channel.confirms import ConfirmTracker


consumer_timeout_default_ms = 1_800_000
CONSUMER_TIMEOUT_TEXT = ("delivery acknowledgement on channel {channel} timed out. Timeout value used: {ms} ms. "
                         "This timeout value can be configured, see consumers doc guide to learn more")


class ChannelCore:
    def __init__(self, number: int, *, vhost: str, owner: Hashable, router: Any,
                 place: Callable[[str, str], Hashable], node: Hashable, frame_max: int,
                 capabilities: dict, rng: "random.Random", flow_credit: int = 400, user: str = "guest",
                 address: Hashable = None, parse_address: Callable[[str], Hashable] = str,
                 consumer_timeout_ms: int | None = consumer_timeout_default_ms,
                 ticks_per_second: int = 4, max_message_size: int = MAX_MESSAGE_SIZE_DEFAULT,
                 impersonator: bool = False) -> None:
        self.number = number
        self.impersonator = impersonator  # the user's tags at login allow another user-id (publish_checks.py)
        self.max_message_size = max_message_size
        self.vhost = vhost
        self.user = user
        self.address = address            # this channel's runtime address: where direct replies come
        self.parse_address = parse_address
        self.consumer_timeout_ms = consumer_timeout_ms
        # strictly more than the timeout must pass, so round up to whole ticks
        self._timeout_ticks = (None if consumer_timeout_ms is None
                               else -(-consumer_timeout_ms * ticks_per_second // 1000))
        self.now = 0                       # ticks since the channel opened
        self.permissions = PermissionCache(router, user, vhost)
        self.hibernation = Hibernation(ticks_per_second, rng)
        self.reply_consumer: tuple[str, str] | None = None  # (consumer tag, key) of direct reply-to
        self.owner = owner
        self.router = router
        self.place = place
        self.node = node
        self.frame_max = frame_max
        self.capabilities = capabilities
        self.rng = rng
        self.state = OPEN
        self.out = Outbox()
        self.touched: set[Hashable] = set()        # queues that may hold our consumers/unacked
        self.down_nodes: frozenset[str] = frozenset()  # nodes the cluster sees down (lost_queues.py)
        self._waiting: int | None = None           # request id of the call in progress
        self._calling: Hashable | None = None      # where that call went (a queue's host may die under it)
        self._then: Callable[[Reply], None] | None = None
        self._backlog: deque[Command] = deque()
        self._cancelled_during_call: list[str] | None = None  # None: no call in progress
        self._rid = 0
        self.delivery_tag = 0                      # the last one given out
        self.unacked = Unacked()
        self.qos = QosLedger(flow_credit)
        self.consumers: dict[str, tuple[Hashable, bool]] = {}  # tag -> (queue, ack_required)
        self.streams: dict[Hashable, str] = {}  # the stream queues consumed from: address -> name
        self.confirm: ConfirmTracker | None = None
        self.tx: list | None = None                # buffered publishes/settlements in tx mode
        self.commit: tuple[ConfirmTracker, int] | None = None  # tx.commit waiting for queues
        self.counters = MessageCounters()           # message_stats (actors/stats/counters.py)
        self.exchange_counts: ExchangeCounts = {}   # the exchanges' publish_in / publish_out (idem)
        self.quorum = QuorumLinks(router.quorum_members, retry_ticks=ticks_per_second)  # quorum queues' leaders

    # ------------------------------------------------------------------ inputs
    def command(self, cmd: Command) -> None:
        self.hibernation.woke(self.now)
        if self.state != OPEN:
            lifecycle.while_closing(self, cmd.method)
        elif self._waiting is not None:
            self._backlog.append(cmd)
        else:
            dispatch(self, cmd)

    def receive(self, sender: Hashable, msg: Any) -> None:
        """A message from a queue, the node's replica or another channel (actors/messages)."""
        self.hibernation.woke(self.now)
        via = self.quorum.receive(sender, msg)
        if via is not None:  # from a quorum queue's member: what its queue says, through its client
            queue, said, sends = via
            for effect in sends:
                self.out.emit(effect)
            for one in said:
                self._receive(queue, one)
            return
        self._receive(sender, msg)

    def _receive(self, sender: Hashable, msg: Any) -> None:
        kind = type(msg)
        if kind is Deliver:
            if self.state == OPEN:
                consuming.deliver(self, sender, msg.consumer_tag, msg.messages)
        elif kind is Confirm:
            confirm_mode.confirmed(self, sender, msg.upto)
        elif kind is Rejected:
            confirm_mode.refused(self, sender, msg.seqs)
        elif kind is DirectReply:
            direct_reply.deliver(self, msg)
        elif kind is Reply:
            self.reply(msg.rid, msg)
        elif kind is ConsumerCancelled:
            if self._cancelled_during_call is not None:
                self._cancelled_during_call.append(msg.consumer_tag)
            else:
                consuming.server_cancel(self, msg.consumer_tag)
        elif kind is QueuesGone:
            for queue in msg.queues:
                lost_queues.queue_deleted(self, queue)
                self.quorum.forget(queue)
        elif kind is Undelivered:
            lost_queues.undelivered(self, sender, msg.msg, msg.gone)
        elif kind is QueueHostRestarted:
            lost_queues.queue_host_restarted(self, msg.host)
            self.quorum.host_restarted(msg.host)
        else:
            raise ValueError(f"channel got an unexpected message {kind.__name__}")

    def tick(self) -> None:
        """One tick of time: hibernate when idle for long enough (the permission caches are
        forgotten); close the channel if its oldest unacked delivery is past the timeout."""
        self.now += 1
        if self.hibernation.asleep_now(self.now):
            self.permissions.forget()
        for effect in self.quorum.tick():
            self.out.emit(effect)
        if self.state != OPEN or self._timeout_ticks is None:
            return
        oldest = self.unacked.oldest()
        if oldest is not None and self.now - oldest.at > self._timeout_ticks:
            self.error(AmqpError(PRECONDITION_FAILED, CONSUMER_TIMEOUT_TEXT.format(
                channel=self.number, ms=self.consumer_timeout_ms)))

    def nodes_down(self, down: frozenset[str]) -> None:
        """The nodes the cluster sees down now (lost_queues.nodes_down)."""
        lost_queues.nodes_down(self, down)

    def connection_closed(self) -> None:
        """The connection went away: release everything, send nothing to the client."""
        if self.state != CLOSED:
            self.release()
            self.state = CLOSED

    def flush(self, writable: bool = True) -> list:
        """Take the effects produced since the last flush."""
        confirm_mode.send_confirms(self)
        if self.state == OPEN:
            for queue, tag, n in self.qos.take_grants(writable):
                self.out.emit(Send(queue, Grant(tag, n)))
        return self.quorum.route(self.out.take())

    def message_stats(self) -> dict[str, int]:
        """The channel's counters (confirm: publishes confirmed or nacked to the client so far)."""
        if self.confirm is not None:
            self.counters.confirm = self.confirm.settled_count()
        return self.counters.as_dict()

    # ------------------------------------------------------------------ shared by every method
    def send_method(self, method: m.Method) -> None:
        self.out.frames.append(method_frame(self.number, method))

    def call(self, to: Hashable, request: Callable[[int], Any], then: Callable[[Reply], None]) -> None:
        """Send `request(rid)` and take no command until its Reply (then `then(reply)`).

        A consumer its queue cancels meanwhile is cancelled after the reply is answered: RabbitMQ's
        channel is blocked in the call and reads the cancel from its mailbox afterwards, so a
        channel deleting the queue it consumes from sends queue.delete-ok, THEN basic.cancel
        (py-amqp raises ConsumerCancelled inside queue_delete on the other order)."""
        self.out.emit(Send(to, request(self.wait(then))))
        self._calling = to
        self._cancelled_during_call = []

    def wait(self, then: Callable[[Reply], None]) -> int:
        """Take no command until the Reply with the returned request id (then `then(reply)`)."""
        self._rid += 1
        self._waiting = self._rid
        self._then = then
        return self._rid

    def reply(self, rid: int, result: Reply) -> None:
        if rid != self._waiting:
            return  # a reply for a channel incarnation that was closed meanwhile
        then, self._then, self._waiting, self._calling = self._then, None, None, None
        cancelled, self._cancelled_during_call = self._cancelled_during_call, None
        if self.state == OPEN:
            then(result)
        for tag in cancelled or ():
            consuming.server_cancel(self, tag)
        while self.state == OPEN and self._waiting is None and self._backlog:
            dispatch(self, self._backlog.popleft())

    def is_waiting_for(self, rid: int) -> bool:
        return rid == self._waiting

    def call_to(self) -> tuple[int, Hashable] | None:
        """(request id, destination) of the call in progress to an actor (None: none, or the node's)."""
        return None if self._waiting is None or self._calling is None else (self._waiting, self._calling)

    def is_calling(self) -> bool:
        """Whether a call is in flight or commands wait behind one."""
        return self._waiting is not None or bool(self._backlog)

    def failed(self, result: Reply, method: m.Method) -> bool:
        """Close the channel and say True when `result` is an error."""
        if result.error is None:
            return False
        self.error(result.error, method)
        return True

    def error(self, error: AmqpError, method: m.Method | None = None) -> None:
        if method is not None and not error.class_id:
            error = error.at(method.CLASS_ID, method.METHOD_ID)
        if error.hard:
            self.out.emit(CloseConnection(error))
            self.release()
            self.state = CLOSED
            return
        self.send_method(m.ChannelClose(reply_code=error.code, reply_text=error.text,
                                        class_id=error.class_id, method_id=error.method_id))
        self.release()
        self.state = CLOSING

    def release(self) -> None:
        """Give back everything this channel holds in queues.

        Publishes and settlements the client sent before the close still reach their queues, ahead
        of channel_down: a message published (or acked) and then the channel closed in one read
        must not be lost (or requeued). Only commands after the closing one are dropped."""
        self.out.emit_gathered()
        self._backlog.clear()
        self._cancelled_during_call = None
        self.unacked.take_all()
        for tag in list(self.consumers):
            self.qos.remove(tag)
        self.consumers.clear()
        for queue in self.touched:
            self.out.emit(Send(queue, ChannelDown()))
        self.touched.clear()
        self.confirm = None
        self.tx = None
        self.reply_consumer = None
