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
- a connection alone reads what its `ReadBudget` allows: about `MESSAGES_PER_READ` of the commands
  it has been sending, within [`shared_bytes`, `solo_bytes`]. The work a read causes downstream is
  per message, not per byte: each read becomes one batch for the queue, which takes it whole
  before the grants and acks of its consumers. A 256 KiB read of 1 KiB publishes was a batch of
  ~240 that held a durable queue for ~3.4 ms; batches of ~120 let the consumers' round trips in
  between (measured: 1 KiB with confirms and prefetch 300, +9 % received, -14 % p50), while 16 KiB
  publishes keep 256 KiB reads (only ~16 messages each; halving them cost ~15 % there).

Time is the shell's clock in seconds, passed in. Each call costs O(1) whatever the number of
connections: `ReadShare` remembers the most recent reader and the most recent read by any other,
and that is all the decision needs; each connection keeps its own `ReadBudget`.
"""
from __future__ import annotations

from collections.abc import Hashable

SOLO_BYTES = 256 * 1024  # asyncio's own read size: the most a connection alone reads
SHARED_BYTES = 32 * 1024
WINDOW_S = 0.1
MESSAGES_PER_READ = 128


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

    def size(self, reader: Hashable, now: float, alone: int | None = None) -> int:
        """How many bytes `reader` may read now; `alone`: what it reads while no other connection
        sends (its `ReadBudget`; `solo_bytes` when not given)."""
        others_at = self._last_at if reader != self._last else self._other_at
        if now - others_at < self.window_s:
            return self.shared_bytes
        return self.solo_bytes if alone is None else alone

    def read(self, reader: Hashable, now: float) -> None:
        """`reader` received data at `now`."""
        if reader != self._last:
            self._other_at = self._last_at
            self._last = reader
        self._last_at = now


class ReadBudget:
    """One connection's read size while it is alone: `messages` of the commands it has been
    sending, by a moving average of their size in bytes (see the module docstring)."""

    __slots__ = ("messages", "min_bytes", "max_bytes", "bytes_per_command")

    def __init__(self, messages: int = MESSAGES_PER_READ, min_bytes: int = SHARED_BYTES,
                 max_bytes: int = SOLO_BYTES) -> None:
        assert messages > 0 and 0 < min_bytes <= max_bytes
        self.messages = messages
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.bytes_per_command = max_bytes / messages  # nothing seen yet: whole reads

    def read(self, nbytes: int, commands: int) -> None:
        """A read of `nbytes` completed `commands` commands (0: part of a large one; not counted)."""
        if commands:
            self.bytes_per_command += (nbytes / commands - self.bytes_per_command) / 4

    def size(self) -> int:
        return min(self.max_bytes, max(self.min_bytes, int(self.bytes_per_command * self.messages)))
