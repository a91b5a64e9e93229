"""Safety checkers fed by the simulator as things happen; each violation is a readable line.

- election safety: at most one leader per term (Raft §5.2).
- state machine safety: every member applies the same entry at the same index (§5.4.3), so
  committed prefixes are identical, and the same machine state results at the same index.
- durability: every command acknowledged to a client is the entry committed at its index, and
  it is applied by every member by the end of the liveness phase.
- crash recovery: a restarted member's log keeps everything its old log had promised - the hard
  state (or a newer one), the snapshot, and every entry up to the written index the member had been told - which
  is "ack a follower append only after the WAL said written" seen from the disk's side.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tests.sim.storage import DurableView, StorageLog


@dataclass
class Checker:
    leaders: dict[int, str] = field(default_factory=dict)
    committed: dict[int, tuple[int, bytes]] = field(default_factory=dict)
    digests: dict[int, str] = field(default_factory=dict)
    acked: dict[int, tuple[int, int]] = field(default_factory=dict)   # op_id -> (index, term)
    violations: list[str] = field(default_factory=list)

    def violation(self, now: int, text: str) -> None:
        self.violations.append(f"tick {now}: {text}")

    def leader(self, now: int, term: int, node: str) -> None:
        first = self.leaders.setdefault(term, node)
        if first != node:
            self.violation(now, f"two leaders in term {term}: {first} and {node}")

    def applied(self, now: int, node: str, index: int, term: int, cmd: bytes, digest: str) -> None:
        first = self.committed.setdefault(index, (term, cmd))
        if first != (term, cmd):
            self.violation(now, f"{node} applied {(term, cmd)!r} at {index}, "
                                f"another member applied {first!r}")
        if self.digests.setdefault(index, digest) != digest:
            self.violation(now, f"{node} has a different machine state at index {index}")

    def ack(self, now: int, op_id: int, index: int, term: int) -> None:
        self.acked[op_id] = (index, term)
        entry = self.committed.get(index)
        if entry is None or entry[0] != term:
            self.violation(now, f"op {op_id} acked at ({index}, {term}) but committed is {entry!r}")

    def recovered(self, now: int, node: str, before: DurableView, log: StorageLog) -> None:
        after = DurableView.of(log)
        # newer is fine (a torn tail can keep a record that was written but not yet synced,
        # which no one has acted on); older, or another vote in the same term, is not
        term, vote = after.hard_state
        if (term, vote) != before.hard_state and not (
                term > before.hard_state[0] or (term == before.hard_state[0]
                                                and before.hard_state[1] is None)):
            self.violation(now, f"{node} recovered hard state {after.hard_state!r}, "
                                f"it had saved {before.hard_state!r}")
        if before.snapshot is not None and (after.snapshot is None
                                            or after.snapshot[0] < before.snapshot[0]):
            self.violation(now, f"{node} recovered snapshot {after.snapshot!r}, "
                                f"it had written {before.snapshot!r}")
        last = max(log.last_index_term()[0], (after.snapshot or (0, 0))[0])
        if last < before.written:
            self.violation(now, f"{node} recovered a log ending at {last}, "
                                f"but {before.written} had been reported written")
        for index in range(max(before.first, after.first), before.written + 1):
            if log.term_at(index) != before.terms[index]:
                self.violation(now, f"{node} recovered term {log.term_at(index)} at {index}, "
                                    f"written was term {before.terms[index]}")
                break

    def final(self, now: int, applied: dict[str, int]) -> None:
        """After the liveness phase: every member has applied every acknowledged command."""
        for op_id, (index, term) in sorted(self.acked.items()):
            if self.committed.get(index, (None,))[0] != term:
                self.violation(now, f"acked op {op_id} at ({index}, {term}) was lost")
            for node, upto in sorted(applied.items()):
                if upto < index:
                    self.violation(now, f"{node} applied only {upto} < acked op {op_id} at {index}")
                    break
