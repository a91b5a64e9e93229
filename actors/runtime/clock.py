"""The two clocks the shells read, in milliseconds: the wall clock (stamped into commands and
messages, as TTLs and timestamps are wall-clock times) and the monotonic one (intervals: group
commits, flow states, timeouts). Cores take time as an argument; only shells call these."""
from __future__ import annotations

import time


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


def monotonic_ms() -> int:
    """Monotonic milliseconds (for intervals only)."""
    return time.monotonic_ns() // 1_000_000
