"""The channel core: one AMQP channel's decisions, without IO.

Theory of operation. The reader hands the core every complete command of its channel
(`command`), and the runtime hands it what queues and the node send back (`receive`). The core
accumulates effects and the shell takes them with `flush()` once per socket read or mailbox batch,
so a burst of publishes becomes one `Send` per destination queue and one `Write` of frames.

- Publish: the exchange and routing come from the host's registry replica (read-only here); the
  routed queue names are placed on queue actors by `place`. Unroutable mandatory messages get a
  basic.return (312 NO_ROUTE) before their confirm. In confirm mode every publish takes the next seq
  and the ConfirmTracker decides when to ack; in tx mode publishes and settlements wait for commit.
- Synchronous methods that need another actor (declare, bind, consume, get, purge, delete ...) are
  calls: the core sends a request with a request id and stops taking commands; later commands wait in
  `_backlog`, in order, until the reply arrives. That keeps AMQP's per-channel ordering: a publish
  after a queue.declare is routed only after the declare has reached this host's replica.
- Deliveries: each gets the next delivery tag; ack-requiring ones are remembered in `Unacked` until
  settled. Prefetch is consumer credit granted to queues (flow/qos.py).
- Errors are values: a soft error closes the channel (channel.close, then only close-ok is awaited),
  a hard one is handed to the connection with `CloseConnection`.
- When the channel ends, every queue it touched gets `channel_down`, which requeues its unacked
  messages there and drops its consumers.
- Permissions (permissions.py) are checked before the resource is looked at, as rabbit_channel does;
  publish checks are cached per exchange until the registry replica changes (`metadata_changed`).
- Publish property rules (user-id, expiration, CC/BCC, reply-to) live in publish_checks.py and cost
  nothing for messages that carry none of those properties.
- Direct reply-to (reply_to.py): consuming "amq.rabbitmq.reply-to" sets the channel's one reply
  consumer; a default-exchange publish to "amq.rabbitmq.reply-to.<channel>.<key>" is sent to that
  channel as "direct_reply" and delivered there without a queue. As in RabbitMQ 3.10, such a key
  never counts as a route, so a mandatory publish to it is also returned (312 NO_ROUTE).
- Time is `tick()`: a delivery left unacked for more than consumer_timeout closes the channel (406).
- A queue that refuses publishes (x-overflow reject-publish) sends "rejected" with their confirm seqs;
  the tracker nacks exactly those.

Ordering rule: all effects leave in the order they were produced; pending publish batches are emitted
before any later message to a queue, so a queue sees publishes, settlements and calls in channel order.
"""
from __future__ import annotations

import base64
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Hashable

from actors.channel import permissions
from actors.channel.acks import Outstanding, Unacked
from actors.channel.confirms import ConfirmTracker
from actors.channel.lazy_headers import LazyHeaders
from actors.channel.permissions import CONFIGURE, EXCHANGE, QUEUE, READ, WRITE, PublishPermissions
from actors.channel.publish_checks import REPLY_TO_PREFIX, REPLY_TO_QUEUE, inspect, needs_inspection
from actors.channel.reply_to import new_key, parse_reply_name, reply_name
from actors.messages.calls import Reply
from actors.messages.channel_queue import (
    Cancel, ChannelDown, Confirm, Consume, ConsumerCancelled, Deliver, Get, Grant, Publish, Published, Purge,
    Rejected, Settle,
)
from actors.messages.direct_reply import DirectReply
from actors.mgmt.counters import MessageCounters
from actors.messages.node import (
    BindExchange, BindQueue, DeclareExchange, DeclareQueue, DeleteExchange, DeleteQueue, QueueHostRestarted,
    QueuesGone, UnbindExchange, UnbindQueue,
)
from actors.messages.runtime import Undelivered
from actors.placement import node_of
from effects import ChannelFinished, CloseConnection, Send, Write
from metadata import names, texts
from metadata.registry import EXCHANGE_TYPES
from flow.qos import QosLedger
from wire import methods as m
from wire.errors import (
    NOT_ALLOWED, NOT_FOUND, NOT_IMPLEMENTED, PRECONDITION_FAILED, CHANNEL_ERROR, AmqpError,
)
from wire.frames import content_frames, method_frame
from wire.inbound import Command

if TYPE_CHECKING:
    import random


OPEN, CLOSING, CLOSED = "open", "closing", "closed"
_new = tuple.__new__

consumer_timeout_default_ms = 1_800_000
CONSUMER_TIMEOUT_TEXT = ("delivery acknowledgement on channel {channel} timed out. Timeout value used: {ms} ms. "
                         "This timeout value can be configured, see consumers doc guide to learn more")


def new_tag(rng: random.Random, prefix: str) -> str:
    """RabbitMQ's generated names: prefix + 22 url-safe base64 characters of 16 random bytes."""
    raw = rng.getrandbits(128).to_bytes(16, "big")
    return prefix + base64.urlsafe_b64encode(raw).decode().rstrip("=")


class ChannelCore:
    def __init__(self, number: int, *, vhost: str, owner: Hashable, router: Any,
                 place: Callable[[str, str], Hashable], node: Hashable, frame_max: int,
                 capabilities: dict, rng: "random.Random", flow_credit: int = 400, user: str = "guest",
                 address: Hashable = None, parse_address: Callable[[str], Hashable] = str,
                 consumer_timeout_ms: int | None = consumer_timeout_default_ms,
                 ticks_per_second: int = 4) -> None:
        self.number = number
        self.vhost = vhost
        self.user = user
        self.address = address            # this channel's runtime address: where direct replies come
        self.parse_address = parse_address
        self.consumer_timeout_ms = consumer_timeout_ms
        # strictly more than the timeout must pass, so round up to whole ticks
        self._timeout_ticks = (None if consumer_timeout_ms is None
                               else -(-consumer_timeout_ms * ticks_per_second // 1000))
        self.now = 0                       # ticks since the channel opened
        self.publish_permissions = PublishPermissions(router, user, vhost)
        self.reply_consumer: tuple[str, str] | None = None  # (consumer tag, key) of direct reply-to
        self.owner = owner
        self.router = router
        self.place = place
        self.node = node
        self.frame_max = frame_max
        self.capabilities = capabilities
        self.rng = rng
        self.state = OPEN
        self._out: list = []                       # effects, in order
        self._frames: list = []                    # frames not yet wrapped in a Write
        self._pub: dict[Hashable, list] = {}       # queue -> publishes of this flush
        self._settlements: dict[Hashable, tuple[list, list, list]] = {}
        self._touched: set[Hashable] = set()       # queues that may hold our consumers/unacked
        self.down_nodes: frozenset[str] = frozenset()  # nodes the cluster sees down
        self._waiting: int | None = None           # request id of the call in progress
        self._then: Callable[[Reply], None] | None = None
        self._backlog: deque[Command] = deque()
        self._rid = 0
        self._delivery_tag = 0
        self.unacked = Unacked()
        self.qos = QosLedger(flow_credit)
        self.consumers: dict[str, tuple[Hashable, bool]] = {}  # tag -> (queue, ack_required)
        self.confirm: ConfirmTracker | None = None
        self.tx: list | None = None                # buffered publishes/settlements in tx mode
        self._commit: tuple[ConfirmTracker, int] | None = None  # tx.commit waiting for queues
        self.counters = MessageCounters()           # message_stats (actors/mgmt/counters.py)

    # ------------------------------------------------------------------ inputs
    def command(self, cmd: Command) -> None:
        if self.state != OPEN:
            self._while_closing(cmd.method)
        elif self._waiting is not None:
            self._backlog.append(cmd)
        else:
            self._dispatch(cmd)

    def receive(self, sender: Hashable, msg: Any) -> None:
        """A message from a queue, the node's replica or another channel (actors/messages)."""
        kind = type(msg)
        if kind is Deliver:
            if self.state == OPEN:
                self._deliver(sender, msg.consumer_tag, msg.messages)
        elif kind is Confirm:
            self._confirmed(sender, msg.upto)
        elif kind is Rejected:
            self._refused(sender, msg.seqs)
        elif kind is DirectReply:
            self._direct_reply(msg)
        elif kind is Reply:
            self._reply(msg.rid, msg)
        elif kind is ConsumerCancelled:
            self._server_cancel(msg.consumer_tag)
        elif kind is QueuesGone:
            for queue in msg.queues:
                self._queue_gone(queue)
        elif kind is Undelivered:
            self._undelivered(sender, msg.msg)
        elif kind is QueueHostRestarted:
            self._queue_host_restarted(msg.host)
        else:
            raise ValueError(f"channel got an unexpected message {kind.__name__}")

    def _queue_host_restarted(self, host: str) -> None:
        """A queue host crashed and came back, as RabbitMQ's channel sees a queue process go down:
        publishes waiting for its queues are nacked (they may or may not have been enqueued),
        their consumers are cancelled, and deliveries still unacked become orphans whose later
        ack, nack or reject is accepted and goes nowhere (their queue will redeliver them)."""
        lost = [q for q in self._touched_queues() if getattr(q, "host", None) == host]
        for queue in lost:
            for tracker in (self.confirm, self._commit and self._commit[0]):
                if tracker:
                    tracker.queue_gone(queue, abnormal=True)
        self._send_confirms()
        self._finish_commit()
        for tag, (queue, _) in list(self.consumers.items()):
            if getattr(queue, "host", None) == host:
                self._server_cancel(tag)
        self.unacked.orphan(lambda entry: getattr(entry.queue, "host", None) == host)

    def _touched_queues(self) -> set:
        queues = set(self._touched)
        for tracker in (self.confirm, self._commit and self._commit[0]):
            if tracker:
                queues.update(tracker.queues())
        return queues

    def _undelivered(self, queue: Hashable, msg: Any) -> None:
        """A message to `queue` found no queue actor (its host is restarting): as RabbitMQ does for
        a queue that went down, nack what is waiting for it and fail a call that waits for it."""
        if type(msg) is Publish:
            for tracker in (self.confirm, self._commit and self._commit[0]):
                if tracker:
                    tracker.queue_gone(queue, abnormal=True)
            self._send_confirms()
            self._finish_commit()
        elif type(msg) in (Consume, Cancel, Get, Purge) and msg.rid == self._waiting:
            name = getattr(queue, "name", str(queue)).split(":", 2)[-1]
            self._reply(msg.rid, Reply(msg.rid, error=AmqpError(
                NOT_FOUND, f"queue '{name}' in vhost '{self.vhost}' is down or inaccessible")))

    def tick(self) -> None:
        """One tick of time: close the channel if its oldest unacked delivery is past the timeout."""
        self.now += 1
        if self.state != OPEN or self._timeout_ticks is None:
            return
        oldest = self.unacked.oldest()
        if oldest is not None and self.now - oldest.at > self._timeout_ticks:
            self._error(AmqpError(PRECONDITION_FAILED, CONSUMER_TIMEOUT_TEXT.format(
                channel=self.number, ms=self.consumer_timeout_ms)))

    def metadata_changed(self) -> None:
        """The registry replica applied changes: cached permission answers may be stale."""
        self.publish_permissions.clear()

    def connection_closed(self) -> None:
        """The connection went away: release everything, send nothing to the client."""
        if self.state != CLOSED:
            self._release()
            self.state = CLOSED

    def flush(self, writable: bool = True) -> list:
        """Take the effects produced since the last flush."""
        self._send_confirms()
        if self.state == OPEN:
            for queue, tag, n in self.qos.take_grants(writable):
                self._emit(Send(queue, Grant(tag, n)))
        self._emit_pending()
        out, self._out = self._out, []
        return out

    # ------------------------------------------------------------------ plumbing
    def _write(self, *frames: bytes) -> None:
        self._frames.extend(frames)

    def _emit(self, effect: Any) -> None:
        self._emit_pending()
        self._out.append(effect)

    def _emit_pending(self) -> None:
        if self._frames:
            self._out.append(Write(self._frames))
            self._frames = []
        if self._pub:
            for queue, batch in self._pub.items():
                self._out.append(Send(queue, Publish(batch), len(batch)))
            self._pub = {}
        if self._settlements:
            for queue, (acked, requeued, discarded) in self._settlements.items():
                self._out.append(Send(queue, Settle(acked, requeued, discarded)))
            self._settlements = {}

    def _send_method(self, method: m.Method) -> None:
        self._write(method_frame(self.number, method))

    def _call(self, to: Hashable, request: Callable[[int], Any], then: Callable[[Reply], None]) -> None:
        """Send `request(rid)` and take no command until its Reply (then `then(reply)`)."""
        self._rid += 1
        self._waiting = self._rid
        self._then = then
        self._emit(Send(to, request(self._rid)))

    def _reply(self, rid: int, result: Reply) -> None:
        if rid != self._waiting:
            return  # a reply for a channel incarnation that was closed meanwhile
        then, self._then, self._waiting = self._then, None, None
        if self.state == OPEN:
            then(result)
        while self.state == OPEN and self._waiting is None and self._backlog:
            self._dispatch(self._backlog.popleft())

    def _failed(self, result: Reply, method: m.Method) -> bool:
        if result.error is None:
            return False
        self._error(result.error, method)
        return True

    def _error(self, error: AmqpError, method: m.Method | None = None) -> None:
        if method is not None and not error.class_id:
            error = error.at(method.CLASS_ID, method.METHOD_ID)
        if error.hard:
            self._emit(CloseConnection(error))
            self._release()
            self.state = CLOSED
            return
        self._send_method(m.ChannelClose(reply_code=error.code, reply_text=error.text,
                                         class_id=error.class_id, method_id=error.method_id))
        self._release()
        self.state = CLOSING

    def _release(self) -> None:
        """Give back everything this channel holds in queues.

        Publishes and settlements the client sent before the close still reach their queues, ahead
        of channel_down: a message published (or acked) and then the channel closed in one read
        must not be lost (or requeued). Only commands after the closing one are dropped."""
        self._emit_pending()
        self._backlog.clear()
        self.unacked.take_all()
        for tag in list(self.consumers):
            self.qos.remove(tag)
        self.consumers.clear()
        for queue in self._touched:
            self._emit(Send(queue, ChannelDown()))
        self._touched.clear()
        self.confirm = None
        self.tx = None
        self.reply_consumer = None

    def _while_closing(self, method: m.Method) -> None:
        if isinstance(method, m.ChannelCloseOk) and self.state == CLOSING:
            self.state = CLOSED
            self._emit(ChannelFinished())
        elif isinstance(method, m.ChannelClose) and self.state == CLOSING:
            self._send_method(m.ChannelCloseOk())
        # everything else on a closing channel is dropped, as RabbitMQ does

    # ------------------------------------------------------------------ dispatch
    def _dispatch(self, cmd: Command) -> None:
        method = cmd.method
        handler = _HANDLERS.get(type(method))
        if handler is None:
            self._error(AmqpError(NOT_IMPLEMENTED, f"{method.NAME} not supported on a channel", connection=True),
                        method)
            return
        handler(self, cmd)

    # --- channel class
    def _channel_close(self, cmd: Command) -> None:
        self._release()
        self._send_method(m.ChannelCloseOk())
        self.state = CLOSED
        self._emit(ChannelFinished())

    def _channel_flow(self, cmd: Command) -> None:
        if not cmd.method.active:
            self._error(AmqpError(NOT_IMPLEMENTED, "active=false", connection=True), cmd.method)
            return
        self._send_method(m.ChannelFlowOk(active=True))

    def _channel_open(self, cmd: Command) -> None:
        self._error(AmqpError(CHANNEL_ERROR, "second 'channel.open' seen", connection=True), cmd.method)

    # --- permissions
    def _denied(self, method: m.Method, perm: str, kind: str, name: str) -> bool:
        """Close the channel and say True when the user lacks `perm` on the resource."""
        error = permissions.check(self.router, self.user, self.vhost, perm, kind, name)
        if error is None:
            return False
        self._error(error, method)
        return True

    def _exists(self, kind: str, name: str) -> bool:
        if kind == QUEUE:
            found = self.router.check_queue_access(self.vhost, name, self.owner)
        else:
            found = self.router.exchange_for_publish(self.vhost, name)
        return not (isinstance(found, AmqpError) and found.code == NOT_FOUND)

    def _denied_via(self, method: m.Method, kind: str, name: str, target_kind: str, target: Any) -> bool:
        """RabbitMQ's check for a new resource naming another (alternate or dead-letter exchange):
        read on the new one, write on the one it names."""
        if not isinstance(target, (str, bytes)) or self._exists(kind, name):
            return False
        target = target.decode("utf-8", "replace") if isinstance(target, bytes) else target
        return (self._denied(method, READ, kind, name)
                or self._denied(method, WRITE, target_kind, target))

    # --- exchange and queue classes (calls to the node)
    def _node_call(self, cmd: Command, request: Callable[[int], Any], ok: Callable[[Any], m.Method | None]) -> None:
        method = cmd.method

        def then(result: Reply) -> None:
            if not self._failed(result, method):
                reply = ok(result.value)
                if reply is not None and not getattr(method, "nowait", False):
                    self._send_method(reply)
        self._call(self.node, request, then)

    def _exchange_declare(self, cmd: Command) -> None:
        x = cmd.method
        # type and default-exchange errors come first in RabbitMQ; the node reports those
        if not x.passive and x.type in EXCHANGE_TYPES and x.exchange != "":
            if self._denied(x, CONFIGURE, EXCHANGE, x.exchange):
                return
            if not names.is_reserved(x.exchange) and self._denied_via(
                    x, EXCHANGE, x.exchange, EXCHANGE, dict(x.arguments).get("alternate-exchange")):
                return
        self._node_call(cmd, lambda rid: DeclareExchange(rid, self.vhost, x.exchange, x.type, x.passive, x.durable,
                                                         x.auto_delete, x.internal, dict(x.arguments)),
                        lambda _: m.ExchangeDeclareOk())

    def _exchange_delete(self, cmd: Command) -> None:
        x = cmd.method
        if x.exchange != "" and not names.is_reserved(x.exchange) and self._denied(x, CONFIGURE, EXCHANGE, x.exchange):
            return
        self._node_call(cmd, lambda rid: DeleteExchange(rid, self.vhost, x.exchange, x.if_unused),
                        lambda _: m.ExchangeDeleteOk())

    def _binding_denied(self, x: m.Method, kind: str, destination: str, source: str) -> bool:
        """rabbit_channel:binding_action: write on the destination, then (unless the default exchange
        is involved, which the node refuses) read on the source."""
        if self._denied(x, WRITE, kind, destination):
            return True
        if source == "" or (kind == EXCHANGE and destination == ""):
            return False
        return self._denied(x, READ, EXCHANGE, source)

    def _exchange_bind(self, cmd: Command) -> None:
        x = cmd.method
        if self._binding_denied(x, EXCHANGE, x.destination, x.source):
            return
        self._node_call(cmd, lambda rid: BindExchange(rid, self.vhost, x.destination, x.source, x.routing_key,
                                                      dict(x.arguments)),
                        lambda _: m.ExchangeBindOk())

    def _exchange_unbind(self, cmd: Command) -> None:
        x = cmd.method
        if self._binding_denied(x, EXCHANGE, x.destination, x.source):
            return
        self._node_call(cmd, lambda rid: UnbindExchange(rid, self.vhost, x.destination, x.source, x.routing_key,
                                                        dict(x.arguments)),
                        lambda _: m.ExchangeUnbindOk())

    def _queue_declare(self, cmd: Command) -> None:
        x = cmd.method
        if x.queue.startswith(REPLY_TO_QUEUE):
            self._reply_to_declare(x)
            return
        if not x.passive and not (x.queue and names.is_reserved(x.queue)):
            # a server-named queue is checked under a name of the shape the node will pick
            name = x.queue or new_tag(self.rng, "amq.gen-")
            if self._denied(x, CONFIGURE, QUEUE, name) or self._denied_via(
                    x, QUEUE, name, EXCHANGE, dict(x.arguments).get("x-dead-letter-exchange")):
                return
        self._node_call(cmd, lambda rid: DeclareQueue(rid, self.vhost, x.queue, x.passive, x.durable, x.exclusive,
                                                      x.auto_delete, dict(x.arguments), self.owner),
                        lambda r: m.QueueDeclareOk(queue=r.queue, message_count=r.message_count,
                                                   consumer_count=r.consumer_count))

    def _reply_to_declare(self, x: m.QueueDeclare) -> None:
        """The pseudo-queue exists; a reply name exists while its consumer does (as far as this
        channel can tell: another channel's name is taken to exist if it decodes)."""
        found = x.queue == REPLY_TO_QUEUE
        parsed = None if found else parse_reply_name(x.queue)
        if parsed is not None:
            address, key = parsed
            mine = self.address is not None and address == str(self.address)
            found = not mine or (self.reply_consumer is not None and self.reply_consumer[1] == key)
        if not found:
            self._error(texts.not_found("queue", x.queue, self.vhost), x)
        elif not x.nowait:
            self._send_method(m.QueueDeclareOk(queue=x.queue, message_count=0, consumer_count=1))

    def _queue_delete(self, cmd: Command) -> None:
        x = cmd.method
        if self._denied(x, CONFIGURE, QUEUE, x.queue):
            return
        self._node_call(cmd, lambda rid: DeleteQueue(rid, self.vhost, x.queue, x.if_unused, x.if_empty, self.owner),
                        lambda n: m.QueueDeleteOk(message_count=n))

    def _queue_bind(self, cmd: Command) -> None:
        x = cmd.method
        if self._binding_denied(x, QUEUE, x.queue, x.exchange):
            return
        self._node_call(cmd, lambda rid: BindQueue(rid, self.vhost, x.queue, x.exchange, x.routing_key,
                                                   dict(x.arguments), self.owner),
                        lambda _: m.QueueBindOk())

    def _queue_unbind(self, cmd: Command) -> None:
        x = cmd.method
        if self._binding_denied(x, QUEUE, x.queue, x.exchange):
            return
        self._node_call(cmd, lambda rid: UnbindQueue(rid, self.vhost, x.queue, x.exchange, x.routing_key,
                                                     dict(x.arguments), self.owner),
                        lambda _: m.QueueUnbindOk())

    def _queue_for(self, method: m.Method, name: str) -> Hashable | None:
        """The queue actor for `name`, after RabbitMQ's read permission, existence and exclusivity checks."""
        if self._denied(method, READ, QUEUE, name):
            return None
        found = self.router.check_queue_access(self.vhost, name, self.owner)
        if isinstance(found, AmqpError):
            self._error(found, method)
            return None
        queue = self.place(self.vhost, found.name)
        if self.down_nodes and node_of(queue.host) in self.down_nodes:
            self._error(texts.home_node_down(node_of(queue.host), found.name, self.vhost), method)
            return None
        return queue

    def _queue_purge(self, cmd: Command) -> None:
        x = cmd.method
        queue = self._queue_for(x, x.queue)
        if queue is None:
            return

        def then(result: Reply) -> None:
            if not self._failed(result, x) and not x.nowait:
                self._send_method(m.QueuePurgeOk(message_count=result.value))
        self._call(queue, Purge, then)

    # --- basic class: consumers
    def _basic_qos(self, cmd: Command) -> None:
        x = cmd.method
        if x.prefetch_size:
            # RabbitMQ refuses a byte-based prefetch the same way
            self._error(AmqpError(NOT_IMPLEMENTED, f"prefetch_size!=0 ({x.prefetch_size})", connection=True), x)
            return
        self.qos.set_qos(x.prefetch_count, x.global_)
        self._send_method(m.BasicQosOk())

    def _tag_in_use(self, tag: str) -> bool:
        return tag in self.consumers or (self.reply_consumer is not None and self.reply_consumer[0] == tag)

    def _basic_consume(self, cmd: Command) -> None:
        x = cmd.method
        if x.queue == REPLY_TO_QUEUE:
            self._reply_to_consume(x)
            return
        queue = self._queue_for(x, x.queue or "")
        if queue is None:
            return
        tag = x.consumer_tag or new_tag(self.rng, "amq.ctag-")
        if self._tag_in_use(tag):
            self._error(AmqpError(NOT_ALLOWED, f"attempt to reuse consumer tag '{tag}'", connection=True), x)
            return
        ack_required = not x.no_ack
        self.qos.add(tag, queue, ack_required)
        credit = self.qos.take_grant(tag, True)
        self.consumers[tag] = (queue, ack_required)
        self._touched.add(queue)

        def then(result: Reply) -> None:
            if result.error is not None:
                self.qos.remove(tag)
                self.consumers.pop(tag, None)
                self._failed(result, x)
                return
            if not x.nowait:
                self._send_method(m.BasicConsumeOk(consumer_tag=tag))
        self._call(queue, lambda rid: Consume(rid, tag, ack_required, credit, x.exclusive, dict(x.arguments)), then)

    def _reply_to_consume(self, x: m.BasicConsume) -> None:
        if self._tag_in_use(x.consumer_tag):
            self._error(AmqpError(NOT_ALLOWED, f"attempt to reuse consumer tag '{x.consumer_tag}'",
                                  connection=True), x)
        elif not x.no_ack:
            self._error(AmqpError(PRECONDITION_FAILED, "reply consumer cannot acknowledge"), x)
        elif self.reply_consumer is not None:
            self._error(AmqpError(PRECONDITION_FAILED, "reply consumer already set"), x)
        else:
            tag = x.consumer_tag or new_tag(self.rng, "amq.ctag-")
            self.reply_consumer = (tag, new_key(self.rng))
            if not x.nowait:
                self._send_method(m.BasicConsumeOk(consumer_tag=tag))

    def _reply_name(self) -> str | None:
        if self.reply_consumer is None or self.address is None:
            return None
        return reply_name(str(self.address), self.reply_consumer[1])

    def _direct_reply(self, reply: DirectReply) -> None:
        """A reply sent to our reply name: deliver it if the name is still ours (else drop it)."""
        if self.state != OPEN or self.reply_consumer is None or self.reply_consumer[1] != reply.key:
            return
        self._delivery_tag += 1
        deliver = m.BasicDeliver(consumer_tag=self.reply_consumer[0], delivery_tag=self._delivery_tag,
                                 redelivered=False, exchange=reply.exchange, routing_key=reply.routing_key)
        self._frames.extend(content_frames(self.number, deliver, reply.header, reply.body, self.frame_max))

    def _send_direct_replies(self, keys: list[str], x: m.BasicPublish, header: bytes, body: bytes) -> None:
        for key in dict.fromkeys(keys):
            parsed = parse_reply_name(key) if key.startswith(REPLY_TO_PREFIX) else None
            if parsed is None:
                continue
            address, reply_key = parsed
            try:
                to = self.parse_address(address)
            except ValueError:
                continue  # not a name we issued: nobody to deliver to, as RabbitMQ
            self._emit(Send(to, DirectReply(reply_key, x.exchange, key, header, body)))

    def _basic_cancel(self, cmd: Command) -> None:
        x = cmd.method
        if self.reply_consumer is not None and self.reply_consumer[0] == x.consumer_tag:
            self.reply_consumer = None
            if not x.nowait:
                self._send_method(m.BasicCancelOk(consumer_tag=x.consumer_tag))
            return
        found = self.consumers.get(x.consumer_tag)
        if found is None:  # RabbitMQ answers cancel-ok for an unknown tag
            if not x.nowait:
                self._send_method(m.BasicCancelOk(consumer_tag=x.consumer_tag))
            return

        def then(_: Reply) -> None:
            self.consumers.pop(x.consumer_tag, None)
            self.qos.remove(x.consumer_tag)
            if not x.nowait:
                self._send_method(m.BasicCancelOk(consumer_tag=x.consumer_tag))
        self._call(found[0], lambda rid: Cancel(rid, x.consumer_tag), then)

    def _server_cancel(self, tag: str) -> None:
        if self.consumers.pop(tag, None) is None:
            return
        self.qos.remove(tag)
        if self.state == OPEN and self.capabilities.get("consumer_cancel_notify"):
            self._send_method(m.BasicCancel(consumer_tag=tag, nowait=True))

    def _deliver(self, queue: Hashable, tag: str, messages: Any) -> None:
        found = self.consumers.get(tag)
        if found is None:
            # cancelled by the queue meanwhile: hand ack-requiring ones back
            self._settle_ids(queue, requeued=[msg[0] for msg in messages])
            return
        ack_required = found[1]
        number, frame_max, write, now = self.number, self.frame_max, self._frames.extend, self.now
        dtag = self._delivery_tag
        redelivers = 0
        for msg_id, redelivered, exchange, routing_key, header, body in messages:
            dtag += 1
            if redelivered:
                redelivers += 1
            deliver = m.BasicDeliver(consumer_tag=tag, delivery_tag=dtag, redelivered=redelivered,
                                     exchange=exchange, routing_key=routing_key)
            write(content_frames(number, deliver, header, body, frame_max))
            if ack_required:
                self.unacked.add(dtag, Outstanding(queue, msg_id, tag, now))
        self._delivery_tag = dtag
        self.qos.delivered(tag, len(messages))
        counters = self.counters
        if ack_required:
            counters.deliver += len(messages)
        else:
            counters.deliver_no_ack += len(messages)
        counters.redeliver += redelivers

    def _basic_get(self, cmd: Command) -> None:
        x = cmd.method
        queue = self._queue_for(x, x.queue)
        if queue is None:
            return
        ack_required = not x.no_ack
        self._touched.add(queue)

        def then(result: Reply) -> None:
            if self._failed(result, x):
                return
            got, remaining = result.value.message, result.value.remaining
            if got is None:
                self.counters.get_empty += 1
                self._send_method(m.BasicGetEmpty())
                return
            msg_id, redelivered, exchange, routing_key, header, body = got
            if ack_required:
                self.counters.get += 1
            else:
                self.counters.get_no_ack += 1
            if redelivered:
                self.counters.redeliver += 1
            self._delivery_tag += 1
            if ack_required:
                self.unacked.add(self._delivery_tag, Outstanding(queue, msg_id, None, self.now))
            ok = m.BasicGetOk(delivery_tag=self._delivery_tag, redelivered=redelivered, exchange=exchange,
                              routing_key=routing_key, message_count=remaining)
            self._frames.extend(content_frames(self.number, ok, header, body, self.frame_max))
        self._call(queue, lambda rid: Get(rid, ack_required), then)

    # --- basic class: settlement
    def _settle_ids(self, queue: Hashable, *, acked=(), requeued=(), discarded=()) -> None:
        a, r, d = self._settlements.get(queue) or self._settlements.setdefault(queue, ([], [], []))
        a.extend(acked)
        r.extend(requeued)
        d.extend(discarded)

    def _settle(self, method: m.Method, tag: int, multiple: bool, how: str) -> None:
        entries = self.unacked.take(tag, multiple)
        if entries is None:
            self._error(AmqpError(PRECONDITION_FAILED, f"unknown delivery tag {tag}"), method)
            return
        if self.tx is not None:
            self.tx.append(("settle", entries, how))
            return
        self._apply_settle(entries, how)

    def _apply_settle(self, entries: list[Outstanding], how: str) -> None:
        per_consumer: dict[str, int] = {}
        if how == "ack":
            self.counters.ack += len(entries)
        for queue, msg_id, ctag, _ in entries:
            if queue is None:  # an orphan of a queue host that restarted
                continue
            if how == "ack":
                self._settle_ids(queue, acked=(msg_id,))
            elif how == "requeue":
                self._settle_ids(queue, requeued=(msg_id,))
            else:
                self._settle_ids(queue, discarded=(msg_id,))
            if ctag is not None:
                per_consumer[ctag] = per_consumer.get(ctag, 0) + 1
        for ctag, n in per_consumer.items():
            self.qos.settled(ctag, n)

    def _basic_ack(self, cmd: Command) -> None:
        x = cmd.method
        self._settle(x, x.delivery_tag, x.multiple, "ack")

    def _basic_nack(self, cmd: Command) -> None:
        x = cmd.method
        self._settle(x, x.delivery_tag, x.multiple, "requeue" if x.requeue else "discard")

    def _basic_reject(self, cmd: Command) -> None:
        x = cmd.method
        self._settle(x, x.delivery_tag, False, "requeue" if x.requeue else "discard")

    def _basic_recover(self, cmd: Command) -> None:
        x = cmd.method
        if not x.requeue:
            self._error(AmqpError(NOT_IMPLEMENTED, "requeue=false", connection=True), x)
            return
        self._apply_settle(self.unacked.take_all(), "requeue")
        if isinstance(x, m.BasicRecover):
            self._send_method(m.BasicRecoverOk())

    # --- basic.publish
    def _basic_publish(self, cmd: Command) -> None:
        x = cmd.method
        if x.immediate:
            self._error(AmqpError(NOT_IMPLEMENTED, "immediate=true", connection=True), x)
            return
        denied = self.publish_permissions.check(x.exchange)
        if denied is not None:
            self._error(denied, x)
            return
        exchange = self.router.exchange_for_publish(self.vhost, x.exchange)
        if isinstance(exchange, AmqpError):
            self._error(exchange, x)
            return
        header, body = cmd.header, cmd.body
        extra: list[str] = []
        if needs_inspection(header):
            inspected = inspect(header, self.user, self._reply_name)
            if isinstance(inspected, AmqpError):
                self._error(inspected, x)
                return
            header, extra = inspected
        route, vhost, routing_key = self.router.route, self.vhost, x.routing_key
        if not extra:
            routed = route(vhost, x.exchange, routing_key, LazyHeaders(header))
        else:  # CC/BCC: the union of the routes of every key
            lazy = LazyHeaders(header)
            routed = list(dict.fromkeys(name for key in (routing_key, *extra)
                                        for name in route(vhost, x.exchange, key, lazy)))
        if x.exchange == "" and (routing_key.startswith(REPLY_TO_PREFIX)
                                 or any(key.startswith(REPLY_TO_PREFIX) for key in extra)):
            # delivered at once even in tx mode: RabbitMQ does it while routing, before the tx buffer
            self._send_direct_replies([routing_key, *extra], x, header, body)
        queues = [self.place(vhost, name) for name in routed]
        if self.tx is not None:
            self.tx.append(("publish", queues, x, header, body))
            return
        self._route(queues, x, header, body, self.confirm)

    def _route(self, queues: list, x: m.BasicPublish, header: bytes, body: bytes,
               tracker: ConfirmTracker | None) -> None:
        counters = self.counters
        counters.publish += 1
        if not queues:
            if x.mandatory:
                counters.return_unroutable += 1
                ret = m.BasicReturn(reply_code=312, reply_text="NO_ROUTE", exchange=x.exchange,
                                    routing_key=x.routing_key)
                self._frames.extend(content_frames(self.number, ret, header, body, self.frame_max))
            else:
                counters.drop_unroutable += 1
        seq = tracker.publish(queues) if tracker is not None else 0
        if self.down_nodes:
            queues = self._reachable(queues, seq, tracker)
        record = _new(Published, (seq, x.exchange, x.routing_key, header, body))  # half of Published(...)'s cost
        pub = self._pub
        for queue in queues:
            batch = pub.get(queue)
            if batch is None:
                pub[queue] = [record]
            else:
                batch.append(record)
        # confirms of unroutable publishes go out once per flush (after this batch's returns)

    def _reachable(self, queues: list, seq: int, tracker: ConfirmTracker | None) -> list:
        """The queues whose node is up; a publish to a queue on a down node is nacked at once, as
        RabbitMQ's channel nacks what it sent to a queue process that went down."""
        down = [q for q in queues if node_of(q.host) in self.down_nodes]
        if down and tracker is not None:
            for queue in down:
                tracker.refused(queue, [seq])
        return [q for q in queues if q not in down] if down else queues

    def nodes_down(self, down: frozenset[str]) -> None:
        """The nodes the cluster sees down now: what was in flight to their queues is lost."""
        newly = down - self.down_nodes
        self.down_nodes = down
        if not newly:
            return
        for host in sorted({q.host for q in self._touched_queues()}):
            if node_of(host) in newly:
                self._queue_host_restarted(host)

    def message_stats(self) -> dict[str, int]:
        """The channel's counters (confirm: publishes confirmed or nacked to the client so far)."""
        if self.confirm is not None:
            self.counters.confirm = self.confirm.settled_count()
        return self.counters.as_dict()

    def _confirmed(self, queue: Hashable, upto: int) -> None:
        if self._commit is not None:
            self._commit[0].confirmed(queue, upto)
            self._finish_commit()
        elif self.confirm is not None:
            self.confirm.confirmed(queue, upto)
            self._send_confirms()

    def _refused(self, queue: Hashable, seqs: list[int]) -> None:
        """`queue` refused these publishes (x-overflow reject-publish): nack exactly them."""
        if self._commit is not None:
            self._commit[0].refused(queue, seqs)
            self._finish_commit()
        elif self.confirm is not None:
            self.confirm.refused(queue, seqs)
            self._send_confirms()

    def _queue_gone(self, queue: Hashable) -> None:
        for tracker in (self.confirm, self._commit and self._commit[0]):
            if tracker:
                tracker.queue_gone(queue, abnormal=False)
        self._send_confirms()
        self._finish_commit()

    def _send_confirms(self) -> None:
        if self.confirm is None or self.state != OPEN:
            return
        for ack, tag, multiple in self.confirm.take():
            self._send_method(m.BasicAck(delivery_tag=tag, multiple=multiple) if ack
                              else m.BasicNack(delivery_tag=tag, multiple=multiple, requeue=False))

    # --- confirm and tx classes
    def _confirm_select(self, cmd: Command) -> None:
        x = cmd.method
        if self.tx is not None:
            self._error(AmqpError(PRECONDITION_FAILED, "cannot switch from tx to confirm mode"), x)
            return
        if self.confirm is None:
            self.confirm = ConfirmTracker()
        if not x.nowait:
            self._send_method(m.ConfirmSelectOk())

    def _tx_select(self, cmd: Command) -> None:
        if self.confirm is not None:
            self._error(AmqpError(PRECONDITION_FAILED, "cannot switch from confirm to tx mode"), cmd.method)
            return
        if self.tx is None:
            self.tx = []
        self._send_method(m.TxSelectOk())

    def _tx_commit(self, cmd: Command) -> None:
        if self.tx is None:
            self._error(AmqpError(PRECONDITION_FAILED, "channel is not transactional"), cmd.method)
            return
        work, self.tx = self.tx, []
        tracker = ConfirmTracker()
        for item in work:
            if item[0] == "publish":
                _, queues, x, header, body = item
                self._route(queues, x, header, body, tracker)
            else:
                self._apply_settle(item[1], item[2])
        # commit-ok waits until every queue has the committed publishes, as RabbitMQ's tx does
        self._rid += 1
        self._waiting = self._rid
        self._then = lambda _: None
        self._commit = (tracker, self._rid)
        self._finish_commit()

    def _finish_commit(self) -> None:
        if self._commit is None:
            return
        tracker, rid = self._commit
        if len(tracker):
            return
        self._commit = None
        self._send_method(m.TxCommitOk())
        self._reply(rid, Reply(rid))

    def _tx_rollback(self, cmd: Command) -> None:
        if self.tx is None:
            self._error(AmqpError(PRECONDITION_FAILED, "channel is not transactional"), cmd.method)
            return
        self.tx = []
        self._send_method(m.TxRollbackOk())


_HANDLERS: dict[type, Callable[[ChannelCore, Command], None]] = {
    m.ChannelClose: ChannelCore._channel_close,
    m.ChannelFlow: ChannelCore._channel_flow,
    m.ChannelOpen: ChannelCore._channel_open,
    m.ExchangeDeclare: ChannelCore._exchange_declare,
    m.ExchangeDelete: ChannelCore._exchange_delete,
    m.ExchangeBind: ChannelCore._exchange_bind,
    m.ExchangeUnbind: ChannelCore._exchange_unbind,
    m.QueueDeclare: ChannelCore._queue_declare,
    m.QueueDelete: ChannelCore._queue_delete,
    m.QueueBind: ChannelCore._queue_bind,
    m.QueueUnbind: ChannelCore._queue_unbind,
    m.QueuePurge: ChannelCore._queue_purge,
    m.BasicQos: ChannelCore._basic_qos,
    m.BasicConsume: ChannelCore._basic_consume,
    m.BasicCancel: ChannelCore._basic_cancel,
    m.BasicGet: ChannelCore._basic_get,
    m.BasicAck: ChannelCore._basic_ack,
    m.BasicNack: ChannelCore._basic_nack,
    m.BasicReject: ChannelCore._basic_reject,
    m.BasicRecover: ChannelCore._basic_recover,
    m.BasicRecoverAsync: ChannelCore._basic_recover,
    m.BasicPublish: ChannelCore._basic_publish,
    m.ConfirmSelect: ChannelCore._confirm_select,
    m.TxSelect: ChannelCore._tx_select,
    m.TxCommit: ChannelCore._tx_commit,
    m.TxRollback: ChannelCore._tx_rollback,
}
