"""Fixed-rate pacing for a producer.

Theory of operation: a producer asked for `rate` messages a second should, `elapsed_ns` after it
started, have sent rate * elapsed_ns / 1e9 messages; `due(elapsed_ns, sent)` is how many it may send
now to catch up, capped by `burst_max` so a stall (GC, blocked connection) is repaid in bursts of
bounded size rather than one flood.  Rate 0 means flat out and is never paced.  Time is an input, so this is a pure function.
"""

from __future__ import annotations

NS_PER_S = 1_000_000_000


def due(rate: float, elapsed_ns: int, sent: int, burst_max: int) -> int:
    assert rate > 0 and burst_max > 0
    return max(0, min(burst_max, int(rate * elapsed_ns / NS_PER_S) - sent))


def wait_ns(rate: float, elapsed_ns: int, sent: int) -> int:
    """How long until the next message is due."""
    assert rate > 0
    next_at = (sent + 1) * NS_PER_S / rate
    return max(0, int(next_at - elapsed_ns))


def phase_at(phases: tuple[tuple[float, float], ...], elapsed_ns: int) -> tuple[float, int]:
    """(the rate, when its phase started) `elapsed_ns` into a run of (rate, seconds) phases; the
    last phase lasts to the end."""
    start = 0
    for rate, seconds in phases[:-1]:
        end = start + int(seconds * NS_PER_S)
        if elapsed_ns < end:
            return rate, start
        start = end
    return phases[-1][0], start
