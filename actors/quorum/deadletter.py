"""At-least-once dead-lettering: the messages a quorum queue holds until the targets confirm them.

Theory of operation (rabbit_fifo_dlx, RabbitMQ 4.0): with dead-letter-strategy at-least-once (and
overflow reject-publish), a message dead-lettered for `rejected`, `expired` or `delivery_limit`
does not leave the source queue. It waits in `discards` (FIFO) until the one dead-letter worker,
running beside the leader, checks it out: the worker holds at most `prefetch` (32) messages at a
time, publishes each to the dead-letter exchange with publisher confirms, and settles it once every
target queue confirmed. Only then is the message gone and its Raft index released. A worker that
(re)attaches - after a leader change, say - gets everything the previous one held back at the front
of `discards`, in the order they were dead-lettered, and dead-letter msg ids start again at 0.
Held messages count towards max-length and max-length-bytes (so a dead-letter target that never
confirms eventually makes the source queue refuse publishes) and towards the queue's total.

Invariants: every held message is in exactly one of `discards` and `checked`; `len` and `bytes`
are over both; `len(checked) <= prefetch` except right after a worker lowered it. Left out: the
worker's topology lookups and retries, which are the shell's.
"""
from __future__ import annotations

from collections import deque
from typing import Iterator

from actors.quorum.ready import Entry

WORKER_PREFETCH = 32  # RabbitMQ's dead_letter_worker_consumer_prefetch: what a worker attaches with

# (reason, entry)
Held = tuple[str, Entry]


class DeadLetterHold:
    __slots__ = ("discards", "worker", "prefetch", "checked", "next_msg_id", "bytes")

    def __init__(self) -> None:
        self.discards: deque[Held] = deque()
        self.worker: str | None = None
        self.prefetch = 0
        self.checked: dict[int, Held] = {}
        self.next_msg_id = 0
        self.bytes = 0

    def __len__(self) -> int:
        return len(self.discards) + len(self.checked)

    def hold(self, reason: str, entry: Entry) -> None:
        self.discards.append((reason, entry))
        self.bytes += entry[1]

    def attach(self, worker: str, prefetch: int) -> None:
        """A worker takes over; what the previous one held goes back to the front, in order."""
        for msg_id in sorted(self.checked, reverse=True):
            self.discards.appendleft(self.checked[msg_id])
        self.checked.clear()
        self.worker, self.prefetch, self.next_msg_id = worker, prefetch, 0

    def checkout(self) -> list[tuple[int, str, int, int]]:
        """Hand the worker what its prefetch allows: (msg_id, reason, index, delivery count)."""
        out = []
        if self.worker is None:
            return out
        while self.discards and len(self.checked) < self.prefetch:
            held = self.discards.popleft()
            msg_id = self.next_msg_id
            self.next_msg_id += 1
            self.checked[msg_id] = held
            reason, entry = held
            out.append((msg_id, reason, entry[0], entry[3]))
        return out

    def settle(self, msg_ids: tuple[int, ...]) -> list[int]:
        """Forget these confirmed messages; their raft indexes."""
        released = []
        for msg_id in msg_ids:
            held = self.checked.pop(msg_id, None)
            if held is not None:
                self.bytes -= held[1][1]
                released.append(held[1][0])
        return released

    def indexes(self) -> Iterator[int]:
        for _reason, entry in self.discards:
            yield entry[0]
        for _reason, entry in self.checked.values():
            yield entry[0]

    def to_value(self) -> list:
        return [[[r, list(e)] for r, e in self.discards], self.worker, self.prefetch,
                [[i, r, list(e)] for i, (r, e) in self.checked.items()], self.next_msg_id]

    @classmethod
    def from_value(cls, value: list) -> DeadLetterHold:
        hold = cls()
        hold.discards = deque((r, tuple(e)) for r, e in value[0])
        hold.worker, hold.prefetch = value[1], value[2]
        hold.checked = {i: (r, tuple(e)) for i, r, e in value[3]}
        hold.next_msg_id = value[4]
        hold.bytes = sum(e[1] for _r, e in hold.discards) + sum(e[1] for _r, e in hold.checked.values())
        return hold
