"""Publisher-confirm bookkeeping for one channel.

Theory of operation: in confirm mode every publish gets the next sequence number (from 1). A message
is confirmed when every queue it was routed to has confirmed it; a message routed to no queue is
confirmed at once (after any basic.return, which the channel emits first). Queues confirm by range:
a queue's link is FIFO, so "confirmed up to seq N" covers every seq <= N that was sent to it.

Coalescing follows RabbitMQ: of the seqs newly confirmed in one flush, those below the lowest seq still
outstanding go out as ONE basic.ack with multiple=true (for the highest of them, or multiple=false when
it is a single one), the rest one by one. Nacks (a queue that refused or vanished abnormally) are never
coalesced and go out before the acks of the same flush, so a multiple ack never covers an unsent nack.

Invariants: a seq is reported exactly once (ack or nack); `pending` holds exactly the seqs not yet
reported; the per-queue deques hold seqs in increasing order.
"""
from __future__ import annotations

from collections import deque
from typing import Hashable, Iterable


class ConfirmTracker:
    def __init__(self, next_seq: int = 1) -> None:
        """`next_seq`: where a channel that moved from another host goes on from (handover.py)."""
        self.next_seq = next_seq
        self._first_seq = next_seq  # what this tracker settled is counted from here
        self._waiting: dict[int, int] = {}          # seq -> number of queues still to confirm
        self._nacked: set[int] = set()              # seqs with a refusal, reported as nack when settled
        self._per_queue: dict[Hashable, deque[int]] = {}
        self._ready_acks: list[int] = []
        self._ready_nacks: list[int] = []

    def __len__(self) -> int:
        return len(self._waiting)

    def settled_count(self) -> int:
        """Publishes confirmed or nacked to the client so far (the management `confirm` count)."""
        return self.next_seq - self._first_seq - len(self._waiting) - len(self._ready_acks) - len(self._ready_nacks)

    def idle(self) -> bool:
        """Whether every publish so far has been reported to the client."""
        return not (self._waiting or self._ready_acks or self._ready_nacks)

    def publish(self, queues: Iterable[Hashable]) -> int:
        """Record a publish routed to `queues`; returns its sequence number."""
        seq = self.next_seq
        self.next_seq += 1
        n = 0
        for q in queues:
            self._per_queue.setdefault(q, deque()).append(seq)
            n += 1
        if n:
            self._waiting[seq] = n
        else:
            self._ready_acks.append(seq)
        return seq

    def confirmed(self, queue: Hashable, upto: int) -> None:
        """`queue` has every seq <= `upto` that was sent to it."""
        seqs = self._per_queue.get(queue)
        while seqs and seqs[0] <= upto:
            self._settle_one(seqs.popleft(), refused=False)

    def refused(self, queue: Hashable, seqs: Iterable[int]) -> None:
        """`queue` refused these seqs (overflow reject-publish); each is nacked once settled."""
        wanted = set(seqs)
        mine = self._per_queue.get(queue)
        if not mine:
            return
        kept: deque[int] = deque()
        for seq in mine:
            if seq in wanted:
                self._settle_one(seq, refused=True)
            else:
                kept.append(seq)
        self._per_queue[queue] = kept

    def queues(self) -> list[Hashable]:
        """Queues that still owe confirms."""
        return [q for q, seqs in self._per_queue.items() if seqs]

    def queue_gone(self, queue: Hashable, *, abnormal: bool) -> None:
        """A queue was deleted (its pending seqs count as confirmed) or crashed (they are nacked)."""
        for seq in self._per_queue.pop(queue, ()):
            self._settle_one(seq, refused=abnormal)

    def _settle_one(self, seq: int, *, refused: bool) -> None:
        if refused:
            self._nacked.add(seq)
        left = self._waiting[seq] - 1
        if left:
            self._waiting[seq] = left
            return
        del self._waiting[seq]
        if seq in self._nacked:
            self._nacked.discard(seq)
            self._ready_nacks.append(seq)
        else:
            self._ready_acks.append(seq)

    def take(self) -> list[tuple[bool, int, bool]]:
        """The confirms to send now, as (ack?, delivery_tag, multiple) in sending order."""
        if not self._ready_acks and not self._ready_nacks:
            return []  # most flushes: every one of a channel's, between its queues' confirms
        out: list[tuple[bool, int, bool]] = [(False, s, False) for s in sorted(self._ready_nacks)]
        acks = sorted(self._ready_acks)
        self._ready_acks.clear()
        if acks and not self._ready_nacks:
            low = min(self._waiting) if self._waiting else self.next_seq
            below = [s for s in acks if s < low]
            if len(below) > 1:
                out.append((True, below[-1], True))
                acks = acks[len(below):]
        self._ready_nacks.clear()
        out.extend((True, s, False) for s in acks)
        return out
