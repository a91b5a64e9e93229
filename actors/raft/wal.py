"""WalActor: the node's one WAL, shared by every Raft member in this host process.

Group commit. A member's core appends to its `MemberLog`, which queues the records in the shared
`WalWriter` at once; the member then calls `kick()`. The first kick of a loop turn schedules ONE
`flush` for the next turn (`call_soon`), so everything every member appended while the runtime
dispatched the current batch of frames goes out as one write and ONE sync. After the sync the
actor tells each member in the batch how far it is written (`written(upto)` on its core).

Ordering rules kept here: a member hears `written` only after the sync that covers the entries
(so a follower's ack and a leader's commit count only durable entries), and the notification is
delivered synchronously, before that member can truncate again (persist/wal/core.py requires it).
`after_flush(callback)` runs the callback right after the next sync, before any `written`: a member
that saved its hard state (a WAL record) releases the messages it held back behind it.
`at_turn_end(callback)` runs it at the start of the next flush, before the write: a leader sends
its AppendEntries for the turn there, and `send_queued` (the runtime's) then sends them and
everything else the turn queued for other processes (channels' credit grants above all) before
the write and sync block the loop, so the followers' writes overlap the leader's own sync instead
of following it, and publishers are not held while this process writes and applies.

Syncs off the loop, where nothing waits for them there. A leader whose group has three or more
voters commits through its followers' acks alone (two of them are a majority of three): its own
write counts only if it comes first. Yet its sync on the loop held every frame that reached the
host meanwhile, the followers' acks and the channels' publishes among them: at 1,000 msg/s on
three nodes the leader's loop spent half its busy time in fdatasync and a frame that arrived
during one waited ~0.3 ms more (bench/RESULTS.md, 2026-12-04 "the leader's sync off its loop").
So when every member in a batch says its write is not `urgent` (`register`; a quorum member: a
leader of three or more voters) and the batch holds no hard state and nothing waits on
`after_flush`, the batch is written on the loop and synced on the host's sync thread (`syncs`,
actors/queue/sync_thread.py); the notifications follow on the loop once it is done. One batch is
in flight at a time: a flush meanwhile runs its turn's callbacks and sends (the AppendEntries
leave at once) and leaves the write to the flush that the sync's end kicks; a member that
truncates meanwhile (it stepped down) is told no more than what lies below the cut
(persist/wal/core.py). A follower's batch, a lone leader's or a vote's keeps the inline path:
there the sync is what the next step waits for, and a handoff to a thread and back costs more
than the loop gains (bench/RESULTS.md, 2026-11-28).
After the notifications the flush sends what they queued for other hosts (a follower's ack, a
leader's deliveries and confirms) at once rather than at the loop's next turn.

Why method calls and not messages: `MemberLog` must live in the writer's process anyway, and a
local message would cost each commit another loop turn. (On a node with several quorum hosts the
WAL has a process of its own and each host's members call a `WalClient` instead, the same
interface over the ZeroMQ link: actors/raft/wal_client.py.)
"""
from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

import structlog

from flow.state import FlowState
from persist.wal.writer import WalWriter

log = structlog.get_logger("warren.raft.wal")

slow_flush_s = 0.5  # log a warning when one write+sync takes this long


class WalActor:
    def __init__(self, writer: WalWriter, loop: asyncio.AbstractEventLoop,
                 send_queued: Callable[[], None] = lambda: None, syncs: Any = None) -> None:
        """`syncs`: where a batch that nobody waits on is synced (a ThreadSyncs over the writer's
        RealDisk, actors/queue/sync_thread.py); None syncs every batch on the loop."""
        self.writer = writer
        self._loop = loop
        self._send_queued = send_queued
        self._syncs = syncs
        self._members: dict[str, Callable[[int], None]] = {}
        self._urgent: dict[str, Callable[[], bool]] = {}
        self._upto: dict[str, int] = {}
        self._in_flight = False  # a batch is being synced on the sync thread
        self.background_syncs = 0
        self._scheduled = False
        self._after: list[Callable[[], None]] = []
        self._turn_end: list[Callable[[], None]] = []
        self.flushes = 0
        self.entries_flushed = 0
        self.syncing = FlowState(1000, changed_at=int(time.monotonic() * 1000))  # time in write+sync

    def register(self, member: str, on_written: Callable[[int], None], written: int,
                 urgent: Callable[[], bool] = lambda: True) -> None:
        """`written`: the member's durable last index at start (for the entry count only);
        `urgent()`: whether the member's next step waits for its records' sync (see above)."""
        self._members[member] = on_written
        self._urgent[member] = urgent
        self._upto[member] = written

    def unregister(self, member: str) -> None:
        """The member is gone (a deleted quorum queue member): no more notifications for it."""
        self._members.pop(member, None)
        self._urgent.pop(member, None)
        self._upto.pop(member, None)

    def at_turn_end(self, callback: Callable[[], None]) -> None:
        """Call `callback` at the start of the next flush, before anything is written."""
        self._turn_end.append(callback)
        self.kick()

    def after_flush(self, callback: Callable[[], None]) -> None:
        """Call `callback` once everything queued so far is synced (the next flush)."""
        self._after.append(callback)
        self.kick()

    def kick(self) -> None:
        """Something may have been appended: flush on the next loop turn (once per turn)."""
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self.flush)

    def flush(self) -> None:
        self._scheduled = False
        turn_end, self._turn_end = self._turn_end, []
        for callback in turn_end:
            callback()
        self._send_queued()
        if self._in_flight:
            return  # the sync's end flushes what was queued meanwhile (and runs `after`)
        after, self._after = self._after, []
        if not self.writer.core.pending_bytes() and not self.writer.rolling:
            for callback in after:  # nothing queued: everything before them is durable
                callback()
            return
        started = time.monotonic()
        self._observe_syncing(True)
        if not after and self._in_background():
            return
        written = self.writer.flush()
        self._observe_syncing(False)
        for callback in after:
            callback()
        self._flushed(started, written)

    def _in_background(self) -> bool:
        """Write the queued batch and sync it on the sync thread, if nobody waits for it (see
        above); whether it did."""
        writer = self.writer
        members, hard = writer.core.queued_members()
        if self._syncs is None or hard or writer.rolling or not members:
            return False
        urgent = self._urgent
        if any(urgent.get(member, _always)() for member in members):
            return False
        started = time.monotonic()
        batch = writer.write_batch()
        with self._syncs.collect() as collected:
            writer.files.sync()
        self._in_flight = True
        self.background_syncs += 1
        self._syncs.run(collected, lambda: self._synced_in_background(started, batch))
        return True

    def _synced_in_background(self, started: float, batch: Any) -> None:
        self._in_flight = False
        self._observe_syncing(False)
        written = self.writer.synced(batch)
        self._flushed(started, written)
        if self.writer.core.pending_bytes() or self._after:
            self.kick()  # what was queued while the batch synced

    def _flushed(self, started: float, written: dict[str, int]) -> None:
        elapsed = time.monotonic() - started
        if elapsed > slow_flush_s:
            log.warning("wal.slow_flush", seconds=round(elapsed, 3), members=len(written))
        if self.writer.rolling:
            self.kick()  # the next turn writes the next slice of the rollover
        self._notify(written)
        self._send_queued()  # acks, deliveries and confirms the notices produced: now, not next turn

    def _observe_syncing(self, busy: bool) -> None:
        now_ms = int(time.monotonic() * 1000)
        self.syncing = self.syncing.observe(busy, max(now_ms, self.syncing.changed_at))

    def _notify(self, written: dict[str, int]) -> None:
        """Tell each member of a synced batch how far it is written (see above)."""
        self.flushes += 1
        for member, upto in written.items():
            # entries newly durable (a truncation-only batch reports less; it adds nothing)
            self.entries_flushed += max(0, upto - self._upto.get(member, upto))
            self._upto[member] = upto
            on_written = self._members.get(member)
            if on_written is not None:
                on_written(upto)

    def stats(self) -> dict:
        return {"flushes": self.flushes, "entries": self.entries_flushed, "background_syncs": self.background_syncs,
                "syncs": getattr(self.writer.disk, "syncs", 0), "rollovers": self.writer.rollovers,
                **self.writer.counters.as_dict()}


def _always() -> bool:
    return True
