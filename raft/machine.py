"""The replicated state machine interface (rabbit_fifo's shape).

`apply(meta, command, state) -> (state, reply, effects)` runs on every member for each
committed user entry in log order; it must be deterministic and must not mutate `state` in
place if the caller keeps old states (the simulator compares them). `snapshot(state)` returns
a plain msgpack-able value and `restore(value)` rebuilds the state. `live_indexes(state)`
(optional) names the log indexes the state still refers to; the log is never compacted at or
above the lowest of them.
"""
from __future__ import annotations

from typing import Any, Iterable, NamedTuple, Protocol


class ApplyMeta(NamedTuple):
    index: int
    term: int


class Machine(Protocol):
    def init(self) -> Any: ...

    def apply(self, meta: ApplyMeta, command: bytes, state: Any) -> tuple[Any, Any, list]: ...

    def snapshot(self, state: Any) -> Any: ...

    def restore(self, value: Any) -> Any: ...


def live_indexes(machine: Machine, state: Any) -> Iterable[int]:
    hook = getattr(machine, "live_indexes", None)
    return hook(state) if hook else ()
