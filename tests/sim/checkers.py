"""Safety checkers fed by the simulator as things happen; each violation is a readable line.

- election safety: at most one leader per term (Raft §5.2).
- state machine safety: every member applies the same entry at the same index (§5.4.3), so
  committed prefixes are identical, and the same machine state results at the same index.
- durability: every command acknowledged to a client is the entry committed at its index, and
  it is applied by every member by the end of the liveness phase.
"""
from __future__ import annotations

from dataclasses import dataclass, field


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

    def final(self, now: int, applied: dict[str, int]) -> None:
        """After the liveness phase: every member has applied every acknowledged command."""
        for op_id, (index, term) in sorted(self.acked.items()):
            if self.committed.get(index, (None,))[0] != term:
                self.violation(now, f"acked op {op_id} at ({index}, {term}) was lost")
            for node, upto in sorted(applied.items()):
                if upto < index:
                    self.violation(now, f"{node} applied only {upto} < acked op {op_id} at {index}")
                    break
