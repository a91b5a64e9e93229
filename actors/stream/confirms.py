"""Where a stream member sends its channels' publishes, and when it may confirm them.

Theory of operation. A channel sends to the member of a stream on its own node (actors/
placement.py's route_host); only the leader appends (replication.py). So each member keeps, per
channel of its node, the publish batches not yet confirmed (`_unconfirmed`, in the channel's seq
order), and sends each to the leader it knows in the epoch it knows (`route`: itself, or a
`StreamForward` to the leader). The leader remembers each appended batch's end offset with the
member it came from and the channel's seq (`pending`); once the commit passes it, the confirm
goes back to that member (`StreamConfirmed`, or at once when it is the leader's own), which
confirms the channel. A confirm covers every seq up to it (multiple=true), so a batch lost with
a leader must not be passed over: whenever the (leader, epoch) a member knows changes, it sends
every unconfirmed batch again, in order, to the new one. A batch the old leader had committed
is then in the stream twice (at least once, as RabbitMQ's channel resends to a new stream
leader); none is confirmed that a majority does not hold.

Publishes without confirms (seq 0) are not kept: sent when a leader is known, held while none
is (HELD_BATCHES_MAX), lost with a leader like any unconfirmed message. A member holds at most
HELD_BATCHES_MAX unconfirmed batches; beyond that a batch is refused (basic.nack), never
dropped silently.
"""
from __future__ import annotations

from collections import deque
from typing import Any, Callable, Hashable, Sequence

from actors.messages.channel_queue import Confirm, Published, Rejected
from actors.messages.stream import StreamConfirmed, StreamForward
from actors.stream.replication import Replication
from effects import Send

Effect = Any
HELD_BATCHES_MAX = 10_000  # unconfirmed batches a member keeps for its channels (more: refused)


class Publishes:
    def __init__(self, rep: Replication, append: Callable[[str, Hashable, Sequence[Published]], list[Effect]]) -> None:
        self.rep = rep
        self._append = append  # the leader's append: (origin member, channel, batch) -> effects
        self._unconfirmed: dict[Hashable, deque[tuple[int, Sequence[Published]]]] = {}
        self._held = 0  # batches in _unconfirmed
        self._plain: list[tuple[Hashable, Sequence[Published]]] = []  # seq 0, while no leader is known
        self._confirmed: dict[Hashable, int] = {}  # the highest confirm sent to each channel
        self._sent_to: tuple[str, int] | None = None  # the (leader, epoch) the batches went to
        # leading: (end offset, origin member, channel, highest seq) of each appended batch, in log order
        self.pending: deque[tuple[int, str, Hashable, int]] = deque()

    def from_channel(self, channel: Hashable, messages: Sequence[Published]) -> list[Effect]:
        rep = self.rep
        if messages[-1].seq:
            if self._held >= HELD_BATCHES_MAX:
                return [Send(channel, Rejected([m.seq for m in messages]))]
            self._unconfirmed.setdefault(channel, deque()).append((messages[-1].seq, messages))
            self._held += 1
            current = rep.leader is not None and self._sent_to == (rep.leader, rep.epoch)
            return self.route(rep.me, channel, messages) if current else []  # else: sent by `follow`
        if rep.leader is None:
            if len(self._plain) < HELD_BATCHES_MAX:
                self._plain.append((channel, messages))
            return []
        return self.route(rep.me, channel, messages)

    def route(self, origin: str, channel: Hashable, messages: Sequence[Published]) -> list[Effect]:
        """A batch to the leader: appended here, or handed on. A batch handed to a member that
        no longer leads and knows no leader is dropped: its origin sends it again (`follow`)."""
        rep = self.rep
        if rep.leads:
            return self._append(origin, channel, messages)
        if rep.leader is None:
            return []
        return [Send(rep.address(rep.leader), StreamForward(origin, channel, list(messages)))]

    def follow(self) -> list[Effect]:
        """After every input: a new (leader, epoch) gets every unconfirmed batch again, in order;
        a deposed leader forgets what it had not committed (its tail may be cut)."""
        rep = self.rep
        if not rep.leads:
            self.pending.clear()
        if rep.leader is None:
            self._sent_to = None
            return []
        target = (rep.leader, rep.epoch)
        if target == self._sent_to:
            return []
        self._sent_to = target
        effects: list[Effect] = []
        for channel, batches in self._unconfirmed.items():
            for _, messages in batches:
                effects += self.route(rep.me, channel, messages)
        plain, self._plain = self._plain, []
        for channel, messages in plain:
            effects += self.route(rep.me, channel, messages)
        return effects

    def committed(self, commit: int) -> list[Effect]:
        """Leading: the batches the commit passed, confirmed to their members (here: to their channels)."""
        pending = self.pending
        if not pending or pending[0][0] > commit:
            return []
        here: dict[Hashable, int] = {}
        there: dict[str, dict[Hashable, int]] = {}
        while pending and pending[0][0] <= commit:
            _, origin, channel, seq = pending.popleft()
            (here if origin == self.rep.me else there.setdefault(origin, {}))[channel] = seq
        effects = self.confirm(list(here.items()))
        effects += [Send(self.rep.address(member), StreamConfirmed(list(confirms.items())))
                    for member, confirms in there.items()]
        return effects

    def confirm(self, confirms: Sequence[tuple[Hashable, int]]) -> list[Effect]:
        """This member's channels' publishes committed up to these seqs."""
        effects: list[Effect] = []
        for channel, upto in confirms:
            batches = self._unconfirmed.get(channel)
            while batches and batches[0][0] <= upto:
                batches.popleft()
                self._held -= 1
            if upto > self._confirmed.get(channel, 0):  # a batch sent twice is confirmed once
                self._confirmed[channel] = upto
                effects.append(Send(channel, Confirm(upto)))
        return effects

    def channel_down(self, channel: Hashable) -> None:
        self._held -= len(self._unconfirmed.pop(channel, ()))
        self._confirmed.pop(channel, None)
        self._plain = [p for p in self._plain if p[0] != channel]

    def owed(self) -> dict[Hashable, int]:
        """Each channel's highest seq held unconfirmed (a stream of one member confirms them all
        when it is deleted: its shell synced the log first)."""
        return {channel: batches[-1][0] for channel, batches in self._unconfirmed.items() if batches}

    def refuse_all(self) -> list[Effect]:
        """A member removed from the stream (delete_replica) goes with batches no leader will
        confirm through it: each is refused (basic.nack), so no publisher waits for ever."""
        effects: list[Effect] = [Send(channel, Rejected([m.seq for _, messages in batches for m in messages]))
                                 for channel, batches in self._unconfirmed.items() if batches]
        self._unconfirmed.clear()
        self._held = 0
        return effects
