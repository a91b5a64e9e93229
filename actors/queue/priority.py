"""The ready list of a priority queue (x-max-priority): one `ReadyList` per priority level.

Theory of operation: as RabbitMQ's rabbit_priority_queue, a message's priority property picks its
level (absent = 0, above x-max-priority counts as the maximum) and messages leave the highest
non-empty level first, FIFO within a level. A requeued message goes back to its ORIGINAL position
within its level: each level is a `ReadyList`, which already keeps requeued messages in msg_id
order ahead of fresh ones. The level is read again from the raw header on requeue (a byte test and a
few skips), so nothing per message is stored beside the message tuple.

Invariants: `_levels` is indexed by priority 0..max; the totals are the sums over the levels; every
message sits in the level its header names (capped at max).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from actors.queue.message import BODY, HEADER, Message
from actors.queue.properties import priority
from actors.queue.ready import ReadyList


class PriorityReady:
    """Ready messages by priority, highest first; the same interface as `ReadyList`."""

    __slots__ = ("max_priority", "_levels")

    def __init__(self, max_priority: int) -> None:
        assert 1 <= max_priority <= 255, max_priority
        self.max_priority = max_priority
        self._levels = [ReadyList() for _ in range(max_priority + 1)]

    def _level(self, message: Message) -> ReadyList:
        return self._levels[min(priority(message[HEADER]), self.max_priority)]

    def __len__(self) -> int:
        return sum([len(level) for level in self._levels])

    @property
    def bytes(self) -> int:
        return sum([level.bytes for level in self._levels])

    @property
    def body_bytes(self) -> int:
        return sum([level.body_bytes for level in self._levels])

    def attach_expiry(self, expiry: dict[int, int]) -> None:
        """The core's msg_id -> expires-at map, shared with every level."""
        for level in self._levels:
            level.attach_expiry(expiry)

    def head_id(self) -> int:
        for level in reversed(self._levels):
            if level:
                return level.head_id()
        raise IndexError("head of an empty ready list")

    def forget(self, msg_ids: Sequence[int]) -> None:
        """Messages taken earlier left the queue for good: nothing to release in RAM."""

    def extend(self, messages: list[Message], body_bytes: int) -> None:
        for message in messages:
            self._level(message).extend([message], len(message[BODY]))

    def requeue(self, messages: Iterable[Message]) -> None:
        for message in messages:
            self._level(message).requeue([message])

    def take(self, n: int) -> list[Message]:
        out: list[Message] = []
        for level in reversed(self._levels):
            if len(out) >= n:
                break
            if level:
                out.extend(level.take(n - len(out)))
        return out

    def clear(self) -> int:
        return sum([level.clear() for level in self._levels])
