"""What a quorum queue's leader waits on before it can commit, as flow records (flow/state.py).

Theory of operation: a leading member confirms a publish only once the entry is committed, i.e.
written by its own WAL and acknowledged by enough followers. It is never out of credit towards
either (it does not send them messages on a credit link), so, like a classic queue waiting on its
store, it is *waiting* outside credit flow, and a slow WAL or a slow follower shows as time spent
waiting. After every input the member says what it still waits on (`observe(waiting, now)`,
computed by `commit_waits_on`): the key `WAL` while its log is not written up to its last entry,
and the followers a majority still needs. `CommitWait` keeps one FlowState for the member (waiting on anything) and one
per key, so `warrenctl flow` can show the member in flow (waiting most of the window, as
`waiting_state` reads it) and name what it waited on most: the persistence level of
flow/bottleneck.py ("wal" or "follower").

Time is ticks (milliseconds) passed in; a record changes only when what is waited on changes, so
an input that changes nothing costs one set comparison.
"""
from __future__ import annotations

from collections.abc import Hashable

from flow.state import FlowState

WAL = "wal"


def commit_waits_on(last: int, written: int, voters: frozenset[str], matches: dict[str, int]) -> frozenset[str]:
    """What the commit of a leader's `last` entry (not committed yet) waits on: `WAL` while the
    leader has not written it, and the followers closest to acknowledging it, as many as a
    majority still needs besides the leader (a follower lagging further is not what holds the
    commit back). `matches`: each follower's acknowledged index."""
    lagging = sorted(((match, m) for m, match in matches.items() if m in voters and match < last), reverse=True)
    acked = len(voters) - 1 - len(lagging)
    needed = len(voters) // 2 - acked  # a majority, less the leader, less those that have it
    waiting = [m for _match, m in lagging[:max(0, needed)]]
    if written < last:
        waiting.append(WAL)
    return frozenset(waiting)


class CommitWait:
    __slots__ = ("ticks_per_second", "started", "member", "on", "waiting")

    def __init__(self, now: int, ticks_per_second: int = 1000) -> None:
        self.ticks_per_second = ticks_per_second
        self.started = now
        self.member = FlowState(ticks_per_second, changed_at=now)
        self.on: dict[Hashable, FlowState] = {}
        self.waiting: frozenset[Hashable] = frozenset()

    def observe(self, waiting: frozenset[Hashable], now: int) -> None:
        """From tick `now` the member waits on exactly `waiting` (empty: everything committed)."""
        if waiting == self.waiting:
            return
        for key in waiting ^ self.waiting:
            record = self.on.get(key)
            if record is None:
                # its share counts from the member's start: a key first waited on late is not
                # shown as having been waited on all along
                record = FlowState(self.ticks_per_second, changed_at=now, started_at=self.started)
            self.on[key] = record.observe(key in waiting, max(now, record.changed_at))
        if bool(waiting) != bool(self.waiting):
            self.member = self.member.observe(bool(waiting), max(now, self.member.changed_at))
        self.waiting = waiting
