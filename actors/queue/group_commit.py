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

Every queue in a commit is told how long it waited for it (`waited(start_ms, end_ms)`): the time
its confirms and its next messages waited on the syncs, which a slow disk makes long
(flow/state.py's waiting; `warrenctl flow` names the store when it is most of a queue's time), and
`syncing` records the host's time in commits. A commit shorter than the clock's millisecond is not
told.

The decision (which queues to flush, in what order, how many commits a turn) is pure: the caller
hands in `schedule`, the event loop's call_soon in a queue host (the manager), a list's append in
tests that run a commit when they choose; and `clock`, the monotonic clock in milliseconds (None:
commits are not timed).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from flow.state import FlowState

FLOW_TICKS_PER_SECOND = 1000  # the clock's milliseconds, as the runtime's flow states


class Flushable(Protocol):
    def flush(self) -> None: ...

    def waited(self, start_ms: int, end_ms: int) -> None: ...


Schedule = Callable[[Callable[[], None]], object]


def waited(record: FlowState, start_ms: int, end_ms: int) -> FlowState:
    """`record` with the wait [start_ms, end_ms) added (flow/state.py's waiting outside credit)."""
    start = max(start_ms, record.changed_at)
    return record.observe(True, start).observe(False, max(end_ms, start))


class GroupCommit:
    __slots__ = ("_schedule", "_clock", "_dirty", "_scheduled", "syncing")

    def __init__(self, schedule: Schedule, clock: Callable[[], int] | None = None) -> None:
        self._schedule = schedule
        self._clock = clock
        self._dirty: dict[int, Flushable] = {}
        self._scheduled = False
        self.syncing = FlowState(FLOW_TICKS_PER_SECOND, changed_at=clock() if clock else 0)

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
        clock = self._clock
        start = clock() if clock else 0
        for queue in dirty.values():
            queue.flush()
        end = clock() if clock else 0
        if end > start:
            self.syncing = waited(self.syncing, start, end)
            for queue in dirty.values():
                queue.waited(start, end)
