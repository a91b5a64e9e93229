"""The variable queue: a queue's ready messages split between RAM and disk, in FIFO order.

Theory of operation (RabbitMQ's rabbit_variable_queue, simplified): every ready message is an
`Entry` in one of these states
  alpha  body and index entry in RAM (`entry.message` set)
  beta   index entry in RAM, body on disk (in the queue index or a message store)
  delta  nothing in RAM: only counted, its index entry and body are on disk
(RabbitMQ's gamma, a beta whose index entry is also on disk, is not told apart: every beta here has
its index record written, persistent messages at their group commit or when paged out first,
transient ones when paged out.)
They are kept in sub-queues whose concatenation is the ready list, lowest seq first:

    requeued (heap, alphas) ++ Q4 (alphas) ++ Q3 (betas) ++ Delta (seq range + count) ++ Q2 (betas)
      ++ Q1 (alphas)

Invariants: Delta empty => Q2 empty (Q1 then follows Q3 directly, and becomes Q4 when the front
reaches it); every id
in the requeued heap is below every other ready id (a requeued message was taken from the front);
every live index entry with a seq in [delta_lo, delta_hi) is in Delta, and nothing else is.
New messages enter as alphas at the back (Q4 while nothing is paged, else Q1). `_reduce` keeps
alphas within the RAM target (bodies dropped from Q1's head into Q2, or Q3 when Delta is empty, then
from Q4's tail into Q3's head) and betas within `index_ram_max` (Q2's head and then Q3's tail become
Delta, which grows at either end). `take` drains the front; when it reaches Delta it reads it back
one index segment at a time (`Backend.read_delta`), and loads the bodies of the betas it returns in
one batch (`Backend.load`). Lazy mode has a RAM target of zero: bodies go to disk at once and a
message's body is in RAM only while it is being handed out.

IO is the backend's (durable_queue.py); this module decides only what moves where, so a test can
drive it with an in-memory backend. It also counts the body bytes of every ready message
(`body_bytes`, what x-max-length-bytes limits), Delta included: each entry carries its body size,
and a recovered Delta starts with the total the queue index recovered.

Left out: paging the requeued heap (it is bounded by what consumers held unacked, i.e. by prefetch)
and RabbitMQ's rate-based target (the node gives targets).
"""
from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from persist.classic.message import Message, requeued


class Entry:
    """One message's place in the queue: its seq, where its body is, and the body if in RAM."""

    __slots__ = ("seq", "message", "persistent", "size", "body_size", "guid", "loc", "indexed",
                 "redelivered", "owed")

    def __init__(self, seq: int, message: Message | None, persistent: bool, size: int,
                 guid: bytes | None = None, loc: tuple[int, int, int] | None = None,
                 indexed: bool = False, redelivered: bool = False, body_size: int = 0) -> None:
        self.seq = seq
        self.message = message
        self.persistent = persistent
        self.size = size  # header + body bytes
        self.body_size = body_size
        self.guid = guid  # key in a message store, if the body is there
        self.loc = loc  # (segment, offset, length) of a body embedded in the queue index
        self.indexed = indexed  # a PUB record for it is in the queue index
        self.redelivered = redelivered  # meaningful while message is None
        self.owed = False  # persistent, still in the queue, its PUB record not written yet

    def __lt__(self, other: Entry) -> bool:
        return self.seq < other.seq

    def __repr__(self) -> str:
        state = "alpha" if self.message is not None else "beta"
        return f"Entry({self.seq}, {state}, persistent={self.persistent})"


class Backend(Protocol):
    def page_out(self, entries: list[Entry]) -> None:
        """Write the body and index record of every entry not yet on disk (no sync needed)."""

    def read_delta(self, lo: int, hi: int) -> tuple[list[Entry], int]:
        """Betas for the live index entries lo <= seq < hi in lo's segment; where to read next."""

    def load(self, entries: list[Entry]) -> None:
        """Set `message` of each beta from disk."""


@dataclass(frozen=True, slots=True)
class PagingStats:
    ready: int
    ram_messages: int  # alphas: bodies in RAM
    ram_bytes: int
    ram_index_entries: int  # alphas + betas
    delta_messages: int
    lazy: bool


class VariableQueue:
    def __init__(self, backend: Backend, *, index_ram_max: int, lazy: bool = False,
                 ram_max_messages: int | None = None, ram_max_bytes: int | None = None) -> None:
        self.backend = backend
        self.index_ram_max = index_ram_max
        self.lazy = lazy
        self.ram_max_messages = ram_max_messages
        self.ram_max_bytes = ram_max_bytes
        self._requeued: list[Entry] = []
        self.q4: deque[Entry] = deque()
        self.q3: deque[Entry] = deque()
        self.q2: deque[Entry] = deque()
        self.q1: deque[Entry] = deque()
        self.delta_lo = self.delta_hi = 0
        self.delta_count = 0
        self.alpha_count = 0
        self.alpha_bytes = 0
        self.body_bytes = 0  # of every ready message, wherever it is

    def __len__(self) -> int:
        return (len(self._requeued) + len(self.q4) + len(self.q3) + self.delta_count
                + len(self.q2) + len(self.q1))

    # -- in --------------------------------------------------------------------------------------
    def recover_delta(self, lo: int, hi: int, count: int, body_bytes: int = 0) -> None:
        """Start with `count` messages (`body_bytes` of bodies) on disk only, somewhere in [lo, hi)
        (an empty queue)."""
        assert not len(self)
        if count:
            self.delta_lo, self.delta_hi, self.delta_count = lo, hi, count
            self.body_bytes = body_bytes

    def push(self, entries: list[Entry]) -> None:
        """Fresh alphas, ascending seqs above everything held."""
        back = self.q4 if not (self.delta_count or self.q3 or self.q1) else self.q1
        back.extend(entries)
        self.alpha_count += len(entries)
        self.alpha_bytes += sum([e.size for e in entries])
        self.body_bytes += sum([e.body_size for e in entries])
        self._reduce()

    def requeue(self, entries: list[Entry]) -> None:
        """Alphas taken earlier go back to their original place, flagged redelivered."""
        for e in entries:
            assert e.message is not None
            e.message = requeued(e.message)
            heapq.heappush(self._requeued, e)
            self.alpha_count += 1
            self.alpha_bytes += e.size
            self.body_bytes += e.body_size

    def set_ram_target(self, max_messages: int | None, max_bytes: int | None = None) -> None:
        """Page bodies out (now) until at most this many messages / bytes of them stay in RAM."""
        self.ram_max_messages, self.ram_max_bytes = max_messages, max_bytes
        self._reduce()

    def set_lazy(self, lazy: bool) -> None:
        self.lazy = lazy
        self._reduce()

    # -- paging ----------------------------------------------------------------------------------
    def _reduce(self) -> None:
        self._page_alphas()
        self._push_betas()

    def _over(self, count: int, nbytes: int) -> bool:
        if self.lazy:
            return count > 0
        return ((self.ram_max_messages is not None and count > self.ram_max_messages)
                or (self.ram_max_bytes is not None and nbytes > self.ram_max_bytes))

    def _page_alphas(self) -> None:
        count, nbytes = self.alpha_count, self.alpha_bytes
        if not self._over(count, nbytes):
            return
        from_q1: list[Entry] = []
        from_q4: list[Entry] = []
        for source, batch, pop in ((self.q1, from_q1, self.q1.popleft),
                                   (self.q4, from_q4, self.q4.pop)):
            while source and self._over(count, nbytes):
                e = pop()
                batch.append(e)
                count -= 1
                nbytes -= e.size
        self.backend.page_out(from_q1 + from_q4)
        for e in from_q1 + from_q4:
            e.redelivered = e.message[1]  # type: ignore[index]
            e.message = None
        (self.q2 if self.delta_count else self.q3).extend(from_q1)
        self.q3.extendleft(from_q4)  # popped tail first, so extendleft restores the order
        self.alpha_count, self.alpha_bytes = count, nbytes

    def _push_betas(self) -> None:
        over = len(self.q3) + len(self.q2) - self.index_ram_max
        if over <= 0:
            return
        if not self.delta_count:
            assert not self.q2
            self.delta_lo = self.delta_hi = self.q3[-1].seq + 1
        while over > 0 and self.q2:
            self.delta_hi = self.q2.popleft().seq + 1
            self.delta_count += 1
            over -= 1
        while over > 0 and self.q3:
            self.delta_lo = self.q3.pop().seq
            self.delta_count += 1
            over -= 1

    # -- out -------------------------------------------------------------------------------------
    def take(self, n: int) -> list[Entry]:
        """Remove up to `n` messages from the front, lowest seq first, bodies loaded."""
        out: list[Entry] = []
        alphas = alpha_bytes = 0
        heap = self._requeued
        while heap and len(out) < n:
            e = heapq.heappop(heap)
            out.append(e)
            alphas += 1
            alpha_bytes += e.size
        while len(out) < n:
            if self.q4:
                k = min(n - len(out), len(self.q4))
                for _ in range(k):
                    e = self.q4.popleft()
                    out.append(e)
                    alpha_bytes += e.size
                alphas += k
            elif self.q3:
                k = min(n - len(out), len(self.q3))
                out.extend([self.q3.popleft() for _ in range(k)])
            elif self.delta_count:
                self._read_segment()
            elif self.q1:
                self.q4, self.q1 = self.q1, self.q4
            else:
                break
        self.alpha_count -= alphas
        self.alpha_bytes -= alpha_bytes
        self.body_bytes -= sum([e.body_size for e in out])
        assert self.body_bytes >= 0, "took more body bytes than were counted"
        betas = [e for e in out if e.message is None]
        if betas:
            self.backend.load(betas)
        return out

    def head_seq(self) -> int:
        """The seq `take(1)` would return (reading Delta back if it must); the queue is not empty."""
        if self._requeued:
            return self._requeued[0].seq
        while True:
            if self.q4:
                return self.q4[0].seq
            if self.q3:
                return self.q3[0].seq
            if self.delta_count:
                self._read_segment()
            elif self.q1:
                self.q4, self.q1 = self.q1, self.q4
            else:
                raise IndexError("head of an empty queue")

    def _read_segment(self) -> None:
        """Move the next index segment's worth of Delta into Q3."""
        entries, self.delta_lo = self.backend.read_delta(self.delta_lo, self.delta_hi)
        self.delta_count -= len(entries)
        assert self.delta_count >= 0, "delta held fewer messages than counted"
        self.q3.extend(entries)
        if self.delta_lo >= self.delta_hi:
            assert self.delta_count == 0, "delta range exhausted with messages counted"
        if self.delta_count == 0:
            self.delta_lo = self.delta_hi = 0
            self.q3.extend(self.q2)
            self.q2.clear()

    def drain(self) -> Iterator[list[Entry]]:
        """Remove every ready message, a batch at a time, bodies NOT loaded (purge, delete)."""
        heap, self._requeued = self._requeued, []
        yield sorted(heap)
        for q in (self.q4, self.q3):
            batch = list(q)
            q.clear()
            yield batch
        while self.delta_count:
            self._read_segment()
            batch = list(self.q3)
            self.q3.clear()
            yield batch
        for q in (self.q2, self.q1):
            batch = list(q)
            q.clear()
            yield batch
        self.alpha_count = self.alpha_bytes = self.body_bytes = 0

    # -- inspection ------------------------------------------------------------------------------
    def stats(self) -> PagingStats:
        in_ram = len(self._requeued) + len(self.q4) + len(self.q3) + len(self.q2) + len(self.q1)
        return PagingStats(len(self), self.alpha_count, self.alpha_bytes, in_ram,
                           self.delta_count, self.lazy)

    def check(self) -> None:
        """Assert the invariants (tests call this after every step)."""
        if not self.delta_count:
            assert not self.q2
        alphas = [e for q in (self._requeued, self.q4, self.q1) for e in q]
        assert all(e.message is not None for e in alphas)
        assert all(e.message is None for q in (self.q3, self.q2) for e in q)
        assert len(alphas) == self.alpha_count
        assert sum(e.size for e in alphas) == self.alpha_bytes
        in_ram = sum(e.body_size for q in (self._requeued, self.q4, self.q3, self.q2, self.q1) for e in q)
        assert in_ram <= self.body_bytes and (self.delta_count or in_ram == self.body_bytes)
        order = [e.seq for q in (self.q4, self.q3) for e in q]
        if self.delta_count:
            assert not order or order[-1] < self.delta_lo
            assert all(e.seq >= self.delta_hi for q in (self.q2, self.q1) for e in q)
        order += [e.seq for q in (self.q2, self.q1) for e in q]
        assert order == sorted(order)
        if self._requeued and order:
            assert max(e.seq for e in self._requeued) < order[0]
