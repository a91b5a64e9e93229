"""The ready list of a priority queue (x-max-priority): one ready list per priority level.

Theory of operation: as RabbitMQ's rabbit_priority_queue, a message's priority property picks its
level (absent = 0, above x-max-priority counts as the maximum) and messages leave the highest
non-empty level first, FIFO within a level. Each level is a ready list of its own, handed in by the
shell: a `ReadyList` (RAM), a `BackedReady` (a durable queue: one `DurableBacking`, with its own
index directory, per level) or a `SpillReady` (a non-durable queue that pages). The queue numbers
messages across all levels, so each level sees an increasing subsequence of msg_ids, which is all a
level needs. A requeued message goes back to its ORIGINAL position within its level: the level
keeps requeued messages in msg_id order ahead of fresh ones, and the level is read again from the
raw header (a byte test and a few skips), which names the level the message came from.

`forget(ids)` gets only msg_ids, and a backed level must hear of exactly the messages it handed
out, so when any level is backed, `take` remembers each taken message's level until it is
forgotten (that map holds what consumers hold unacked: bounded by their prefetch). With RAM levels
only, forget releases nothing and nothing is remembered.

Invariants: `_levels` is indexed by priority 0..max; the totals are the sums over the levels; every
ready message sits in the level its header names (capped at max); every taken message that is not
yet forgotten or requeued is in `_taken` (when tracking) under the level it came from.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

from persist.classic.message import BODY, HEADER, MSG_ID, Message
from actors.queue.properties import priority
from persist.classic.ready import Ready, ReadyList

T = TypeVar("T")


class PriorityReady:
    """Ready messages by priority, highest first; the same interface as `ReadyList`."""

    __slots__ = ("max_priority", "_levels", "_taken")

    def __init__(self, max_priority: int, levels: Sequence[Ready] | None = None) -> None:
        """`levels[p]` holds priority p's messages; RAM `ReadyList`s when not given."""
        assert 1 <= max_priority <= 255, max_priority
        self.max_priority = max_priority
        self._levels: list[Ready] = (list(levels) if levels is not None
                                     else [ReadyList() for _ in range(max_priority + 1)])
        assert len(self._levels) == max_priority + 1, (len(self._levels), max_priority)
        backed = any(type(level) is not ReadyList for level in self._levels)
        self._taken: dict[int, Ready] | None = {} if backed else None

    @property
    def levels(self) -> list[Ready]:
        return self._levels

    def _level(self, message: Message) -> Ready:
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
        """The core's msg_id -> expires-at map, shared with every level (backed levels keep it on disk)."""
        for level in self._levels:
            level.attach_expiry(expiry)

    def head_id(self) -> int:
        for level in reversed(self._levels):
            if level:
                return level.head_id()
        raise IndexError("head of an empty ready list")

    def forget(self, msg_ids: Sequence[int]) -> None:
        """Taken messages left the queue for good: each level that handed one out hears of it."""
        taken = self._taken
        if taken is None or not msg_ids:
            return
        for level, ids in _grouped([(taken.pop(msg_id), msg_id) for msg_id in msg_ids]):
            level.forget(ids)

    def extend(self, messages: list[Message], body_bytes: int) -> None:
        if len(messages) == 1:
            self._level(messages[0]).extend(messages, body_bytes)
            return
        # one extend per level, in msg_id order within each level
        for level, run in _grouped([(self._level(m), m) for m in messages]):
            level.extend(run, sum([len(m[BODY]) for m in run]))

    def pass_on(self, messages: list[Message], body_bytes: int) -> list[Message]:
        self.extend(messages, body_bytes)  # handed out highest priority first, as `take` does
        return self.take(len(messages))

    def requeue(self, messages: Iterable[Message]) -> None:
        messages = list(messages)
        taken = self._taken
        if taken is not None:
            for message in messages:
                del taken[message[MSG_ID]]
        for level, run in _grouped([(self._level(m), m) for m in messages]):
            level.requeue(run)

    def take(self, n: int) -> list[Message]:
        out: list[Message] = []
        taken = self._taken
        for level in reversed(self._levels):
            if len(out) >= n:
                break
            if level:
                got = level.take(n - len(out))
                if taken is not None:
                    for message in got:
                        taken[message[MSG_ID]] = level
                out.extend(got)
        return out

    def clear(self) -> int:
        return sum([level.clear() for level in self._levels])


def _grouped(pairs: list[tuple[Ready, T]]) -> list[tuple[Ready, list[T]]]:
    """The items of `pairs` grouped by their level, in their order within each group."""
    groups: dict[int, tuple[Ready, list[T]]] = {}
    for level, item in pairs:
        group = groups.get(id(level))
        if group is None:
            groups[id(level)] = (level, [item])
        else:
            group[1].append(item)
    return list(groups.values())
