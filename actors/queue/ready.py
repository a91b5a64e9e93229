"""The ready list: messages waiting for a consumer, always taken in msg_id order.

Theory of operation: new messages get increasing msg_ids, so they go on the back of a deque. A
requeued message must go back to its ORIGINAL position (RabbitMQ classic queues do this). Every
message that was ever delivered was taken from the front, so its id is lower than every id still in
the deque, and stays lower, since the deque only grows at the back. Requeued messages therefore live
in a small min-heap that is drained before the deque: the heap front is always the lowest ready id.

Invariants: every id in `_requeued` < every id in `_fresh`; `_fresh` is sorted; no id appears twice;
`_bytes` is the sum of `size_bytes` over all held messages.

Left out: paging to disk (the next issue replaces this class with a store-backed one of the same
interface), priorities.
"""
from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable

from actors.queue.message import BODY, HEADER, MSG_ID, Message, requeued


class ReadyList:
    """Ready messages in msg_id order: a deque of fresh ones behind a heap of requeued ones."""

    __slots__ = ("_fresh", "_requeued", "_bytes")

    def __init__(self) -> None:
        self._fresh: deque[Message] = deque()
        self._requeued: list[Message] = []
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._fresh) + len(self._requeued)

    @property
    def bytes(self) -> int:
        """Payload bytes held (header + body of every ready message)."""
        return self._bytes

    def extend(self, messages: list[Message], nbytes: int) -> None:
        """Append fresh messages (ids above everything held, ascending) weighing `nbytes` in total."""
        self._fresh.extend(messages)
        self._bytes += nbytes

    def requeue(self, messages: Iterable[Message]) -> None:
        """Put previously delivered messages back at their original positions, flagged redelivered."""
        heap = self._requeued
        fresh_front = self._fresh[0][MSG_ID] if self._fresh else None
        for message in messages:
            assert fresh_front is None or message[MSG_ID] < fresh_front, "requeue above fresh ids"
            heapq.heappush(heap, requeued(message))
            self._bytes += len(message[HEADER]) + len(message[BODY])

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
        self._bytes -= sum([len(m[HEADER]) + len(m[BODY]) for m in out])
        return out

    def clear(self) -> int:
        """Drop every ready message; return how many there were."""
        n = len(self)
        self._fresh.clear()
        self._requeued.clear()
        self._bytes = 0
        return n
