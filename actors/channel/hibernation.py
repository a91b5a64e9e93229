"""When an idle channel hibernates, as rabbit_channel 3.10's gen_server2 backoff decides it.

Theory of operation: rabbit_channel starts with `{backoff, 1000, 1000, 10000}`
(?HIBERNATE_AFTER_MIN, ?DESIRED_HIBERNATE): after each message it waits for the next one for the
current timeout, initially 1000 ms, and if none comes it hibernates (forgetting its permission
caches, permissions.py). When a message wakes it, the timeout is adjusted from how long it slept
(gen_server2:adjust_timeout_state): if the gap between the last two messages (nap + timeout) was
longer than minimum + desired (11 s), base = max(minimum, timeout div 2), else base = timeout;
the new timeout is base + uniform(1..base). So a channel that is woken often stays awake longer
each time, and one left alone for long falls asleep sooner again.

Time is the channel's ticks (its core's `now`), the randomness its injected rng; the model only
answers `asleep_now(now)` once per sleep, on the first tick that finds the channel idle for longer
than its timeout (an input came somewhere within its tick, so the channel falls asleep between
the timeout and one tick after it, never before).
Any input - a client's command, a message from a queue or another actor - is `woke(now)`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import random

hibernate_after_min_ms = 1000  # ?HIBERNATE_AFTER_MIN
desired_hibernate_ms = 10000  # ?DESIRED_HIBERNATE


class Hibernation:
    __slots__ = ("_tick_ms", "_rng", "timeout_ms", "_last", "_slept_at")

    def __init__(self, ticks_per_second: int, rng: random.Random) -> None:
        self._tick_ms = 1000 / ticks_per_second
        self._rng = rng
        self.timeout_ms = hibernate_after_min_ms
        self._last = 0  # the tick of the last input
        self._slept_at: int | None = None  # the tick it fell asleep, while it sleeps

    def woke(self, now: int) -> None:
        slept_at = self._slept_at
        if slept_at is not None:
            self._slept_at = None
            gap_ms = (now - slept_at) * self._tick_ms + self.timeout_ms
            base = (max(hibernate_after_min_ms, self.timeout_ms // 2)
                    if gap_ms > hibernate_after_min_ms + desired_hibernate_ms else self.timeout_ms)
            self.timeout_ms = base + self._rng.randint(1, base)
        self._last = now

    def asleep_now(self, now: int) -> bool:
        """True on the tick the channel falls asleep (then not again until it has woken)."""
        if self._slept_at is not None or (now - self._last) * self._tick_ms <= self.timeout_ms:
            return False
        self._slept_at = now
        return True
