"""The group commit of a queue host's durable queues: one sync per loop turn, confirms after it.

THE ORDERING RULE of durable queues: a queue's confirms leave only after the fdatasync that covers
everything it wrote. The queue core holds back every confirm (actors/queue/core.py); a durable
queue actor that touched its storage in a loop turn (all the frames its mailbox drained in it)
`mark`s itself here, and the first mark of a turn schedules one `commit` for the turn's end.
`commit` calls `flush()` on every queue marked in the turn, in the order they were first marked:
a queue's flush syncs the shared message store (the first one does the work, the rest find it
clean), then its own index, THEN releases its held confirms. Acks and deliveries written in the
turn become durable in the same flush, so after kill -9 only the acks of the last turn can come
back (as redeliveries). The interval is one loop turn: never per message, and never longer than
the work already waiting. A queue being deleted flushes itself and is `forget`-ten, so a commit
never touches a deleted queue's storage.

The decision (which queues to flush, in what order, how many commits a turn) is pure: the caller
hands in `schedule`, the event loop's call_soon in a queue host (the manager), a list's append in
tests that run a commit when they choose.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class Flushable(Protocol):
    def flush(self) -> None: ...


Schedule = Callable[[Callable[[], None]], object]


class GroupCommit:
    __slots__ = ("_schedule", "_dirty", "_scheduled")

    def __init__(self, schedule: Schedule) -> None:
        self._schedule = schedule
        self._dirty: dict[int, Flushable] = {}
        self._scheduled = False

    def mark(self, queue: Flushable) -> None:
        """`queue` wrote something (or holds confirms) in this loop turn: flush it at its end."""
        self._dirty[id(queue)] = queue
        if not self._scheduled:
            self._scheduled = True
            self._schedule(self.commit)

    def forget(self, queue: Flushable) -> None:
        self._dirty.pop(id(queue), None)

    def commit(self) -> None:
        self._scheduled = False
        dirty, self._dirty = self._dirty, {}
        for queue in dirty.values():
            queue.flush()
