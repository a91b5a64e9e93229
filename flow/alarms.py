"""A node's memory and disk alarms, as RabbitMQ's vm_memory_monitor and rabbit_disk_monitor decide them.

Theory of operation
-------------------
Each monitor is told a measurement at the interval it asked for and returns effects: a `Log` with
RabbitMQ's text and an `AlarmSet` / `AlarmCleared` when its alarm changes, then the `StartTimer`
for its next check (milliseconds). What an alarm does to connections is flow/blocking.py's.

Memory (vm_memory_monitor). The limit is `RelativeLimit(f)`: trunc(f x total RAM), f above 1.0
taken as 1.0; or `AbsoluteLimit(size)`: the size in bytes (flow/units.py), at most the total RAM.
A size the broker cannot read is logged and the default, 0.4 of RAM, applies. The alarm is set
while used > limit and cleared once used <= limit: no hysteresis, as RabbitMQ (paging, below the
limit, has its own, flow/paging.py). A limit of 0 therefore blocks every publisher at the first
check. Checked every `MEMORY_CHECK_INTERVAL_MS`, and at once when the limit changes.

Disk (rabbit_disk_monitor). The limit is `AbsoluteLimit(size)` (default 50 MB, and the default
again for a size that does not parse) or `RelativeLimit(f)`: f x total RAM, rounded. The alarm is
set while free < limit. The next check is due in 2 x (free - limit) / 250 MB/s, the time a disk
filling at that rate takes to use half the margin, clamped to 100 ms .. 10 s; while the alarm is in
force, or when free space could not be read, in 10 s.

Invariants: `alarmed` is true exactly after a check that saw the resource over its limit; an
`AlarmSet` and an `AlarmCleared` alternate, starting with a set.

Left out: RabbitMQ's 32-bit address-space cap (a 64-bit node's, 256 TB, is above any RAM), its
1 GiB guess for a RAM size the OS does not give, and its retries when the disk cannot be read at
start (the shell reports a failed read as `None`: the alarm stays as it was, RabbitMQ's compare of
'NaN' would clear it).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from effects import AlarmCleared, AlarmSet, Log, StartTimer
from flow.units import UnitError, parse_information_unit

MEMORY = "memory"
DISK = "disk"
MEMORY_CHECK_TIMER = "memory_check"
DISK_CHECK_TIMER = "disk_check"

MEMORY_CHECK_INTERVAL_MS = 1000
DEFAULT_MEMORY_WATERMARK = 0.4
MAX_MEMORY_WATERMARK = 1.0
DEFAULT_DISK_FREE_LIMIT_BYTES = 50_000_000
DISK_MIN_CHECK_INTERVAL_MS = 100
DISK_MAX_CHECK_INTERVAL_MS = 10_000
DISK_FAST_RATE_BYTES_PER_MS = 250_000  # 250 MB/s: how fast RabbitMQ assumes a disk can fill
MIB = 1024 * 1024

AlarmEffect = Log | AlarmSet | AlarmCleared | StartTimer


@dataclass(frozen=True, slots=True)
class RelativeLimit:
    """A fraction (memory) or multiple (disk) of the total RAM."""

    fraction: float


@dataclass(frozen=True, slots=True)
class AbsoluteLimit:
    """Bytes, or a size with a unit that the broker reads (flow/units.py) and may fail to."""

    size: int | str


Limit = RelativeLimit | AbsoluteLimit


def _erlang_term(value: int | str) -> str:
    """How RabbitMQ's `~tp` prints a configured size: an integer bare, a string quoted."""
    return str(value) if isinstance(value, int) else f'"{value}"'


def memory_limit_bytes(limit: Limit, total_bytes: int) -> tuple[int, list[Log]]:
    """vm_memory_monitor's limit for `limit` on a machine with `total_bytes` of RAM, and what it logs."""
    logs: list[Log] = []
    if isinstance(limit, AbsoluteLimit):
        try:
            return min(parse_information_unit(limit.size), total_bytes), logs
        except UnitError:
            logs.append(Log(f"Unable to parse vm_memory_high_watermark value {_erlang_term(limit.size)}", "error"))
            limit = RelativeLimit(DEFAULT_MEMORY_WATERMARK)
    fraction = limit.fraction
    if fraction > MAX_MEMORY_WATERMARK:
        logs.append(Log(f"Memory high watermark of {fraction} is above the allowed maximum, falling back to "
                        f"{MAX_MEMORY_WATERMARK}", "warning"))
        fraction = MAX_MEMORY_WATERMARK
    return math.trunc(fraction * total_bytes), logs


def disk_limit_bytes(limit: Limit, total_memory_bytes: int) -> tuple[int, list[Log]]:
    """rabbit_disk_monitor's limit in bytes, and what it logs."""
    if isinstance(limit, RelativeLimit):
        scaled = limit.fraction * total_memory_bytes
        return int(math.copysign(math.floor(abs(scaled) + 0.5), scaled)), []  # Erlang's round: half away from 0
    try:
        return parse_information_unit(limit.size), []
    except UnitError:
        return DEFAULT_DISK_FREE_LIMIT_BYTES, [Log(f"Unable to parse disk_free_limit value {_erlang_term(limit.size)}",
                                                   "error")]


def disk_check_interval_ms(free_bytes: int | None, limit_bytes: int, alarmed: bool, *,
                           min_ms: int = DISK_MIN_CHECK_INTERVAL_MS, max_ms: int = DISK_MAX_CHECK_INTERVAL_MS) -> int:
    """When rabbit_disk_monitor looks again (see the module docstring)."""
    if alarmed or free_bytes is None:
        return max_ms
    ideal_ms = 2 * (free_bytes - limit_bytes) / DISK_FAST_RATE_BYTES_PER_MS
    return math.trunc(max(min_ms, min(max_ms, ideal_ms)))


def _change(was: bool, alarmed: bool, resource: str, node: str, text: str) -> list[AlarmEffect]:
    """The log line and the alarm effect of a check that changed the alarm; nothing otherwise."""
    if alarmed == was:
        return []
    return [Log(text), (AlarmSet if alarmed else AlarmCleared)(resource, node)]


class MemoryAlarm:
    """One node's memory alarm (vm_memory_monitor). `start` once, `check` when its timer fires,
    `configure` when the limit changes at run time (rabbitmqctl set_vm_memory_high_watermark)."""

    __slots__ = ("node", "limit_bytes", "alarmed", "used_bytes")

    def __init__(self, node: str) -> None:
        self.node = node
        self.limit_bytes = 0
        self.alarmed = False
        self.used_bytes = 0  # at the last check

    def start(self, limit: Limit, total_bytes: int, used_bytes: int) -> list[AlarmEffect]:
        return [*self.configure(limit, total_bytes, used_bytes),
                StartTimer(MEMORY_CHECK_TIMER, MEMORY_CHECK_INTERVAL_MS)]

    def configure(self, limit: Limit, total_bytes: int, used_bytes: int) -> list[AlarmEffect]:
        self.limit_bytes, out = memory_limit_bytes(limit, total_bytes)
        lim = self.limit_bytes
        out.append(Log(f"Memory high watermark set to {math.trunc(lim / MIB)} MiB ({lim} bytes) of "
                       f"{math.trunc(total_bytes / MIB)} MiB ({total_bytes} bytes) total"))
        return [*out, *self._update(used_bytes)]

    def check(self, used_bytes: int) -> list[AlarmEffect]:
        return [*self._update(used_bytes), StartTimer(MEMORY_CHECK_TIMER, MEMORY_CHECK_INTERVAL_MS)]

    def _update(self, used_bytes: int) -> list[AlarmEffect]:
        self.used_bytes = used_bytes
        alarmed = used_bytes > self.limit_bytes
        word = "set" if alarmed else "clear"
        out = _change(self.alarmed, alarmed, MEMORY, self.node,
                      f"vm_memory_high_watermark {word}. Memory used:{used_bytes} allowed:{self.limit_bytes}")
        self.alarmed = alarmed
        return out


class DiskAlarm:
    """One node's free disk space alarm (rabbit_disk_monitor), on its data dir's filesystem. `start`
    once, `check` when its timer fires, `configure` for rabbitmqctl set_disk_free_limit. A free
    space of None means it could not be read."""

    __slots__ = ("node", "limit_bytes", "alarmed", "free_bytes", "min_interval_ms", "max_interval_ms")

    def __init__(self, node: str, *, min_interval_ms: int = DISK_MIN_CHECK_INTERVAL_MS,
                 max_interval_ms: int = DISK_MAX_CHECK_INTERVAL_MS) -> None:
        assert 0 < min_interval_ms <= max_interval_ms, (min_interval_ms, max_interval_ms)
        self.node = node
        self.limit_bytes = DEFAULT_DISK_FREE_LIMIT_BYTES
        self.alarmed = False
        self.free_bytes: int | None = None
        self.min_interval_ms = min_interval_ms  # RabbitMQ's set_min_check_interval / set_max_check_interval
        self.max_interval_ms = max_interval_ms

    def start(self, limit: Limit, total_memory_bytes: int, free_bytes: int | None) -> list[AlarmEffect]:
        """The first check. RabbitMQ logs "Enabling" once it could read the disk; when it cannot,
        the limit still applies from the first check that can."""
        enabling = [] if free_bytes is None else [Log(f"Enabling free disk space monitoring (disk free space: "
                                                      f"{free_bytes}, total memory: {total_memory_bytes})")]
        return [*enabling, *self.configure(limit, total_memory_bytes, free_bytes), self._next_check()]

    def configure(self, limit: Limit, total_memory_bytes: int, free_bytes: int | None) -> list[AlarmEffect]:
        self.limit_bytes, out = disk_limit_bytes(limit, total_memory_bytes)
        out.append(Log(f"Disk free limit set to {math.trunc(self.limit_bytes / 1_000_000)}MB"))
        return [*out, *self._update(free_bytes)]

    def check(self, free_bytes: int | None) -> list[AlarmEffect]:
        return [*self._update(free_bytes), self._next_check()]

    def _next_check(self) -> StartTimer:
        return StartTimer(DISK_CHECK_TIMER, disk_check_interval_ms(self.free_bytes, self.limit_bytes, self.alarmed,
                                                                   min_ms=self.min_interval_ms,
                                                                   max_ms=self.max_interval_ms))

    def _update(self, free_bytes: int | None) -> list[AlarmEffect]:
        self.free_bytes = free_bytes
        if free_bytes is None:
            return []
        alarmed = free_bytes < self.limit_bytes
        word = "insufficient" if alarmed else "sufficient"
        out = _change(self.alarmed, alarmed, DISK, self.node,
                      f"Free disk space is {word}. Free bytes: {free_bytes}. Limit: {self.limit_bytes}")
        self.alarmed = alarmed
        return out
