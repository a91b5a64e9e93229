"""When a quorum queue member snapshots: RabbitMQ's release cursor, with stashed states.

Theory of operation. A queue's state refers to log entries below its applied index (the messages
still in it), so a snapshot of the applied state may not stand for the entries below it: a
follower that installs it would miss bodies it must deliver, and compacting below it would lose
them. A snapshot at index S is valid only once no message of index <= S is live (rabbit_fifo's
release cursor). The machine's state is updated in place, so the state AS OF S exists only at the
moment S is applied: the member therefore *stashes* snapshots of its applied state (encoded, at
index S) from time to time, and writes the newest stash whose index lies below every live message
once the machine's release cursor (`QueueState.released_upto`, recomputed every
RELEASE_INTERVAL_ENTRIES entries and at once when the queue lets go of its last message) passes
it. A queue holding nothing live needs no stash: its applied state is valid as it is.

Cost, amortised: a stash costs O(messages) to encode, so stashes are taken at most every
max(`interval_min_entries`, messages held) entries and at most `stash_max` are kept (the oldest
becomes valid first; while they are all waiting no new one is taken). A queue that drains
snapshots at most every `drained_min_entries` entries on its own, and the member's ticks take the
rest once it is idle (`on_tick`: nothing applied since the tick before), so a queue that empties
after every message does not pay for a snapshot per message, nor one per tick while it is busy,
while a queue left empty is compacted once its log holds `idle_min_entries` since the last
snapshot: below that the entries cost a few bytes of the WAL (and of a segment after a rollover),
less than a snapshot's four syncs, which a new queue's no-op alone would otherwise cost each of
thousands of queues declared together. `drained_min_entries` is Ra's snapshot interval: Ra
writes a release cursor as a snapshot only once it is that far past the last snapshot (or frees
segments), and a snapshot here is several fsyncs on the member's loop, which every message of the
host waits behind (at 1,000 msg/s through a queue that a consumer keeps empty, a snapshot every 64
entries held the host's loop a tenth of the time).

Every member runs this on its own applied state (followers too: they compact their own logs), and
every member applies the same entries, so all of them stash at the same indexes.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Callable

Snapshot = tuple[int, int, bytes]  # (index, term, data) as RaftCore.capture_snapshot gives it

INTERVAL_MIN_ENTRIES = 4096  # Ra's default snapshot interval
DRAINED_MIN_ENTRIES = 4096   # Ra's snapshot interval (see above)
IDLE_MIN_ENTRIES = 16        # an idle drained queue's log worth a snapshot (see above)
STASH_MAX = 2


@dataclass(frozen=True, slots=True)
class QueueView:
    """What the policy reads of the machine state after a run of applies."""

    applied: int
    drained: bool        # nothing live: no ready, unacked or held dead-lettered message
    released_upto: int   # the machine's release cursor: nothing at or below it is live
    messages: int        # messages held (ready + unacked + dead-letter hold)


class ReleaseCursor:
    def __init__(self, snapshot_index: int = 0, interval_min_entries: int = INTERVAL_MIN_ENTRIES,
                 drained_min_entries: int = DRAINED_MIN_ENTRIES, stash_max: int = STASH_MAX,
                 idle_min_entries: int = IDLE_MIN_ENTRIES) -> None:
        self.interval_min_entries = interval_min_entries
        self.drained_min_entries = drained_min_entries
        self.idle_min_entries = idle_min_entries
        self.stash_max = stash_max
        self.snapshot_index = snapshot_index  # the last snapshot asked for (or recovered)
        self.stashes: deque[Snapshot] = deque()
        self.last_stash = snapshot_index
        self._tick_applied = snapshot_index  # the applied index the last tick saw

    def after_apply(self, view: QueueView, capture: Callable[[], Snapshot]) -> Snapshot | None:
        """The snapshot to write now, if any; stashes the applied state when it is due."""
        if view.applied <= self.snapshot_index:
            return None
        if view.drained:
            if view.applied - self.snapshot_index >= self.drained_min_entries:
                return self._take(capture())
            return None
        valid = None
        while self.stashes and self.stashes[0][0] <= view.released_upto:
            valid = self.stashes.popleft()
        if (len(self.stashes) < self.stash_max and view.applied > view.released_upto
                and view.applied - self.last_stash >= max(self.interval_min_entries, view.messages)):
            self.stashes.append(capture())
            self.last_stash = view.applied
        return self._take(valid) if valid is not None and valid[0] > self.snapshot_index else None

    def on_tick(self, view: QueueView, capture: Callable[[], Snapshot]) -> Snapshot | None:
        """A tick: once nothing was applied since the tick before, a drained queue's log goes,
        once it holds `idle_min_entries`."""
        idle, self._tick_applied = view.applied == self._tick_applied, view.applied
        if idle and view.drained and view.applied - self.snapshot_index >= self.idle_min_entries:
            return self._take(capture())
        return None

    def restored(self, index: int) -> None:
        """The member installed a leader's snapshot at `index`: older stashes are useless."""
        self.snapshot_index = max(self.snapshot_index, index)
        while self.stashes and self.stashes[0][0] <= index:
            self.stashes.popleft()

    def _take(self, snapshot: Snapshot) -> Snapshot:
        self.snapshot_index = snapshot[0]
        self.stashes = deque(s for s in self.stashes if s[0] > snapshot[0])
        return snapshot
