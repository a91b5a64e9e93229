"""The checker: a total-queue check of a run's history, as RabbitMQ's Jepsen test makes (pure).

Theory of operation: after the nemesis is done, everything healed and every queue drained, each
message id the publishers saw confirmed must have been consumed at least once (`lost`: confirmed
and never consumed, must be empty), and nothing may be consumed that no publisher published
(`unexpected`, must be empty). Duplicates (an id delivered more than once: redeliveries after a
lost ack, a consumer cancelled mid-flight) are allowed and counted. Messages whose publish was
nacked or timed out may or may not have made it; those that did are counted, not judged.
Availability is the confirms per second inside each fault window (and outside them all, the
baseline), from the confirm times the publishers recorded.
"""
from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass, field

from tests.faults.workload import History


@dataclass(frozen=True)
class Ran:
    """A fault window as it ran: when its faults struck and when they were lifted (history time)."""

    nemesis: str
    what: str
    start_s: float
    end_s: float


@dataclass(frozen=True)
class WindowFigures:
    nemesis: str
    what: str
    start_s: float
    end_s: float
    confirms: int

    @property
    def rate(self) -> float:
        return self.confirms / max(self.end_s - self.start_s, 1e-9)


@dataclass
class Result:
    published: int
    confirmed: int
    nacked: int
    indeterminate: int
    consumed: int                  # distinct ids consumed (workload and drain)
    deliveries: int                # every delivery, duplicates included
    duplicates: int                # deliveries beyond the first of an id
    lost: list[str]
    unexpected: list[str]
    unconfirmed_consumed: int      # nacked or indeterminate, and consumed all the same
    windows: list[WindowFigures] = field(default_factory=list)
    baseline_rate: float = 0.0     # confirms/s outside every fault window

    @property
    def ok(self) -> bool:
        return not self.lost and not self.unexpected

    def availability(self) -> dict[str, float]:
        """Confirms/s per nemesis, over all its windows together."""
        out: dict[str, float] = {}
        for nemesis in dict.fromkeys(w.nemesis for w in self.windows):
            mine = [w for w in self.windows if w.nemesis == nemesis]
            out[nemesis] = sum(w.confirms for w in mine) / max(sum(w.end_s - w.start_s for w in mine), 1e-9)
        return out


def check(history: History, ran: list[Ran], end_s: float) -> Result:
    """`ran`: the fault windows as they ran; `end_s`: when the publishers stopped (history time)."""
    counts = Counter(mid for mid, _ in history.consumed)
    counts.update(history.drained)
    consumed = set(counts)
    confirmed = set(history.confirmed)
    unconfirmed = (history.nacked | history.indeterminate) - confirmed
    times = sorted(history.confirmed.values())
    windows = [WindowFigures(w.nemesis, w.what, w.start_s, w.end_s, _between(times, w.start_s, w.end_s)) for w in ran]
    inside = sum(w.confirms for w in windows)
    inside_s = sum(w.end_s - w.start_s for w in windows)
    outside_s = max(end_s - inside_s, 1e-9)
    return Result(
        published=len(history.published), confirmed=len(confirmed), nacked=len(history.nacked - confirmed),
        indeterminate=len(history.indeterminate - confirmed - history.nacked), consumed=len(consumed),
        deliveries=sum(counts.values()), duplicates=sum(n - 1 for n in counts.values()),
        lost=sorted(confirmed - consumed), unexpected=sorted(consumed - set(history.published)),
        unconfirmed_consumed=len(unconfirmed & consumed), windows=windows,
        baseline_rate=(_between(times, 0.0, end_s) - inside) / outside_s)


def _between(times: list[float], start: float, end: float) -> int:
    return bisect_left(times, end) - bisect_left(times, start)
