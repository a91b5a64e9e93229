"""A queue's consumers and the round-robin ring of those that can take a message now.

Theory of operation: a consumer can take a message while its credit > 0 (the channel grants credit;
one credit per message, for no-ack consumers too, as flow control). `_active` is a ring of exactly
the consumers with credit, in RabbitMQ's round-robin order: a new or newly re-credited consumer joins
at the back, and the consumer that just received a message goes to the back. `distribute` hands a
batch of messages out one at a time in that order and returns one list per consumer, so the queue
emits one Deliver per consumer per call.

Invariants: a consumer is in `_active` iff its credit > 0; `_active` has no duplicates.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any, Hashable

from actors.queue.message import Message

ConsumerKey = tuple[Hashable, str]


class Consumer:
    """One basic.consume on this queue; `credit` is how many more messages it may take now."""

    __slots__ = ("channel", "tag", "ack_required", "credit", "exclusive", "arguments")

    def __init__(self, channel: Hashable, tag: str, ack_required: bool, credit: int, exclusive: bool,
                 arguments: dict[str, Any]) -> None:
        self.channel = channel
        self.tag = tag
        self.ack_required = ack_required
        self.credit = credit
        self.exclusive = exclusive
        self.arguments = arguments


class Consumers:
    """All consumers by (channel, tag), and the ring of those with credit."""

    __slots__ = ("_all", "_active", "exclusive")

    def __init__(self) -> None:
        self._all: dict[ConsumerKey, Consumer] = {}
        self._active: deque[Consumer] = deque()
        self.exclusive: Consumer | None = None

    def __len__(self) -> int:
        return len(self._all)

    def __iter__(self) -> Iterator[Consumer]:
        # A snapshot, so callers may remove consumers while iterating.
        return iter(list(self._all.values()))

    def get(self, channel: Hashable, tag: str) -> Consumer | None:
        return self._all.get((channel, tag))

    def add(self, consumer: Consumer) -> None:
        self._all[(consumer.channel, consumer.tag)] = consumer
        if consumer.exclusive:
            self.exclusive = consumer
        if consumer.credit > 0:
            self._active.append(consumer)

    def remove(self, consumer: Consumer) -> None:
        del self._all[(consumer.channel, consumer.tag)]
        if consumer is self.exclusive:
            self.exclusive = None
        if consumer.credit > 0:
            self._active.remove(consumer)

    def on_channel(self, channel: Hashable) -> list[Consumer]:
        return [c for c in self._all.values() if c.channel == channel]

    def grant(self, consumer: Consumer, credit: int) -> None:
        if consumer.credit <= 0 < consumer.credit + credit:
            self._active.append(consumer)
        consumer.credit += credit

    def clear(self) -> None:
        self._all.clear()
        self._active.clear()
        self.exclusive = None

    def credit_total(self) -> int:
        """How many messages the consumers could take right now."""
        return sum(c.credit for c in self._active)

    def distribute(self, messages: list[Message]) -> list[tuple[Consumer, list[Message]]]:
        """Hand `messages` out round-robin, spending one credit each.

        `len(messages)` must not exceed `credit_total()`. Returns (consumer, its messages) in order
        of each consumer's first message.
        """
        active = self._active
        if len(active) == 1:
            # The common case: one consumer takes the whole batch, no per-message rotation.
            consumer = active[0]
            consumer.credit -= len(messages)
            assert consumer.credit >= 0, "distributed beyond credit"
            if consumer.credit == 0:
                active.popleft()
            return [(consumer, messages)]
        batches: dict[Consumer, list[Message]] = {}
        popleft, append = active.popleft, active.append
        for message in messages:
            consumer = popleft()
            batch = batches.get(consumer)
            if batch is None:
                batches[consumer] = batch = []
            batch.append(message)
            consumer.credit -= 1
            if consumer.credit:
                append(consumer)
        return list(batches.items())
