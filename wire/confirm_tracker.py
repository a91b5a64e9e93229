"""Publisher-confirm bookkeeping for one channel, on the client's side: the perf tool's producers
(bench/perf/) and the pipeline's publisher (pipeline/publisher.py) count with it. (The broker's
side is actors/channel/confirms.py.)

Theory of operation: publishes on a channel in confirm mode are numbered 1, 2, 3 ... ; the broker
settles them with basic.ack / basic.nack, each for one sequence number or (multiple=true) for every
unsettled one up to it.  Settlements may arrive out of order, so the tracker keeps `low` (every
number below it is settled) and the set of numbers above `low` already settled.  `settle` returns how
many publishes the frame settled, which the producer adds to its acked or nacked count.
Invariants: low <= published + 1; every member of `ahead` is in (low, published]; the settled
count (low - 1 + len(ahead)) + `outstanding` == published.  A duplicate or unknown tag settles
nothing.
"""

from __future__ import annotations


class ConfirmTracker:
    def __init__(self) -> None:
        self.published = 0
        self.low = 1
        self.ahead: set[int] = set()

    def publish(self, n: int) -> None:
        self.published += n

    @property
    def outstanding(self) -> int:
        return self.published - (self.low - 1) - len(self.ahead)

    def settle(self, tag: int, multiple: bool) -> int:
        if tag > self.published or tag < self.low:
            return 0
        if multiple:
            settled = tag - self.low + 1
            if self.ahead:
                below = {t for t in self.ahead if t <= tag}
                settled -= len(below)
                self.ahead -= below
            self.low = tag + 1
        elif tag == self.low:
            settled = 1
            self.low += 1
        elif tag in self.ahead:
            return 0
        else:
            self.ahead.add(tag)
            return 1
        while self.low in self.ahead:
            self.ahead.remove(self.low)
            self.low += 1
        return settled
