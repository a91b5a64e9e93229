"""Read slices: how many bytes one connection may read from its socket in one go.

Theory of operation: a connection host runs the readers of all its connections on one event
loop, and a read is processed whole before anything else runs (asyncio does not preempt). A
publisher that reads 256 KiB at a time holds the loop for about 250 messages per turn. A consumer
on the same host needs several turns for each round trip of its prefetch window (deliver, ack,
settle). So the publisher takes most of the host and the queue grows without bound, with latency
in seconds. BEAM avoids this by preempting a process after a budget of reductions, and this is
that budget for reads:
- while another connection of the host has sent data within the last `window_s`, a read is
  capped at `shared_bytes`;
- a connection alone reads up to `solo_bytes`: fewer, larger turns, which is what a lone
  publisher (or a publisher beside an auto-ack consumer, which sends nothing) runs fastest with.

Time is the shell's clock in seconds, passed in. Each call costs O(1) whatever the number of
connections: it remembers the most recent reader and the most recent read by any other, and that
is all the decision needs.
"""
from __future__ import annotations

from collections.abc import Hashable

SOLO_BYTES = 256 * 1024  # asyncio's own read size
SHARED_BYTES = 32 * 1024
WINDOW_S = 0.1


class ReadShare:
    """One connection host's read budget (see the module docstring)."""

    __slots__ = ("solo_bytes", "shared_bytes", "window_s", "_last", "_last_at", "_other_at")

    def __init__(self, solo_bytes: int = SOLO_BYTES, shared_bytes: int = SHARED_BYTES,
                 window_s: float = WINDOW_S) -> None:
        assert 0 < shared_bytes <= solo_bytes
        self.solo_bytes = solo_bytes
        self.shared_bytes = shared_bytes
        self.window_s = window_s
        self._last: Hashable | None = None  # the reader that read most recently
        self._last_at = float("-inf")
        self._other_at = float("-inf")  # the most recent read by a reader other than `_last`

    def size(self, reader: Hashable, now: float) -> int:
        """How many bytes `reader` may read now."""
        others_at = self._last_at if reader != self._last else self._other_at
        return self.shared_bytes if now - others_at < self.window_s else self.solo_bytes

    def read(self, reader: Hashable, now: float) -> None:
        """`reader` received data at `now`."""
        if reader != self._last:
            self._other_at = self._last_at
            self._last = reader
        self._last_at = now
