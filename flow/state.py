"""The flow state of one actor as RabbitMQ reports it: running, flow or blocked.

Theory of operation
-------------------
RabbitMQ's credit_flow:state/0 says `flow` while a process is blocked on credit *and* for one
second after it was last blocked, so that a process flapping in and out of credit is visible to
a person polling the management UI. `blocked` is stronger: the actor was stopped on purpose (a
memory or disk alarm blocks publishing connections). Otherwise it is `running`.

A `FlowState` is an immutable record; `observe(blocked, now)` and `alarm(on, now)` return the next
record. Time is ticks supplied by the shell (`ticks_per_second` says how many make a second), so
the record is deterministic and testable without a clock.

Invariants: `changed_at` only moves forward; `last_blocked_at` is set whenever credit-blocked is
observed and never cleared (it ages out of the flow window instead).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

State = Literal["running", "flow", "blocked"]


@dataclass(frozen=True, slots=True)
class FlowState:
    ticks_per_second: int = 1000
    credit_blocked: bool = False
    alarm_blocked: bool = False
    changed_at: int = 0
    last_blocked_at: int | None = None

    def observe(self, blocked: bool, now: int) -> FlowState:
        """The ledger's `blocked()` as seen at tick `now`."""
        assert now >= self.changed_at, (now, self.changed_at)
        if blocked:
            if self.credit_blocked:
                return replace(self, last_blocked_at=now)
            return replace(self, credit_blocked=True, changed_at=now, last_blocked_at=now)
        if not self.credit_blocked:
            return self
        # leaving blocked: the flow window starts now
        return replace(self, credit_blocked=False, changed_at=now, last_blocked_at=now)

    def alarm(self, on: bool, now: int) -> FlowState:
        """A resource alarm blocks (or releases) this actor on purpose."""
        assert now >= self.changed_at, (now, self.changed_at)
        if on == self.alarm_blocked:
            return self
        return replace(self, alarm_blocked=on, changed_at=now)

    def state(self, now: int) -> State:
        if self.alarm_blocked:
            return "blocked"
        if self.credit_blocked:
            return "flow"
        if self.last_blocked_at is not None and now - self.last_blocked_at < self.ticks_per_second:
            return "flow"
        return "running"

    def as_dict(self, now: int) -> dict:
        """For warrenctl: the state now and the ticks it last changed / was last blocked."""
        return {
            "state": self.state(now),
            "credit_blocked": self.credit_blocked,
            "alarm_blocked": self.alarm_blocked,
            "changed_at": self.changed_at,
            "last_blocked_at": self.last_blocked_at,
            "since_change_s": (now - self.changed_at) / self.ticks_per_second,
        }
