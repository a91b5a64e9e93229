"""The replicated state machine interface (rabbit_fifo's shape).

`apply(meta, command, state) -> (state, reply, effects)` runs on every member for each
committed user entry in log order; it must be deterministic: the same entries from the same
state give the same states, replies and effects on every member. `meta.machine_version` is the
version the log runs at that entry (versions.py): a machine whose rules changed between
versions applies the rules of that version, never those of the newest its code knows.
`apply` may update `state` in place and return it - a member keeps no old states, and the
quorum queue and metadata machines do so, because copying their state per entry would cost more
than the entry - or return a new state, which a caller that keeps old states needs (the
simulator's KvMachine in tests/sim); the core only ever uses the state `apply` returned.
`snapshot(state)` returns a plain msgpack-able value and `restore(value)` rebuilds the state.
Optional hooks: `live_indexes(state)` names the log indexes the state still refers to (the log
is never compacted at or above the lowest of them); `version()` the highest machine version the
code runs (1 without it); `upgrade(state, old, new)` converts the state where the log switches
versions; `replayed_effects(effects)` keeps, of the effects of an entry a restarted member applies
again (one its log held when it started: a leader before the restart may have carried them out
already, as ra's recovery drops the effects of what was applied before), those that are safe to
carry out twice (all of them without it).
"""
from __future__ import annotations

from typing import Any, Iterable, NamedTuple, Protocol


class ApplyMeta(NamedTuple):
    index: int
    term: int
    machine_version: int = 1


class Machine(Protocol):
    def init(self) -> Any: ...

    def apply(self, meta: ApplyMeta, command: bytes, state: Any) -> tuple[Any, Any, list]: ...

    def snapshot(self, state: Any) -> Any: ...

    def restore(self, value: Any) -> Any: ...


def replayed_effects(machine: Machine, effects: list) -> list:
    hook = getattr(machine, "replayed_effects", None)
    return hook(effects) if hook else effects


def live_indexes(machine: Machine, state: Any) -> Iterable[int]:
    hook = getattr(machine, "live_indexes", None)
    return hook(state) if hook else ()
