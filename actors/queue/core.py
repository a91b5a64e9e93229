"""The classic queue core (in memory): a pure state machine with RabbitMQ's delivery semantics.

Theory of operation: channels publish batches of messages; the queue numbers each with its own
increasing msg_id and keeps it in the ready list (`ready.py`) until a consumer with credit or a
basic.get takes it. Ready messages leave in msg_id order; a requeued message returns to its original
position and is flagged redelivered. Consumers are credit-based (`consumers.py`): the queue delivers
to a consumer only while it has credit, round-robin, one Deliver per consumer per call. A message
delivered with ack_required stays "unacknowledged", filed under the channel that holds it, until that
channel settles it (ack / requeue / discard) or goes down (requeue). No-ack deliveries leave at once.

Effect order within one call: Deliver effects first (one per consumer, in order of each consumer's
first message), then Confirmed (one per publish call), then ConsumerCancelled / AutoDelete. Messages
are confirmed as soon as they are enqueued, since this queue keeps nothing on disk; the store-backed
queue will confirm only after the fsync that covers them.

Invariants: every message is in exactly one of ready, unacked (under one channel) or gone; when
messages are ready, no consumer has credit, because delivery always runs until one side is exhausted
(asserted in `_deliver`). The property tests check both against a list model after every step.

Left out: dead-lettering (see `_dead_letter`), x-max-length / TTL / priorities, consumer priorities,
persistence and paging.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Hashable

from actors.queue.consumers import Consumer, Consumers
from actors.queue.effects import AutoDelete, Confirmed, ConsumerCancelled, Deliver, QueueEffect
from actors.queue.message import BODY, HEADER, MSG_ID, Message, size_bytes
from actors.queue.ready import ReadyList
from wire.errors import ACCESS_REFUSED, NOT_ALLOWED, PRECONDITION_FAILED, AmqpError

Published = tuple[int, str, str, bytes, bytes]  # (confirm seq or 0, exchange, routing_key, header, body)


class ClassicQueue:
    """One classic queue's messages, consumers and unacknowledged deliveries."""

    def __init__(self, vhost: str, name: str, *, auto_delete: bool = False,
                 arguments: dict[str, Any] | None = None) -> None:
        self.vhost = vhost
        self.name = name
        self.auto_delete = auto_delete
        self.arguments = dict(arguments or {})
        self._next_id = 1
        self._ready = ReadyList()
        self._consumers = Consumers()
        self._unacked: dict[Hashable, dict[int, Message]] = {}  # channel -> msg_id -> message
        self._unacked_count = 0
        self._unacked_bytes = 0
        self._had_consumers = False

    # -- counts ---------------------------------------------------------------------------------

    @property
    def message_count(self) -> int:
        """Ready messages: what queue.declare-ok / delete-ok / basic.get-ok report (as RabbitMQ)."""
        return len(self._ready)

    @property
    def messages_ready(self) -> int:
        return len(self._ready)

    @property
    def messages_unacknowledged(self) -> int:
        return self._unacked_count

    @property
    def consumer_count(self) -> int:
        return len(self._consumers)

    def stats(self) -> dict[str, Any]:
        """Management-style counters; `messages` is ready + unacknowledged, as RabbitMQ reports."""
        return {
            "name": self.name,
            "vhost": self.vhost,
            "messages": len(self._ready) + self._unacked_count,
            "messages_ready": len(self._ready),
            "messages_unacknowledged": self._unacked_count,
            "consumers": len(self._consumers),
            "memory": self._ready.bytes + self._unacked_bytes,
        }

    # -- publishing -----------------------------------------------------------------------------

    def publish(self, channel: Hashable, messages: Sequence[Published]) -> list[QueueEffect]:
        """Enqueue `messages` in order, deliver what consumer credit allows, then confirm."""
        msg_id = self._next_id
        batch: list[Message] = []
        append = batch.append
        nbytes = 0
        upto = 0
        for seq, exchange, routing_key, header, body in messages:
            append((msg_id, False, exchange, routing_key, header, body))
            msg_id += 1
            nbytes += len(header) + len(body)
            if seq > upto:
                upto = seq
        self._next_id = msg_id
        self._ready.extend(batch, nbytes)
        effects = self._deliver()
        if upto:
            effects.append(Confirmed(channel, upto))
        return effects

    # -- consumers ------------------------------------------------------------------------------

    def consume(self, channel: Hashable, consumer_tag: str, *, ack_required: bool, credit: int,
                exclusive: bool = False, arguments: dict[str, Any] | None = None,
                ) -> list[QueueEffect] | AmqpError:
        """Add a consumer with `credit` and deliver to it at once what it can take."""
        consumers = self._consumers
        if consumers.exclusive is not None or (exclusive and len(consumers)):
            return AmqpError(ACCESS_REFUSED, f"queue '{self.name}' in vhost '{self.vhost}' in exclusive use")
        if consumers.get(channel, consumer_tag) is not None:
            return AmqpError(NOT_ALLOWED, f"attempt to reuse consumer tag '{consumer_tag}'")
        consumers.add(Consumer(channel, consumer_tag, ack_required, credit, exclusive, dict(arguments or {})))
        self._had_consumers = True
        return self._deliver()

    def cancel(self, channel: Hashable, consumer_tag: str) -> list[QueueEffect]:
        """Remove a consumer; its unacknowledged messages stay with its channel."""
        consumer = self._consumers.get(channel, consumer_tag)
        if consumer is None:
            return []
        self._consumers.remove(consumer)
        return self._auto_delete_check()

    def grant(self, channel: Hashable, consumer_tag: str, credit: int) -> list[QueueEffect]:
        """Add `credit` to a consumer and deliver what it allows."""
        consumer = self._consumers.get(channel, consumer_tag)
        if consumer is None or credit <= 0:
            return []
        self._consumers.grant(consumer, credit)
        return self._deliver()

    def get(self, channel: Hashable, *, ack_required: bool) -> tuple[Message | None, int]:
        """basic.get: the next ready message (or None) and how many stay ready after it."""
        taken = self._ready.take(1)
        if not taken:
            return None, 0
        message = taken[0]
        if ack_required:
            self._hold(channel, taken)
        return message, len(self._ready)

    # -- settling -------------------------------------------------------------------------------

    def settle(self, channel: Hashable, *, acked: Sequence[int] = (), requeued: Sequence[int] = (),
               discarded: Sequence[int] = ()) -> list[QueueEffect]:
        """Settle msg_ids that `channel` holds; ids it does not hold are ignored."""
        held = self._unacked.get(channel)
        if held is None:
            return []
        pop = held.pop
        gone_bytes = 0
        acked_count = 0
        for msg_id in acked:
            message = pop(msg_id, None)
            if message is not None:
                acked_count += 1
                gone_bytes += len(message[HEADER]) + len(message[BODY])
        dropped = [m for msg_id in discarded if (m := pop(msg_id, None)) is not None]
        back = [m for msg_id in requeued if (m := pop(msg_id, None)) is not None]
        gone_bytes += sum([size_bytes(m) for m in dropped]) + sum([size_bytes(m) for m in back])
        self._unacked_count -= acked_count + len(dropped) + len(back)
        self._unacked_bytes -= gone_bytes
        if not held:
            del self._unacked[channel]
        effects = self._dead_letter(dropped, "rejected")
        if back:
            self._ready.requeue(back)
            effects = self._deliver() + effects
        return effects

    def channel_down(self, channel: Hashable) -> list[QueueEffect]:
        """The channel closed: drop its consumers and requeue everything it held (redelivered)."""
        lost = self._consumers.on_channel(channel)
        for consumer in lost:
            self._consumers.remove(consumer)
        held = self._unacked.pop(channel, None)
        effects: list[QueueEffect] = []
        if held:
            self._unacked_count -= len(held)
            self._unacked_bytes -= sum([size_bytes(m) for m in held.values()])
            self._ready.requeue(held.values())
            effects = self._deliver()
        if lost:
            effects.extend(self._auto_delete_check())
        return effects

    # -- queue-level operations -----------------------------------------------------------------

    def purge(self) -> int:
        """queue.purge: drop every READY message (unacknowledged ones stay); return how many."""
        return self._ready.clear()

    def delete(self, *, if_unused: bool, if_empty: bool) -> tuple[int, list[QueueEffect]] | AmqpError:
        """queue.delete: check the conditions (not-empty first, as RabbitMQ), then drop everything.

        "Empty" means no READY messages, as in RabbitMQ: unacknowledged ones do not count.
        Returns the ready count (delete-ok's message-count) and a ConsumerCancelled per consumer.
        """
        where = f"queue '{self.name}' in vhost '{self.vhost}'"
        if if_empty and len(self._ready):
            return AmqpError(PRECONDITION_FAILED, f"{where} not empty")
        if if_unused and len(self._consumers):
            return AmqpError(PRECONDITION_FAILED, f"{where} in use")
        effects: list[QueueEffect] = [ConsumerCancelled(c.channel, c.tag) for c in self._consumers]
        self._consumers.clear()
        self._unacked.clear()
        self._unacked_count = 0
        self._unacked_bytes = 0
        return self._ready.clear(), effects

    # -- internals ------------------------------------------------------------------------------

    def _deliver(self) -> list[QueueEffect]:
        """Deliver ready messages while any consumer has credit: one Deliver per consumer."""
        ready = self._ready
        if not ready:
            return []
        credit = self._consumers.credit_total()
        if not credit:
            return []
        effects: list[QueueEffect] = []
        for consumer, messages in self._consumers.distribute(ready.take(credit)):
            if consumer.ack_required:
                self._hold(consumer.channel, messages)
            effects.append(Deliver(consumer.channel, consumer.tag, messages))
        assert not ready or not self._consumers.credit_total(), "delivery stopped with credit left"
        return effects

    def _hold(self, channel: Hashable, messages: list[Message]) -> None:
        """File delivered messages as unacknowledged under the channel that holds them."""
        held = self._unacked.get(channel)
        if held is None:
            self._unacked[channel] = held = {}
        held.update([(m[MSG_ID], m) for m in messages])
        self._unacked_count += len(messages)
        self._unacked_bytes += sum([len(m[HEADER]) + len(m[BODY]) for m in messages])

    def _dead_letter(self, messages: list[Message], reason: str) -> list[QueueEffect]:
        """Hook for dead-lettering rejected/expired messages; until x-dead-letter-exchange lands
        (a later issue), they are simply dropped and nothing is emitted."""
        return []

    def _auto_delete_check(self) -> list[QueueEffect]:
        if self.auto_delete and self._had_consumers and not self._consumers:
            return [AutoDelete()]
        return []
