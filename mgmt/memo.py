"""The rows of the long listings (queues, exchanges), kept while what they show is unchanged.

Theory of operation: `/api/queues` on a node with 10,000 queues is 10,000 rows of some 45 fields
(~14 MB of JSON); shaping and encoding each row from scratch cost ~0.3 ms, and the node host's
event loop stood still for the seconds that took. Most queues of such a node are idle, and an idle
queue's row is the same from one sample to the next. So every row is kept, encoded (rows.py), with
what it was made from: the registry record (compared by identity: the registry replaces a record
when it changes), the sample's row for the object, the sample's time, and whether its rates were
all zero. A row is made again when its record or its sample row changed, or when a new sample came
and the row shows, or should now show, a non-zero rate (rates change with every sample). A
queue's policy (the costliest field: a regex match per policy) is kept with its row and recomputed
only with the record. Every row depends on the policies, so a change to any policy (seen by
identity, once per request in `begin`) clears the memo; `prune` drops the rows of deleted objects
once the memo holds more rows than the registry has objects.

The first listing after a sample still makes the rows of busy objects; `reads.prepare` lets the
shell make them a slice at a time, so a listing never holds the loop for long.

Nothing here reads a clock or does IO; memory is one row and its JSON per listed object.
"""
from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from mgmt import shapes
from mgmt.rows import Row


@dataclass(slots=True)
class _Kept:
    rec: Any         # the registry record the row was made from
    source: Any      # the sample's row (or counts) for the object, None if it had none
    at_ms: int       # the time of the (latest) sample the row is known to show
    still: bool      # every rate was 0.0
    policy: Any      # the object's policy, as the registry gave it for `rec`
    row: Row


class RowMemo:
    def __init__(self) -> None:
        self._queues: dict[tuple[str, str], _Kept] = {}
        self._exchanges: dict[tuple[str, str], _Kept] = {}
        self._policies: tuple = ()

    def begin(self, registry: Any) -> None:
        """Once per request, before any row: forget everything if a policy changed."""
        policies = tuple(registry.policies())
        if len(policies) != len(self._policies) or any(a is not b for a, b in zip(policies, self._policies)):
            self._queues.clear()
            self._exchanges.clear()
            self._policies = policies

    def prune(self, queues: list, exchanges: list) -> None:
        """Forget the rows of deleted objects, given every queue and exchange there is."""
        self._queues = _pruned(self._queues, queues)
        self._exchanges = _pruned(self._exchanges, exchanges)

    def queue(self, view: shapes.View, rec: Any) -> Row:
        key = (rec.vhost, rec.name)
        kept, source = self._queues.get(key), view.sample.queues.get(key)
        if kept is not None and kept.rec is rec and self._current(kept, source, view, ("queue", *key)):
            return kept.row
        policy = kept.policy if kept is not None and kept.rec is rec else view.registry.queue_policy(rec)
        return self._keep(self._queues, key, rec, source, view, ("queue", *key), policy,
                          shapes.queue(view, rec, policy=policy))

    def exchange(self, view: shapes.View, rec: Any) -> Row:
        key = (rec.vhost, rec.name)
        kept, source = self._exchanges.get(key), view.sample.exchanges.get(key)
        if kept is not None and kept.rec is rec and self._current(kept, source, view, ("exchange", *key)):
            return kept.row
        policy = kept.policy if kept is not None and kept.rec is rec else \
            view.registry.exchange_policy_name(rec.vhost, rec.name)
        return self._keep(self._exchanges, key, rec, source, view, ("exchange", *key), policy,
                          shapes.exchange(view, rec, policy=policy))

    @staticmethod
    def _current(kept: _Kept, source: Any, view: shapes.View, rates_key: Hashable) -> bool:
        """Whether the kept row (of the same record) still shows what the view would; a row found
        so in a newer sample is kept as that sample's (the next look is two identity checks)."""
        at_ms = view.sample.at_ms
        if kept.source is source and kept.at_ms == at_ms:
            return True
        if kept.source != source or not (kept.at_ms == at_ms or (kept.still and view.rates.still(rates_key))):
            return False
        kept.source, kept.at_ms = source, at_ms
        return True

    @staticmethod
    def _keep(table: dict, key: tuple[str, str], rec: Any, source: Any, view: shapes.View, rates_key: Hashable,
              policy: Any, value: dict) -> Row:
        row = Row.of(value)
        table[key] = _Kept(rec, source, view.sample.at_ms, view.rates.still(rates_key), policy, row)
        return row


def _pruned(table: dict[tuple[str, str], _Kept], records: list) -> dict[tuple[str, str], _Kept]:
    if len(table) <= len(records):
        return table
    live = {(r.vhost, r.name) for r in records}
    return {key: kept for key, kept in table.items() if key in live}
