"""A simulated network: per-message delay (hence reordering), loss, duplication, partitions.

Everything random comes from the one `random.Random` the simulation was seeded with, so the
same seed delivers the same messages in the same order at the same ticks.
"""
from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field
from typing import Any


@dataclass
class NetFaults:
    loss: float = 0.05
    duplicate: float = 0.02
    max_delay_ticks: int = 3


@dataclass
class SimNetwork:
    rng: random.Random
    faults: NetFaults = field(default_factory=NetFaults)
    cut: set[frozenset[str]] = field(default_factory=set)   # pairs that cannot talk
    queue: list[tuple[int, int, str, str, Any]] = field(default_factory=list)
    seq: int = 0

    def send(self, now: int, src: str, dst: str, msg: Any) -> None:
        if self.rng.random() < self.faults.loss:
            return
        copies = 2 if self.rng.random() < self.faults.duplicate else 1
        for _ in range(copies):
            self.seq += 1
            at = now + self.rng.randint(1, self.faults.max_delay_ticks)
            heapq.heappush(self.queue, (at, self.seq, src, dst, msg))

    def due(self, now: int) -> list[tuple[str, str, Any]]:
        out = []
        while self.queue and self.queue[0][0] <= now:
            _, _, src, dst, msg = heapq.heappop(self.queue)
            if frozenset((src, dst)) not in self.cut:
                out.append((src, dst, msg))
        return out

    def partition(self, groups: list[set[str]]) -> None:
        self.cut = {frozenset((a, b)) for g in groups for h in groups if g is not h
                    for a in g for b in h}

    def heal(self) -> None:
        self.cut = set()
