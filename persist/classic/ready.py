"""The ready list: messages waiting for a consumer, always taken in msg_id order.

Theory of operation: new messages get increasing msg_ids, so they go on the back of a deque. A
requeued message must go back to its ORIGINAL position (RabbitMQ classic queues do this). Every
message that was ever delivered was taken from the front, so its id is lower than every id still in
the deque, and stays lower, since the deque only grows at the back. Requeued messages therefore live
in a small min-heap that is drained before the deque: the heap front is always the lowest ready id.

Invariants: every id in `_requeued` < every id in `_fresh`; `_fresh` is sorted; no id appears twice;
`_body_bytes` is the sum of the body lengths of all held messages (what x-max-length-bytes limits).
Header bytes are not tracked on the hot path; `bytes` (for stats only) adds them up on demand.

Durable queues use `backed.BackedReady`, the same interface over a paged, on-disk store; this one
holds everything in RAM. Priorities are `priority.PriorityReady`, one of these per priority.
"""
from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Protocol

from persist.classic.message import BODY, HEADER, MSG_ID, Message, requeued


class Ready(Protocol):
    """The ready-list interface the queue core uses; `ReadyList` below, `priority.PriorityReady`,
    `backed.BackedReady` and `spill.SpillReady` give it."""

    def __len__(self) -> int: ...

    @property
    def bytes(self) -> int: ...

    @property
    def body_bytes(self) -> int: ...

    def attach_expiry(self, expiry: dict[int, int]) -> None: ...

    def head_id(self) -> int: ...

    def extend(self, messages: list[Message], body_bytes: int) -> None: ...

    def pass_on(self, messages: list[Message], body_bytes: int) -> list[Message]: ...

    def requeue(self, messages: Iterable[Message]) -> None: ...

    def take(self, n: int) -> list[Message]: ...

    def forget(self, msg_ids: Sequence[int]) -> None: ...

    def clear(self) -> int: ...


class ReadyList:
    """Ready messages in msg_id order: a deque of fresh ones behind a heap of requeued ones."""

    __slots__ = ("_fresh", "_requeued", "_body_bytes")

    def __init__(self) -> None:
        self._fresh: deque[Message] = deque()
        self._requeued: list[Message] = []
        self._body_bytes = 0

    def __len__(self) -> int:
        return len(self._fresh) + len(self._requeued)

    @property
    def bytes(self) -> int:
        """Payload bytes held (header + body of every ready message); O(n), for stats."""
        return self._body_bytes + sum([len(m[HEADER]) for m in self._requeued]) \
            + sum([len(m[HEADER]) for m in self._fresh])

    @property
    def body_bytes(self) -> int:
        """Body bytes held: what RabbitMQ's message_bytes_ready and x-max-length-bytes count."""
        return self._body_bytes

    def attach_expiry(self, expiry: dict[int, int]) -> None:
        """The core's msg_id -> expires-at map: nothing to do, everything held is in RAM and the
        core stamped it (`backed.BackedReady` fills it from disk)."""

    def head_id(self) -> int:
        """The msg_id `take(1)` would return; the list must not be empty."""
        return (self._requeued[0] if self._requeued else self._fresh[0])[MSG_ID]

    def extend(self, messages: list[Message], body_bytes: int) -> None:
        """Append fresh messages (ids above everything held, ascending) with `body_bytes` of bodies."""
        self._fresh.extend(messages)
        self._body_bytes += body_bytes

    def pass_on(self, messages: list[Message], body_bytes: int) -> list[Message]:
        """`extend` then `take` of them all, for an empty list whose consumers take them at once:
        nothing to hold."""
        return messages

    def requeue(self, messages: Iterable[Message]) -> None:
        """Put previously delivered messages back at their original positions, flagged redelivered."""
        heap = self._requeued
        fresh_front = self._fresh[0][MSG_ID] if self._fresh else None
        for message in messages:
            assert fresh_front is None or message[MSG_ID] < fresh_front, "requeue above fresh ids"
            heapq.heappush(heap, requeued(message))
            self._body_bytes += len(message[BODY])

    def take(self, n: int) -> list[Message]:
        """Remove and return up to `n` messages from the front, lowest msg_id first."""
        out: list[Message] = []
        heap = self._requeued
        while heap and len(out) < n:
            out.append(heapq.heappop(heap))
        fresh = self._fresh
        k = min(n - len(out), len(fresh))
        if k == len(fresh):
            out.extend(fresh)
            fresh.clear()
        else:
            popleft = fresh.popleft
            out.extend([popleft() for _ in range(k)])
        self._body_bytes -= sum([len(m[BODY]) for m in out])
        return out

    def forget(self, msg_ids: Sequence[int]) -> None:
        """Messages taken earlier left the queue for good: nothing to release in RAM."""

    def clear(self) -> int:
        """Drop every ready message; return how many there were."""
        n = len(self)
        self._fresh.clear()
        self._requeued.clear()
        self._body_bytes = 0
        return n
