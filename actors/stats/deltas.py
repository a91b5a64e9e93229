"""Which of a host's objects changed since a collector last asked: the reporters' side of the
management sampling, so that idle queues cost nothing per sample.

Theory of operation. The node's collector asks every host every `collect_statistics_interval`
(actors/stats/collector.py). A host with thousands of queues, nearly all idle, answered with a row
for each every time, and the node turned each row into rates: O(queues) of Python per sample on
every node, whatever the queues did (RabbitMQ's idle queues hibernate and emit no stats). Here an
object (a classic queue, a quorum queue member) is `touch`ed on every input of its actor, which
stamps it with the host's next version; a collector asks `since` the version of the last answer
it merged and gets the objects touched since, the keys `drop`ped since, and the version to ask
from next. Rows with fields that change with time alone are reported for `settle_ms` after their
last touch (a queue's flow share covers the last 5 s), and for as long as the reporter marks them
`unsettled` (a queue in flow). A collector asking with another epoch (this process restarted),
from before the oldest drop still kept, or for the first time gets everything (`full`). Drops are
kept for `drops_keep_ms` (and at most `drops_max` of them): long enough for every collector to
merge them, not for as long as the host lives.

Cost: O(1) per input, O(objects touched since) per answer; O(objects) for a collector's first.
"""
from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Hashable

SETTLE_MS = 10_000  # a flow share's 5 s window and a sample interval after it
DROPS_MAX = 65_536  # dropped keys remembered; a collector further behind gets a full answer
DROPS_KEEP_MS = 300_000  # and for this long: collectors ask every few seconds (60 at most, in practice)


class Changes:
    def __init__(self, epoch: str, settle_ms: int = SETTLE_MS, drops_max: int = DROPS_MAX,
                 drops_keep_ms: int = DROPS_KEEP_MS) -> None:
        self.epoch = epoch
        self.settle_ms = settle_ms
        self.drops_max = drops_max
        self.drops_keep_ms = drops_keep_ms
        self.version = 0
        self._touched: OrderedDict[Hashable, tuple[int, int]] = OrderedDict()  # key -> (version, at ms), oldest first
        self._unsettled: set[Hashable] = set()
        self._drops: deque[tuple[int, Hashable, int]] = deque()  # (version, key, at ms), oldest first
        self._floor = 0  # a collector that merged a version below this must be answered in full
        self._now_ms = 0  # the latest time a caller gave

    def touch(self, key: Hashable, now_ms: int) -> None:
        self._now_ms = now_ms
        self.version += 1
        touched = self._touched
        touched[key] = (self.version, now_ms)
        touched.move_to_end(key)

    def drop(self, key: Hashable, now_ms: int | None = None) -> None:
        """`key` is gone (its queue deleted); `now_ms` defaults to the latest time given."""
        if now_ms is not None:
            self._now_ms = now_ms
        self.version += 1
        self._touched.pop(key, None)
        self._unsettled.discard(key)
        self._drops.append((self.version, key, self._now_ms))
        if len(self._drops) > self.drops_max:
            self._floor = self._drops.popleft()[0]
        self._age(self._now_ms)

    def _age(self, now_ms: int) -> None:
        """Forget the drops older than `drops_keep_ms`: a host that deletes a queue every second
        kept all of them (up to `drops_max`, ~10 MiB) though its collectors had long merged them."""
        drops, oldest = self._drops, now_ms - self.drops_keep_ms
        while drops and drops[0][2] < oldest:
            self._floor = drops.popleft()[0]

    def unsettled(self, key: Hashable, unsettled: bool) -> None:
        """The reporter's word on the row it just built: report it again next time even if idle."""
        if unsettled:
            self._unsettled.add(key)
        else:
            self._unsettled.discard(key)

    def recent(self, now_ms: int) -> list[Hashable]:
        """The keys touched in the last `settle_ms`, and the unsettled ones."""
        keys: list[Hashable] = []
        settled_before = now_ms - self.settle_ms
        for key, (_, at_ms) in reversed(self._touched.items()):
            if at_ms < settled_before:
                break
            keys.append(key)
        recent = set(keys)
        return keys + [key for key in self._unsettled if key not in recent]

    def since(self, epoch: str, version: int, now_ms: int) -> tuple[bool, list[Hashable], list[Hashable]]:
        """(full, the keys to report, the keys dropped) for a collector that merged `version` of
        `epoch` (full: every object, the lists empty)."""
        self._age(now_ms)
        if epoch != self.epoch or version < self._floor or version > self.version:
            return True, [], []
        keys: list[Hashable] = []
        settled_before = now_ms - self.settle_ms
        for key, (touched, at_ms) in reversed(self._touched.items()):
            if touched <= version and at_ms < settled_before:
                break
            keys.append(key)
        if self._unsettled:
            recent = set(keys)
            keys += [key for key in self._unsettled if key not in recent]
        dropped = []
        for dropped_at, key, _ in reversed(self._drops):
            if dropped_at <= version:
                break
            dropped.append(key)
        return False, keys, dropped
