"""A queue's consumers and the round-robin rings of those that can take a message now.

Theory of operation: a consumer can take a message while its credit > 0 (the channel grants credit;
one credit per message, for no-ack consumers too, as flow control). Consumers with credit wait in a
ring per consumer priority (the `x-priority` consumer argument, default 0), in RabbitMQ's
round-robin order: a new or newly re-credited consumer joins the back of its ring, and the consumer
that just received a message goes to the back. `distribute` hands a batch out one message at a time,
always from the highest-priority ring that is not empty (RabbitMQ: lower-priority consumers get
messages only while every higher one is blocked), and returns one list per consumer, so the queue
emits one Deliver per consumer per call.

Single active consumer (`x-single-active-consumer`): only the active consumer - the earliest
registered one still present - may be in a ring; the others keep their credit and wait. When the
active one leaves, the next in registration order becomes active (RabbitMQ 3.10 classic queues
ignore consumer priority for this choice).

Invariants: a consumer is in a ring iff its credit > 0 and it is eligible (not SAC, or the active
one); it is in the ring of its own priority; no ring holds a consumer twice; `_levels` lists the
priorities that have a ring, highest first.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any, Hashable

from persist.classic.message import Message

ConsumerKey = tuple[Hashable, str]


class Consumer:
    """One basic.consume on this queue; `credit` is how many more messages it may take now."""

    __slots__ = ("channel", "tag", "ack_required", "credit", "exclusive", "arguments", "priority")

    def __init__(self, channel: Hashable, tag: str, ack_required: bool, credit: int, exclusive: bool,
                 arguments: dict[str, Any]) -> None:
        self.channel = channel
        self.tag = tag
        self.ack_required = ack_required
        self.credit = credit
        self.exclusive = exclusive
        self.arguments = arguments
        level = arguments.get("x-priority", 0)
        self.priority = level if isinstance(level, int) and not isinstance(level, bool) else 0


class Consumers:
    """All consumers by (channel, tag), in registration order, and the rings of those with credit."""

    __slots__ = ("_all", "_rings", "_levels", "exclusive", "single_active", "active")

    def __init__(self, *, single_active: bool = False) -> None:
        self._all: dict[ConsumerKey, Consumer] = {}
        self._rings: dict[int, deque[Consumer]] = {}
        self._levels: list[int] = []
        self.exclusive: Consumer | None = None
        self.single_active = single_active
        self.active: Consumer | None = None  # the single active consumer, when single_active

    def __len__(self) -> int:
        return len(self._all)

    def __iter__(self) -> Iterator[Consumer]:
        # A snapshot, so callers may remove consumers while iterating.
        return iter(list(self._all.values()))

    def get(self, channel: Hashable, tag: str) -> Consumer | None:
        return self._all.get((channel, tag))

    def _eligible(self, consumer: Consumer) -> bool:
        return not self.single_active or consumer is self.active

    def _join(self, consumer: Consumer) -> None:
        ring = self._rings.get(consumer.priority)
        if ring is None:
            self._rings[consumer.priority] = ring = deque()
            self._levels = sorted(self._rings, reverse=True)
        ring.append(consumer)

    def add(self, consumer: Consumer) -> None:
        self._all[(consumer.channel, consumer.tag)] = consumer
        if consumer.exclusive:
            self.exclusive = consumer
        if self.single_active and self.active is None:
            self.active = consumer
        if consumer.credit > 0 and self._eligible(consumer):
            self._join(consumer)

    def remove(self, consumer: Consumer) -> None:
        del self._all[(consumer.channel, consumer.tag)]
        if consumer is self.exclusive:
            self.exclusive = None
        if consumer.credit > 0 and self._eligible(consumer):
            self._rings[consumer.priority].remove(consumer)
        if consumer is self.active:
            self.active = next(iter(self._all.values()), None)
            if self.active is not None and self.active.credit > 0:
                self._join(self.active)

    def on_channel(self, channel: Hashable) -> list[Consumer]:
        return [c for c in self._all.values() if c.channel == channel]

    def grant(self, consumer: Consumer, credit: int) -> None:
        if consumer.credit <= 0 < consumer.credit + credit and self._eligible(consumer):
            self._join(consumer)
        consumer.credit += credit

    def clear(self) -> None:
        self._all.clear()
        self._rings.clear()
        self._levels = []
        self.exclusive = None
        self.active = None

    def credit_total(self) -> int:
        """How many messages the consumers could take right now."""
        return sum([c.credit for ring in self._rings.values() for c in ring])

    def distribute(self, messages: list[Message]) -> list[tuple[Consumer, list[Message]]]:
        """Hand `messages` out by priority, round-robin within one, spending one credit each.

        `len(messages)` must not exceed `credit_total()`. Returns (consumer, its messages) in order
        of each consumer's first message.
        """
        rings = self._rings
        if len(rings) == 1:
            active = rings[self._levels[0]]
            if len(active) == 1:
                # The common case: one consumer takes the whole batch, no per-message rotation.
                consumer = active[0]
                consumer.credit -= len(messages)
                assert consumer.credit >= 0, "distributed beyond credit"
                if consumer.credit == 0:
                    active.popleft()
                return [(consumer, messages)]
        batches: dict[Consumer, list[Message]] = {}
        levels = iter(self._levels)
        active = rings[next(levels)]
        for message in messages:
            while not active:
                active = rings[next(levels)]
            consumer = active.popleft()
            batch = batches.get(consumer)
            if batch is None:
                batches[consumer] = batch = []
            batch.append(message)
            consumer.credit -= 1
            if consumer.credit:
                active.append(consumer)
        return list(batches.items())
