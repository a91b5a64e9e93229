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

`flow_share(now)` says how much of the last `FLOW_WINDOW_S` seconds the actor spent blocked on
credit, a number an operator can compare between the links of a chain (`flow` alone only says
"at least once in the last second"). The window slides by buckets of 1/`FLOW_WINDOW_BUCKETS` of
it: it is the bucket `now` falls in and the whole buckets before it, so between 4.75 and 5 s with
the defaults, and never reaches back before the record was made (`started_at`). A blocked period
is added to the buckets when it ends; the one going on counts up to `now`. So a record holds at
most `FLOW_WINDOW_BUCKETS` counts whatever the rate of blocking, and each change costs O(buckets).

Waiting outside credit flow. A classic queue writes to its host's message store and index in its
own process: it is never out of credit towards them, it waits for their syncs (the group commit,
actors/queue/group_commit.py), and a slow disk shows as time spent so. The same record counts that
time (`observe(True)` when a sync starts, `observe(False)` when it ends), and `waiting_state` reads
it: `flow` while the actor spent at least `WAIT_SATURATED_SHARE` of the window waiting. A share, not
"waited in the last second" as for credit, because a queue under load waits for a sync in every
loop turn however fast its disk is; waiting most of the time is what makes the store the
bottleneck (flow/bottleneck.py).

Invariants: `changed_at` only moves forward; `last_blocked_at` is set whenever credit-blocked is
observed and never cleared (it ages out of the flow window instead); `blocked_since` is set
exactly while credit-blocked; `0 <= flow_share(now) <= 1`. Blocked by an alarm is not flow and
does not count in the share.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

State = Literal["running", "flow", "blocked"]

FLOW_WINDOW_S = 5
FLOW_WINDOW_BUCKETS = 20
WAIT_SATURATED_SHARE = 0.5


@dataclass(frozen=True, slots=True)
class FlowState:
    ticks_per_second: int = 1000
    credit_blocked: bool = False
    alarm_blocked: bool = False
    changed_at: int = 0
    last_blocked_at: int | None = None
    blocked_since: int | None = None
    started_at: int | None = None  # None: the record starts at `changed_at`
    history: tuple[tuple[int, int], ...] = ()  # (bucket, blocked ticks in it) of ended periods, oldest first

    def __post_init__(self) -> None:
        if self.started_at is None:
            object.__setattr__(self, "started_at", self.changed_at)

    def observe(self, blocked: bool, now: int) -> FlowState:
        """The ledger's `blocked()` as seen at tick `now`."""
        assert now >= self.changed_at, (now, self.changed_at)
        # records are built positionally: `dataclasses.replace` costs 2.5x as much, and a quorum
        # leader observes its commit waits a few times per message
        if blocked:
            if self.credit_blocked:
                return FlowState(self.ticks_per_second, True, self.alarm_blocked, self.changed_at, now,
                                 self.blocked_since, self.started_at, self.history)
            return FlowState(self.ticks_per_second, True, self.alarm_blocked, now, now, now, self.started_at,
                             self.history)
        if not self.credit_blocked:
            return self
        # leaving blocked: the flow window starts now
        since = self.blocked_since
        history = self.history if since == now else self._with_period(since, now)
        return FlowState(self.ticks_per_second, False, self.alarm_blocked, now, now, None, self.started_at, history)

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

    def flow_share(self, now: int) -> float:
        """The share of the window (see the module docstring) spent blocked on credit."""
        first = self._first_bucket(now)
        start = max(first * self._bucket_ticks(), self.started_at)
        if now <= start:
            return 0.0
        blocked = sum(ticks for bucket, ticks in self.history if bucket >= first)
        if self.blocked_since is not None:
            blocked += now - max(self.blocked_since, start)
        share = blocked / (now - start)
        assert 0.0 <= share <= 1.0, (share, self, now)
        return share

    def _bucket_ticks(self) -> int:
        return max(1, self.ticks_per_second * FLOW_WINDOW_S // FLOW_WINDOW_BUCKETS)

    def _first_bucket(self, now: int) -> int:
        return now // self._bucket_ticks() - (FLOW_WINDOW_BUCKETS - 1)

    def _with_period(self, start: int, end: int) -> tuple[tuple[int, int], ...]:
        """`history` with the blocked period [start, end) added, and what left the window dropped."""
        width = self._bucket_ticks()
        first = self._first_bucket(end)
        counts = {bucket: ticks for bucket, ticks in self.history if bucket >= first}
        t = max(start, first * width)
        while t < end:
            bucket = t // width
            upto = min(end, (bucket + 1) * width)
            counts[bucket] = counts.get(bucket, 0) + upto - t
            t = upto
        return tuple(sorted(counts.items()))

    def as_dict(self, now: int) -> dict:
        """For warrenctl: the state now, the ticks it last changed / was last blocked, the flow share."""
        return {
            "state": self.state(now),
            "credit_blocked": self.credit_blocked,
            "alarm_blocked": self.alarm_blocked,
            "changed_at": self.changed_at,
            "last_blocked_at": self.last_blocked_at,
            "since_change_s": (now - self.changed_at) / self.ticks_per_second,
            "flow_share": self.flow_share(now),
        }


def waiting_state(record: FlowState, now: int) -> State:
    """The state of an actor that waits outside credit flow (a queue on its store's syncs): see the
    module docstring."""
    return "flow" if record.flow_share(now) >= WAIT_SATURATED_SHARE else "running"
