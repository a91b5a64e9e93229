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

Why method calls and not messages: `MemberLog` must live in the writer's process anyway, and a
local message would cost each commit another loop turn. (On a node with several quorum hosts the
WAL has a process of its own and each host's members call a `WalClient` instead, the same
interface over the ZeroMQ link: actors/raft/wal_client.py.)
"""
from __future__ import annotations

import asyncio
import time
from typing import Callable

import structlog

from flow.state import FlowState
from persist.wal.writer import WalWriter

log = structlog.get_logger("warren.raft.wal")

slow_flush_s = 0.5  # log a warning when one write+sync takes this long


class WalActor:
    def __init__(self, writer: WalWriter, loop: asyncio.AbstractEventLoop,
                 send_queued: Callable[[], None] = lambda: None) -> None:
        self.writer = writer
        self._loop = loop
        self._send_queued = send_queued
        self._members: dict[str, Callable[[int], None]] = {}
        self._upto: dict[str, int] = {}
        self._scheduled = False
        self._after: list[Callable[[], None]] = []
        self._turn_end: list[Callable[[], None]] = []
        self.flushes = 0
        self.entries_flushed = 0
        self.syncing = FlowState(1000, changed_at=int(time.monotonic() * 1000))  # time in write+sync

    def register(self, member: str, on_written: Callable[[int], None], written: int) -> None:
        """`written`: the member's durable last index at start (for the entry count only)."""
        self._members[member] = on_written
        self._upto[member] = written

    def unregister(self, member: str) -> None:
        """The member is gone (a deleted quorum queue member): no more notifications for it."""
        self._members.pop(member, None)
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
        after, self._after = self._after, []
        if not self.writer.core.pending_bytes() and not self.writer.rolling:
            for callback in after:  # nothing queued: everything before them is durable
                callback()
            return
        started = time.monotonic()
        now_ms = int(started * 1000)
        self.syncing = self.syncing.observe(True, max(now_ms, self.syncing.changed_at))
        written = self.writer.flush()
        self.syncing = self.syncing.observe(False, max(int(time.monotonic() * 1000), self.syncing.changed_at))
        for callback in after:
            callback()
        elapsed = time.monotonic() - started
        if elapsed > slow_flush_s:
            log.warning("wal.slow_flush", seconds=round(elapsed, 3), members=len(written))
        if self.writer.rolling:
            self.kick()  # the next turn writes the next slice of the rollover
        self._notify(written)

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
        return {"flushes": self.flushes, "entries": self.entries_flushed,
                "syncs": getattr(self.writer.disk, "syncs", 0), "rollovers": self.writer.rollovers,
                **self.writer.counters.as_dict()}
