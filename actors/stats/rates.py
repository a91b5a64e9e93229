"""Rates over the sample interval, as the management plugin shows them (`*_details.rate`).

Theory of operation: the node samples every host every `collect_statistics_interval` ms
(RabbitMQ's 5000). Each sample gives, per object (a queue, a channel, the node), counters that only
grow and gauges (queue depths). `Rates.observe(now_ms, values)` keeps the last two samples of every
object; the rate of a value is its change between them divided by the time between them, in units
per second, so a counter's rate is messages/s and a gauge's rate is how fast it grows (negative when
it shrinks), as RabbitMQ's `messages_details.rate`. An object seen once has rate 0.0; an object
missing from a sample is forgotten (it was deleted), so memory is two samples of what exists.
`update(now_ms, changed, gone)` takes a sample that names only the objects that may have changed
(the hosts report queues as changes, actors/stats/deltas.py): the others are as they were, so
their rates are 0.0 without a new entry, and a sample costs the changed objects, not all of them.
Time is an input (ticks in ms); nothing here reads a clock.

Left out: RabbitMQ's longer histories (`?lengths_age=`, `samples`), averages over them.
"""
from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping

Values = Mapping[str, int | float]


class Rates:
    """The last two samples of every object, and the rates between them."""

    def __init__(self) -> None:
        self._prev: dict[Hashable, tuple[int, Values]] = {}
        self._cur: dict[Hashable, tuple[int, Values]] = {}
        self._at: int | None = None  # the latest sample's time

    def observe(self, now_ms: int, samples: Mapping[Hashable, Values]) -> None:
        """A new sample of every object that exists now."""
        cur = self._cur
        self._prev = {key: cur[key] for key in samples if key in cur}
        self._cur = {key: (now_ms, values) for key, values in samples.items()}
        self._at = now_ms

    def update(self, now_ms: int, changed: Mapping[Hashable, Values], gone: Iterable[Hashable] = ()) -> None:
        """A new sample naming only the objects that may have changed since the last one; the
        others are as they were; `gone` no longer exist."""
        prev, cur = dict(self._prev), dict(self._cur)  # new tables: a frozen copy keeps the old ones
        for key in gone:
            prev.pop(key, None)
            cur.pop(key, None)
        for key, values in changed.items():
            last = cur.get(key)
            if last is not None:
                prev[key] = last
            else:
                prev.pop(key, None)
            cur[key] = (now_ms, values)
        self._prev, self._cur, self._at = prev, cur, now_ms

    def frozen(self) -> Rates:
        """These rates as they are now, for a request that spans loop turns: `observe` and
        `update` replace the tables and never change them, so the copy shares them as they are."""
        copy = Rates()
        copy._prev, copy._cur, copy._at = self._prev, self._cur, self._at
        return copy

    def still(self, key: Hashable) -> bool:
        """Whether every rate of `key` is 0.0: its latest sample equals the one before, or it
        has only one (or none), or it did not change in the latest sample."""
        cur = self._cur.get(key)
        prev = self._prev.get(key)
        return cur is None or prev is None or prev[0] >= cur[0] or prev[1] == cur[1] or cur[0] != self._at

    def rates(self, key: Hashable) -> dict[str, float]:
        """Per second, for every value of `key`'s latest sample (0.0 without an earlier one, and
        for an object that did not change in the latest sample)."""
        cur = self._cur.get(key)
        if cur is None:
            return {}
        at, values = cur
        prev = self._prev.get(key)
        if prev is None or prev[0] >= at or at != self._at:
            return {name: 0.0 for name in values}
        before, old = prev
        if old == values:  # an idle object (most of them): no arithmetic
            return dict.fromkeys(values, 0.0)
        seconds = (at - before) / 1000
        return {name: round((value - old.get(name, 0)) / seconds, 2) for name, value in values.items()}


def with_details(values: Mapping[str, int | float], rates: Mapping[str, float]) -> dict:
    """RabbitMQ's pairs: `name` and `name_details: {"rate": r}` for every value (a rate of 0.0
    shares one details dict: most objects are idle, and the management memo keeps their rows)."""
    out: dict = {}
    for name, value in values.items():
        out[name] = value
        rate = rates.get(name, 0.0)
        out[f"{name}_details"] = {"rate": rate} if rate else _STILL
    return out


_STILL = {"rate": 0.0}  # never changed: shapes copy, never mutate, what they are given
