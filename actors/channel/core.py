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

Ordering rule: all effects leave in the order they were produced; pending publish batches are emitted
before any later message to a queue, so a queue sees publishes, settlements and calls in channel order.
"""
from __future__ import annotations

import base64
import random
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Hashable

from actors.channel.acks import Outstanding, Unacked
from actors.channel.confirms import ConfirmTracker
from actors.channel.lazy_headers import LazyHeaders
from actors.effects import Send
from flow.qos import QosLedger
from wire import methods as m
from wire.errors import (
    ACCESS_REFUSED, NOT_ALLOWED, NOT_FOUND, NOT_IMPLEMENTED, PRECONDITION_FAILED, CHANNEL_ERROR, AmqpError,
)
from wire.frames import content_frames, method_frame
from wire.inbound import Command


@dataclass(frozen=True, slots=True)
class Write:
    """Frames for the socket, in order."""

    chunks: list


@dataclass(frozen=True, slots=True)
class CloseConnection:
    """A connection-level error found while handling a channel's command."""

    error: AmqpError


@dataclass(frozen=True, slots=True)
class Finished:
    """The channel is over (close-ok sent or received); the shell may forget it."""


OPEN, CLOSING, CLOSED = "open", "closing", "closed"

Reply = tuple  # ("ok", value) | ("err", code, detail, connection)


def new_tag(rng: random.Random, prefix: str) -> str:
    """RabbitMQ's generated names: prefix + 22 url-safe base64 characters of 16 random bytes."""
    raw = rng.getrandbits(128).to_bytes(16, "big")
    return prefix + base64.urlsafe_b64encode(raw).decode().rstrip("=")


class ChannelCore:
    def __init__(self, number: int, *, vhost: str, owner: Hashable, router: Any,
                 place: Callable[[str, str], Hashable], node: Hashable, frame_max: int,
                 capabilities: dict, rng: random.Random, flow_credit: int = 400) -> None:
        self.number = number
        self.vhost = vhost
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

    # ------------------------------------------------------------------ inputs
    def command(self, cmd: Command) -> None:
        if self.state != OPEN:
            self._while_closing(cmd.method)
        elif self._waiting is not None:
            self._backlog.append(cmd)
        else:
            self._dispatch(cmd)

    def receive(self, sender: Hashable, kind: str, body: Any) -> None:
        if kind == "deliver":
            if self.state == OPEN:
                self._deliver(sender, body[0], body[1])
        elif kind == "confirm":
            self._confirmed(sender, body)
        elif kind == "reply":
            self._reply(body[0], body[1])
        elif kind == "cancelled":
            self._server_cancel(body)
        elif kind == "queues_gone":
            for queue in body:
                self._queue_gone(queue)
        else:
            raise ValueError(f"channel got unknown message kind {kind!r}")

    def connection_closed(self) -> None:
        """The connection went away: release everything, send nothing to the client."""
        if self.state != CLOSED:
            self._release()
            self.state = CLOSED

    def flush(self, writable: bool = True) -> list:
        """Take the effects produced since the last flush."""
        if self.state == OPEN:
            for queue, tag, n in self.qos.take_grants(writable):
                self._emit(Send(queue, "grant", ((tag, n),)))
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
                self._out.append(Send(queue, "publish", batch))
            self._pub = {}
        if self._settlements:
            for queue, (acked, requeued, discarded) in self._settlements.items():
                self._out.append(Send(queue, "settle", (acked, requeued, discarded)))
            self._settlements = {}

    def _send_method(self, method: m.Method) -> None:
        self._write(method_frame(self.number, method))

    def _call(self, to: Hashable, kind: str, args: tuple, then: Callable[[Reply], None]) -> None:
        self._rid += 1
        self._waiting = self._rid
        self._then = then
        self._emit(Send(to, kind, (self._rid, *args)))

    def _reply(self, rid: int, result: Reply) -> None:
        if rid != self._waiting:
            return  # a reply for a channel incarnation that was closed meanwhile
        then, self._then, self._waiting = self._then, None, None
        if self.state == OPEN:
            then(result)
        while self.state == OPEN and self._waiting is None and self._backlog:
            self._dispatch(self._backlog.popleft())

    def _failed(self, result: Reply, method: m.Method) -> bool:
        if result[0] == "ok":
            return False
        _, code, detail, connection = result
        self._error(AmqpError(code, detail, connection=connection), method)
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
        """Give back everything this channel holds in queues."""
        self._pub.clear()
        self._settlements.clear()
        self._backlog.clear()
        self.unacked.take_all()
        for tag in list(self.consumers):
            self.qos.remove(tag)
        self.consumers.clear()
        for queue in self._touched:
            self._emit(Send(queue, "channel_down", ()))
        self._touched.clear()
        self.confirm = None
        self.tx = None

    def _while_closing(self, method: m.Method) -> None:
        if isinstance(method, m.ChannelCloseOk) and self.state == CLOSING:
            self.state = CLOSED
            self._emit(Finished())
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
        self._emit(Finished())

    def _channel_flow(self, cmd: Command) -> None:
        if not cmd.method.active:
            self._error(AmqpError(NOT_IMPLEMENTED, "active=false", connection=True), cmd.method)
            return
        self._send_method(m.ChannelFlowOk(active=True))

    def _channel_open(self, cmd: Command) -> None:
        self._error(AmqpError(CHANNEL_ERROR, "second 'channel.open' seen", connection=True), cmd.method)

    # --- exchange and queue classes (calls to the node)
    def _node_call(self, cmd: Command, op: str, args: tuple, ok: Callable[[Any], m.Method | None]) -> None:
        method = cmd.method

        def then(result: Reply) -> None:
            if not self._failed(result, method):
                reply = ok(result[1])
                if reply is not None and not getattr(method, "nowait", False):
                    self._send_method(reply)
        self._call(self.node, "call", (op, args), then)

    def _exchange_declare(self, cmd: Command) -> None:
        x = cmd.method
        self._node_call(cmd, "exchange.declare",
                        (self.vhost, x.exchange, x.type, x.passive, x.durable, x.auto_delete, x.internal,
                         dict(x.arguments)), lambda _: m.ExchangeDeclareOk())

    def _exchange_delete(self, cmd: Command) -> None:
        x = cmd.method
        self._node_call(cmd, "exchange.delete", (self.vhost, x.exchange, x.if_unused),
                        lambda _: m.ExchangeDeleteOk())

    def _exchange_bind(self, cmd: Command) -> None:
        x = cmd.method
        self._node_call(cmd, "exchange.bind",
                        (self.vhost, x.destination, x.source, x.routing_key, dict(x.arguments)),
                        lambda _: m.ExchangeBindOk())

    def _exchange_unbind(self, cmd: Command) -> None:
        x = cmd.method
        self._node_call(cmd, "exchange.unbind",
                        (self.vhost, x.destination, x.source, x.routing_key, dict(x.arguments)),
                        lambda _: m.ExchangeUnbindOk())

    def _queue_declare(self, cmd: Command) -> None:
        x = cmd.method
        self._node_call(cmd, "queue.declare",
                        (self.vhost, x.queue, x.passive, x.durable, x.exclusive, x.auto_delete,
                         dict(x.arguments), self.owner),
                        lambda r: m.QueueDeclareOk(queue=r[0], message_count=r[1], consumer_count=r[2]))

    def _queue_delete(self, cmd: Command) -> None:
        x = cmd.method
        self._node_call(cmd, "queue.delete", (self.vhost, x.queue, x.if_unused, x.if_empty, self.owner),
                        lambda n: m.QueueDeleteOk(message_count=n))

    def _queue_bind(self, cmd: Command) -> None:
        x = cmd.method
        self._node_call(cmd, "queue.bind",
                        (self.vhost, x.queue, x.exchange, x.routing_key, dict(x.arguments), self.owner),
                        lambda _: m.QueueBindOk())

    def _queue_unbind(self, cmd: Command) -> None:
        x = cmd.method
        self._node_call(cmd, "queue.unbind",
                        (self.vhost, x.queue, x.exchange, x.routing_key, dict(x.arguments), self.owner),
                        lambda _: m.QueueUnbindOk())

    def _queue_for(self, method: m.Method, name: str) -> Hashable | None:
        """The queue actor for `name`, after RabbitMQ's existence and exclusivity checks."""
        found = self.router.check_queue_access(self.vhost, name, self.owner)
        if isinstance(found, AmqpError):
            self._error(found, method)
            return None
        return self.place(self.vhost, found.name)

    def _queue_purge(self, cmd: Command) -> None:
        x = cmd.method
        queue = self._queue_for(x, x.queue)
        if queue is None:
            return

        def then(result: Reply) -> None:
            if not self._failed(result, x) and not x.nowait:
                self._send_method(m.QueuePurgeOk(message_count=result[1]))
        self._call(queue, "purge", (), then)

    # --- basic class: consumers
    def _basic_qos(self, cmd: Command) -> None:
        x = cmd.method
        if x.prefetch_size:
            # RabbitMQ refuses a byte-based prefetch the same way
            self._error(AmqpError(NOT_IMPLEMENTED, f"prefetch_size!=0 ({x.prefetch_size})", connection=True), x)
            return
        self.qos.set_qos(x.prefetch_count, x.global_)
        self._send_method(m.BasicQosOk())

    def _basic_consume(self, cmd: Command) -> None:
        x = cmd.method
        queue = self._queue_for(x, x.queue or "")
        if queue is None:
            return
        tag = x.consumer_tag or new_tag(self.rng, "amq.ctag-")
        if tag in self.consumers:
            self._error(AmqpError(NOT_ALLOWED, f"attempt to reuse consumer tag '{tag}'", connection=True), x)
            return
        ack_required = not x.no_ack
        self.qos.add(tag, queue, ack_required)
        grants = [g for g in self.qos.take_grants(True) if g[1] == tag]
        credit = grants[0][2] if grants else 0
        self.consumers[tag] = (queue, ack_required)
        self._touched.add(queue)

        def then(result: Reply) -> None:
            if result[0] != "ok":
                self.qos.remove(tag)
                self.consumers.pop(tag, None)
                self._failed(result, x)
                return
            if not x.nowait:
                self._send_method(m.BasicConsumeOk(consumer_tag=tag))
        self._call(queue, "consume", (tag, ack_required, credit, x.exclusive, dict(x.arguments)), then)

    def _basic_cancel(self, cmd: Command) -> None:
        x = cmd.method
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
        self._call(found[0], "cancel", (x.consumer_tag,), then)

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
        number, frame_max, write = self.number, self.frame_max, self._frames.extend
        dtag = self._delivery_tag
        for msg_id, redelivered, exchange, routing_key, header, body in messages:
            dtag += 1
            deliver = m.BasicDeliver(consumer_tag=tag, delivery_tag=dtag, redelivered=redelivered,
                                     exchange=exchange, routing_key=routing_key)
            write(content_frames(number, deliver, header, body, frame_max))
            if ack_required:
                self.unacked.add(dtag, Outstanding(queue, msg_id, tag))
        self._delivery_tag = dtag
        self.qos.delivered(tag, len(messages))

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
            got, remaining = result[1]
            if got is None:
                self._send_method(m.BasicGetEmpty())
                return
            msg_id, redelivered, exchange, routing_key, header, body = got
            self._delivery_tag += 1
            if ack_required:
                self.unacked.add(self._delivery_tag, Outstanding(queue, msg_id, None))
            ok = m.BasicGetOk(delivery_tag=self._delivery_tag, redelivered=redelivered, exchange=exchange,
                              routing_key=routing_key, message_count=remaining)
            self._frames.extend(content_frames(self.number, ok, header, body, self.frame_max))
        self._call(queue, "get", (ack_required,), then)

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
        for queue, msg_id, ctag in entries:
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
        exchange = self.router.exchange_for_publish(self.vhost, x.exchange)
        if isinstance(exchange, AmqpError):
            self._error(exchange, x)
            return
        names = self.router.route(self.vhost, x.exchange, x.routing_key, LazyHeaders(cmd.header))
        queues = [self.place(self.vhost, name) for name in names]
        if self.tx is not None:
            self.tx.append(("publish", queues, x, cmd.header, cmd.body))
            return
        self._route(queues, x, cmd.header, cmd.body, self.confirm)

    def _route(self, queues: list, x: m.BasicPublish, header: bytes, body: bytes,
               tracker: ConfirmTracker | None) -> None:
        if not queues and x.mandatory:
            ret = m.BasicReturn(reply_code=312, reply_text="NO_ROUTE", exchange=x.exchange,
                                routing_key=x.routing_key)
            self._frames.extend(content_frames(self.number, ret, header, body, self.frame_max))
        seq = tracker.publish(queues) if tracker is not None else 0
        record = (seq, x.exchange, x.routing_key, header, body)
        pub = self._pub
        for queue in queues:
            batch = pub.get(queue)
            if batch is None:
                pub[queue] = [record]
            else:
                batch.append(record)
        if tracker is not None:
            self._send_confirms()

    def _confirmed(self, queue: Hashable, upto: int) -> None:
        if self._commit is not None:
            self._commit[0].confirmed(queue, upto)
            self._finish_commit()
        elif self.confirm is not None:
            self.confirm.confirmed(queue, upto)
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
        self._reply(rid, ("ok", None))

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
