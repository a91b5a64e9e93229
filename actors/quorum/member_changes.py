"""A quorum queue member's part in membership changes asked by a node (`ChangeQueueMembers`,
`TransferQueueLeader`, actors/messages/quorum.py): the calls it holds until their Raft change
commits, and their deadlines.

Theory of operation. RaftCore changes one member at a time (raft/membership.py): a change asked
while another is uncommitted (a learner's promotion, say) is refused `change_in_progress`; this
table holds it and asks again at every tick until its deadline. An accepted change is answered when
its config entry commits; the call is answered with an error at its deadline in any case (no
majority, or leadership lost and its pending entries forgotten), so the node that asked never
waits for ever. A member that does not lead answers `NotQueueLeader` with the leader it knows, as
for any call. Pure: time comes in as milliseconds, answers go out as (to, message) pairs.
"""
from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from actors.messages.calls import Reply
from actors.messages.quorum import ChangeQueueMembers, NotQueueLeader
from wire.errors import INTERNAL_ERROR, AmqpError

DEADLINE_MS = 20_000  # under the node's metadata time-out (30 s), so the node hears why
TAG = "member-change"  # the first item of a change's Raft correlation

Out = list[tuple[str, Any]]


def timed_out(reason: str) -> AmqpError:
    return AmqpError(INTERNAL_ERROR, reason)


@dataclass
class MemberChanges:
    pending: dict[int, tuple[str, ChangeQueueMembers, int]] = field(default_factory=dict)  # key -> call
    held: list[int] = field(default_factory=list)  # keys refused change_in_progress: asked again
    _next: int = 0

    def ask(self, sender: str, msg: ChangeQueueMembers, now_ms: int) -> tuple[Hashable, ...]:
        """A new call; the Raft correlation its change is proposed under."""
        self._next += 1
        self.pending[self._next] = (sender, msg, now_ms + DEADLINE_MS)
        return (TAG, self._next)

    def retries(self) -> list[tuple[Hashable, ChangeQueueMembers]]:
        """The held calls, to propose again (each may be held again)."""
        keys, self.held = self.held, []
        return [((TAG, k), self.pending[k][1]) for k in keys if k in self.pending]

    def committed(self, corr: Hashable) -> Out:
        return self._answer(corr, None)

    def refused(self, corr: Hashable, reason: str) -> Out:
        if reason == "no_change":  # already so: a retried call, or one the node sent twice
            return self._answer(corr, None)
        self.held.append(corr[1])
        return []

    def not_leader(self, corr: Hashable, leader: str | None, term: int) -> Out:
        call = self.pending.pop(corr[1], None)
        return [] if call is None else [(call[0], NotQueueLeader(leader, term, call[1]))]

    def expire(self, now_ms: int) -> Out:
        out: Out = []
        for key, (sender, msg, deadline) in list(self.pending.items()):
            if now_ms >= deadline:
                del self.pending[key]
                out.append((sender, Reply(msg.rid, error=timed_out(
                    "the membership change did not commit in time: no majority of the queue's members?"))))
        return out

    def _answer(self, corr: Hashable, error: AmqpError | None) -> Out:
        call = self.pending.pop(corr[1], None)
        return [] if call is None else [(call[0], Reply(call[1].rid, error=error))]


def is_change(corr: Any) -> bool:
    return type(corr) is tuple and len(corr) == 2 and corr[0] == TAG
