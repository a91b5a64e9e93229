"""The group commit of a queue host's durable queues: one sync at a time, confirms after it.

THE ORDERING RULE of durable queues: a queue's confirms leave only after the fdatasync that covers
everything it wrote. The queue core holds back every confirm (actors/queue/core.py); a durable
queue actor that touched its storage in a loop turn (all the frames its mailbox drained in it)
`mark`s itself here, and the first mark of a turn schedules one `commit` for the turn's end.
`commit` calls `write()` and then `flush()` on every queue marked since the last commit, in the
order they were first marked: a queue writes the messages it took in since its last commit and
still holds (persist/classic/durable_queue.py defers them to here, off the path to the consumer);
a queue's flush asks for the syncs of the shared message store (the first one asks, the
rest find it clean) and of its own index, and sets aside the confirms they will cover; then the
syncs run, and `synced()` tells each of those queues to release what it set aside. Acks and
deliveries written before the commit become durable in the same syncs, so after kill -9 only the
acks of the last commits can come back (as redeliveries). A queue being deleted flushes itself and
is `forget`-ten, so a commit never touches a deleted queue's storage.

The syncs run through `syncs` (a `Syncs`): in a queue host they are collected during the flushes
and carried out on a worker thread, so the event loop goes on delivering and taking publishes
while the disk syncs (an fdatasync of 0.2 ms on a quiet disk and several ms on a busy one held
every delivery behind it). One commit is in flight at a time: queues marked meanwhile wait for the
next, which starts as soon as the one in flight is done, and a quiet host syncs as soon as it has
written. Confirms are released in commit order, never ahead of the sync that covers them.
`InlineSyncs` (the default) syncs during the flushes and calls back at once: one commit per loop
turn, as tests drive it.

Every commit's syncs leave the loop, even a quiet host's commit of one message: syncing those on
the loop saved ~0.1 ms of publish -> confirm at 1,000 msg/s, but an fdatasync that takes 10-450
ms (this machine's disk in a slow phase) then stops everything the host serves, deliveries and
the publishers' reads included, which connections that moved to their queue's host all wait on
(bench/RESULTS.md, 2026-11-29).

Under constant load - `BUSY_AFTER` commits in a row during whose syncs the queues took in
`BUSY_MESSAGES` or more messages (marks say how many) - the next commit starts `interval_ms`
after the one before it started rather than at once. RabbitMQ's store does the same ("persists
messages to disk in batches after an interval ... or when a queue is idle", the acks/confirms
guide): while busy its message store syncs every 25 ms and its queue index every 200 ms, and a
confirm waits for both. Fewer syncs (20 a second instead of ~100) leave the disk and the host's
CPU to the messages, and a publisher that keeps a window of unconfirmed messages is paced by its
confirms, so less of what it sends waits in its socket: measured at 16 KiB (bench/RESULTS.md,
2026-11-28 evening), 25 ms gave RabbitMQ's publish-to-consume latency, 50 ms less at a higher
rate, 100 ms no less and a lower rate. The wait ends early once the queues took in `HOLD_MAX`
messages since the last commit started: a publisher keeping 1,000 unconfirmed messages at 35k
msg/s with no consumer (bench/durable_compare.py's backlog) ran dry of its window without that.
One commit that is not busy ends the run: a host at a steady moderate rate (1,000 msg/s with
syncs of a few ms) or with a publisher waiting for its confirms commits as soon as it has
written, as RabbitMQ's store syncs when it is idle.

The owner of the commit (the host's message-store actor, actors/store/shell.py) hears of every
commit's end (`on_done`) after its queues did. Every queue in a commit is told how long it
waited for it (`waited(start_ms, end_ms)`): the time
its confirms and its next messages waited on the syncs, which a slow disk makes long
(flow/state.py's waiting; `warrenctl flow` names the store when it is most of a queue's time), and
`syncing` records the host's time in commits. A commit shorter than the clock's millisecond is not
told.

A queue that holds no confirms (it wrote only deliveries and acks, which promise nothing) is
marked `lazy`: it joins a commit within `lazy_ms` (RabbitMQ's queue syncs such writes when idle or
on its 200 ms sync timer), or sooner when it is marked for a confirm. A consumer's ack then rides
with the next publish's commit instead of costing a sync of its own: at 1,000 msg/s, one commit a
message instead of two. The queue writes what it marks lazy at once (actors/queue/shell.py), so
a kill -9 keeps it; an ack lost with the last `lazy_ms` in a machine crash is a redelivery, which
the recovery rules allow.

The decision (which queues to flush, in what order, when the next commit starts) is pure: the
caller hands in `schedule`, the event loop's call_soon in a queue host (the manager), a list's
append in tests that run a commit when they choose; `later(seconds, callback)`, the loop's
call_later (None: a lazy mark is an ordinary one); `clock`, the monotonic clock in milliseconds
(None: commits are not timed); and `syncs`.
"""
from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol

from flow.state import FlowState

FLOW_TICKS_PER_SECOND = 1000  # the clock's milliseconds, as the runtime's flow states


class Flushable(Protocol):
    def write(self) -> None:
        """Write what this queue owes the disk (its messages not written yet); no sync."""

    def flush(self) -> None:
        """Ask for the syncs that make this queue's writes durable; set its confirms aside."""

    def synced(self) -> None:
        """The syncs asked for at the last `flush` are done: release what was set aside."""

    def waited(self, start_ms: int, end_ms: int) -> None: ...


class Syncs(Protocol):
    """Where a commit's syncs run."""

    def collect(self) -> AbstractContextManager[Any]:
        """A block whose syncs are collected (its value: what was collected) rather than done."""

    def run(self, collected: Any, done: Callable[[], None]) -> None:
        """Carry out what `collect` gathered, then call `done` on the caller's loop."""


class InlineSyncs:
    """Syncs done where they are asked for; `done` at once."""

    def collect(self) -> AbstractContextManager[Any]:
        return nullcontext()

    def run(self, collected: Any, done: Callable[[], None]) -> None:
        done()


Schedule = Callable[[Callable[[], None]], object]
Later = Callable[[float, Callable[[], None]], Any]
LAZY_MS = 200
INTERVAL_MS = 50  # under constant load, a commit starts this long after the one before it started
BUSY_MESSAGES = 32  # messages taken in while one commit synced that make it a busy one
BUSY_AFTER = 3  # busy commits in a row: constant load
HOLD_MAX = 512  # messages taken in since the last commit started that end the interval's wait


def waited(record: FlowState, start_ms: int, end_ms: int) -> FlowState:
    """`record` with the wait [start_ms, end_ms) added (flow/state.py's waiting outside credit)."""
    start = max(start_ms, record.changed_at)
    return record.observe(True, start).observe(False, max(end_ms, start))


class GroupCommit:
    __slots__ = ("_schedule", "_later", "lazy_ms", "_clock", "_syncs", "_dirty", "_lazy", "_lazy_due_set",
                 "_scheduled", "_in_flight", "syncing", "interval_ms", "_busy", "_taken_while_syncing",
                 "_taken_pending", "_waiting", "_wait_token", "on_done")

    def __init__(self, schedule: Schedule, clock: Callable[[], int] | None = None,
                 syncs: Syncs | None = None, later: Later | None = None, lazy_ms: int = LAZY_MS,
                 interval_ms: int = INTERVAL_MS) -> None:
        self._schedule = schedule
        self._later = later
        self.lazy_ms = lazy_ms
        self.interval_ms = interval_ms
        self._busy = 0  # busy commits in a row
        self._taken_while_syncing = 0  # messages the marks during the commit in flight took in
        self._taken_pending = 0  # messages the marks since the last commit started took in
        self._waiting = False  # the next commit waits for the interval
        self._wait_token = 0  # which `later` call ends the current wait (an ended one is ignored)
        self._clock = clock
        self._syncs = syncs if syncs is not None else InlineSyncs()
        self._dirty: dict[int, Flushable] = {}
        self._lazy: dict[int, Flushable] = {}  # marked lazy, waiting for `_lazy_due`
        self._lazy_due_set = False  # a `later` call for `_lazy_due` is pending
        self._scheduled = False
        self._in_flight: dict[int, Flushable] | None = None  # the queues of the commit syncing now
        self.syncing = FlowState(FLOW_TICKS_PER_SECOND, changed_at=clock() if clock else 0)
        self.on_done: Callable[[], None] | None = None  # after every commit's synced/waited calls

    def mark(self, queue: Flushable, lazy: bool = False, taken: int = 0) -> None:
        """`queue` wrote something (or holds confirms): flush it in the next commit, or, `lazy`
        (it holds no confirms), in one within `lazy_ms`. `taken`: how many messages it took in."""
        key = id(queue)
        self._taken_pending += taken
        if self._in_flight is not None:
            self._taken_while_syncing += taken
        if lazy and self._later is not None:
            if key not in self._dirty:
                self._lazy[key] = queue
                if not self._lazy_due_set:
                    self._lazy_due_set = True
                    self._later(self.lazy_ms / 1000, self._lazy_due)
            return
        self._lazy.pop(key, None)  # its flush in the next commit covers what it wrote lazily
        self._dirty[key] = queue
        if not self._scheduled and self._in_flight is None:
            self._scheduled = True
            self._schedule(self.commit)
        elif self._waiting and self._taken_pending >= HOLD_MAX:
            self._waiting = False  # enough waits: a publisher's window of confirms must not run dry
            self._schedule(self.commit)

    def forget(self, queue: Flushable) -> None:
        self._dirty.pop(id(queue), None)
        self._lazy.pop(id(queue), None)
        if self._in_flight is not None:
            self._in_flight.pop(id(queue), None)

    def _lazy_due(self) -> None:
        self._lazy_due_set = False
        lazy, self._lazy = self._lazy, {}
        for queue in lazy.values():
            self.mark(queue)

    def commit(self) -> None:
        self._scheduled = False
        if self._in_flight is not None or not self._dirty:
            return  # the commit in flight starts the next one when it is done
        self._waiting = False
        self._taken_pending = 0
        dirty, self._dirty = self._dirty, {}
        self._in_flight = dirty
        start = self._clock() if self._clock else 0
        for queue in dirty.values():
            queue.write()  # every queue's writes before any sync: one store sync covers them all
        with self._syncs.collect() as collected:
            for queue in dirty.values():
                queue.flush()
        self._syncs.run(collected, lambda: self._done(start))

    def _done(self, start: int) -> None:
        done, self._in_flight = self._in_flight, None
        assert done is not None
        for queue in done.values():
            queue.synced()
        end = self._clock() if self._clock else 0
        if end > start:
            self.syncing = waited(self.syncing, start, end)
            for queue in done.values():
                queue.waited(start, end)
        if self.on_done is not None:
            self.on_done()
        busy = self._dirty and self._taken_while_syncing >= BUSY_MESSAGES
        self._busy = self._busy + 1 if busy else 0
        self._taken_while_syncing = 0
        if self._dirty and not self._scheduled:
            self._scheduled = True
            wait_ms = start + self.interval_ms - end
            if self._busy >= BUSY_AFTER and wait_ms > 0 and self._clock is not None and self._later is not None:
                self._waiting = True
                self._wait_token += 1
                token = self._wait_token
                self._later(wait_ms / 1000, lambda: self._waited_out(token))
            else:
                self._schedule(self.commit)

    def _waited_out(self, token: int) -> None:
        if self._waiting and token == self._wait_token:
            self.commit()
