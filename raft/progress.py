"""What a leader knows about one follower's log (etcd's Progress, simplified).

Theory of operation: a follower is in one of three states.
- probe: the leader does not know where the logs diverge; it sends one AppendEntries and
  waits for the reply (or a heartbeat reply) before sending the next.
- replicate: the logs are known to match up to `match`; the leader streams entries
  optimistically, advancing `next` as it sends, with at most `max_inflight` appends unacked.
- snapshot: `next` was compacted away; the leader streams a snapshot in chunks, one chunk in
  flight, and goes back to probe once the follower says the snapshot is durable.
Invariant: match < next. `match` only grows (a follower's written, verified index).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

PROBE = "probe"
REPLICATE = "replicate"
SNAPSHOT = "snapshot"


@dataclass
class Progress:
    next: int
    match: int = 0
    state: str = PROBE
    probe_sent: bool = False
    inflight: deque[int] = field(default_factory=deque)  # last index of each unacked append
    recent_active: bool = False
    commit_told: int = 0  # the commit index this follower was last told (bounded by what it held)
    snap_index: int = 0
    snap_term: int = 0
    snap_data: bytes = b""
    snap_offset: int = 0
    machine_version: int = 1  # the highest machine version it runs, as its replies say (versions.py)

    def paused(self, max_inflight: int) -> bool:
        if self.state == PROBE:
            return self.probe_sent
        if self.state == REPLICATE:
            return len(self.inflight) >= max_inflight
        return True

    def sent(self, last: int, with_entries: bool) -> None:
        if self.state == REPLICATE:
            if with_entries:
                self.next = last + 1
                self.inflight.append(last)
        else:
            self.probe_sent = True

    def update(self, index: int) -> bool:
        """A follower acked `index`; returns whether match moved."""
        while self.inflight and self.inflight[0] <= index:
            self.inflight.popleft()
        if index <= self.match:
            return False
        self.match = index
        self.next = max(self.next, index + 1)
        return True

    def decrease(self, rejected: int, probe_from: int) -> bool:
        """A follower rejected an append at prev index `rejected`; False if the reject is stale."""
        if self.state == REPLICATE:
            if rejected <= self.match:
                return False
            self.become_probe()
            return True
        if self.next - 1 != rejected:
            return False
        self.next = max(min(rejected, probe_from + 1), self.match + 1, 1)
        self.probe_sent = False
        return True

    def become_probe(self) -> None:
        self.state = PROBE
        self.next = self.match + 1
        self.probe_sent = False
        self.inflight.clear()
        self.snap_data = b""

    def become_replicate(self) -> None:
        self.state = REPLICATE
        self.next = self.match + 1
        self.inflight.clear()

    def become_snapshot(self, index: int, term: int, data: bytes) -> None:
        self.state = SNAPSHOT
        self.snap_index, self.snap_term, self.snap_data, self.snap_offset = index, term, data, 0
        self.inflight.clear()
