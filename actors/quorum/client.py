"""A channel's side of one quorum queue: find the leader, re-send across leader changes.

Theory of operation. A channel talks to every queue with the classic messages
(actors/messages/channel_queue.py). For a quorum queue it puts one `QuorumClient` between itself
and the queue's members: the channel hands it what it would send the queue (`send`), the client
hands up what the queue says (`receive` -> `take()[1]`), and addresses the member it believes
leads (`take()[0]`: Sends to member ids). The channel sees one queue, whichever member leads.

- Sequences: every message the channel publishes to the queue gets the next number of a gapless
  per-queue sequence (`qseq`, 1, 2, ...), which replaces `Published.seq` on the way out; the
  machine drops a qseq it has applied and refuses a gap (actors/quorum/commands.py), so a resend
  enqueues each message exactly once. The client keeps every message until the leader confirms its
  qseq, and maps confirms back: `Confirm(upto)` up is the highest channel confirm seq confirmed
  (the channel's ConfirmTracker takes it as "everything up to here"), `Rejected` the channel seqs
  refused. Messages published without confirms (seq 0) are numbered and kept the same way, so
  they too survive a leader change; only the confirm going up is left out.
- Finding the leader: the client starts at `leader` (or the first member) and switches when a
  member says who leads: `QueueLeader(leader, term)` (a new leader announces itself to the
  channels its state knows) or `NotQueueLeader(leader, term, refused)` (a member that does not
  lead refused something). Terms only grow: a stale redirect never switches back. With nothing
  heard from the target for `retry_ticks` while something waits (confirms, a call), the client
  asks every member (`FindLeader`) and switches on the answers as above.
- Re-sends happen on a switch, i.e. only when the leader changes or the target itself refused
  what it was sent (it was not leading at that moment: an election, a leadership transfer) or
  lost it (its host restarted: `target_restarted`): a target that says it leads and has refused
  nothing has lost nothing the client sent it (one FIFO link to a live process; one that stops
  leading with proposals outstanding says so), whatever term it names - news of its term (a
  client starts at term 0) only sets `term`. It is merely slow; re-sending to it would add load
  where there is too much already, and apply a call twice (a no-ack basic.get, dequeued twice,
  loses a message; calls carry no id the machine remembers).
- A switch re-sends, in this order: a `ConsumerResync` per consumer (what it holds unacked, what
  it settled lately, whose Settle may have died with the old leader, and the last msg id it was
  given: the new leader settles those again, which is harmless, and returns the rest, redelivered
  with a higher delivery count, but for its own deliveries after that msg id, still on their way;
  a switch may well be to a member that turns out not to lead, so nothing is forgotten), the call
  in progress, every unconfirmed message (one batch), then whatever a non-leader refused that
  is not tracked otherwise (settles, grants, a channel's goodbye). A consumer whose Consume is
  still unanswered is not resynced (its Consume is re-sent): a leader cancels a consumer it is
  resynced and does not know (one removed while its channel was out of reach), and says so.
- A consumer that holds nothing and was given nothing for `check_ticks` is checked: an empty
  `ConsumerResync` to the target, which changes nothing for a consumer the leader knows and
  cancels one it removed (its channel out of reach for a while) whose cancel never arrived, so no
  consumer waits for ever for deliveries that go to nobody. One small message per idle consumer
  every `check_ticks`, no log entry.

Ordering rule: after a switch nothing new reaches the new leader before the re-sends above, so a
publisher's sequence arrives there in order. Duplicates are possible (a resend of what the old
leader committed is dropped by the machine; a delivery in flight from an old leader across the
switch may come twice, flagged redelivered the second time); losses are not. Deliveries a new
leader repeats (same msg id) are dropped here. Bounded memory: the settlements remembered for a resync are the last
`settled_memory` per consumer (a Settle older than that and lost with a leader makes its message
come back once more).
"""
from __future__ import annotations

from collections import deque
from typing import Any, Sequence

from actors.messages.calls import Reply
from actors.messages.channel_queue import (
    Cancel, ChannelDown, Confirm, Consume, ConsumerCancelled, Deliver, Get, Publish, Published,
    Purge, Rejected, Settle,
)
from actors.messages.quorum import ConsumerResync, FindLeader, NotQueueLeader, QueueLeader, ResendFrom
from actors.quorum.names import get_tag
from effects import Send

RETRY_TICKS = 20          # ticks without a word from the target before asking who leads
CHECK_RETRIES = 30        # an idle consumer is checked every this many retry periods
SETTLED_MEMORY = 10_000   # settled msg ids remembered per consumer for a resync
RESEND_BATCH_MAX = 1024   # messages per Publish when re-sending
CALLS = (Consume, Cancel, Get, Purge)
TRACKED = (*CALLS, ConsumerResync, ChannelDown)  # re-sent by every switch anyway


class _Consumer:
    __slots__ = ("held", "acked", "discarded", "cancelled", "last_msg_id", "quiet")

    def __init__(self, settled_memory: int) -> None:
        self.last_msg_id = -1  # msg ids grow with every delivery to a consumer
        self.quiet = 0  # ticks since its last delivery
        self.held: dict[int, None] = {}  # msg ids delivered and not settled, in order
        self.acked: deque[int] = deque(maxlen=settled_memory)
        self.discarded: deque[int] = deque(maxlen=settled_memory)
        self.cancelled = False


class QuorumClient:
    def __init__(self, members: Sequence[str], leader: str | None = None, *,
                 retry_ticks: int = RETRY_TICKS, settled_memory: int = SETTLED_MEMORY) -> None:
        assert members, "a quorum queue has members"
        self.members = list(members)
        self.target = leader if leader is not None else self.members[0]
        self.term = 0
        self.retry_ticks = retry_ticks
        self.check_ticks = retry_ticks * CHECK_RETRIES
        self.settled_memory = settled_memory
        self.next_qseq = 1
        self.unconfirmed: dict[int, tuple[int, Published]] = {}  # qseq -> (channel seq, as sent)
        self.consumers: dict[str, _Consumer] = {}
        self.holder: dict[int, str] = {}  # msg id -> consumer tag
        self.calls: dict[int, Any] = {}  # rid -> the call waiting for its Reply
        self.parked: list[Any] = []  # refused while no leader was known
        self.closing = False
        self.refused_by_target = False  # the target refused what it was sent: re-send on news
        self.idle_ticks = 0
        self.switches = 0
        self.duplicates = 0  # deliveries dropped as seen before
        self._out: list[Send] = []
        self._up: list[Any] = []

    def take(self) -> tuple[list[Send], list[Any]]:
        """(Sends to members, messages for the channel as if the queue sent them), in order."""
        out, up = self._out, self._up
        self._out, self._up = [], []
        return out, up

    def outstanding(self) -> bool:
        """Whether something waits for the leader: confirms, a call, or what was refused."""
        return bool(self.unconfirmed or self.calls or self.parked or self.refused_by_target)

    # -- channel -> queue ----------------------------------------------------------------------
    def send(self, msg: Any) -> None:
        kind = type(msg)
        if kind is Publish:
            batch = self._number(msg.messages)
            self._out.append(Send(self.target, Publish(batch), len(batch)))
            return
        if kind is Settle:
            self._settled(msg)
        elif kind in CALLS:
            self.calls[msg.rid] = msg
            if kind is Consume:
                self.consumers.setdefault(msg.consumer_tag, _Consumer(self.settled_memory))
        elif kind is ChannelDown:
            self.closing = True
        self._out.append(Send(self.target, msg))

    def _number(self, messages: Sequence[Published]) -> list[Published]:
        qseq = self.next_qseq
        batch = []
        unconfirmed = self.unconfirmed
        for p in messages:
            numbered = Published(qseq, p[1], p[2], p[3], p[4])
            unconfirmed[qseq] = (p[0], numbered)
            batch.append(numbered)
            qseq += 1
        self.next_qseq = qseq
        return batch

    def _settled(self, msg: Settle) -> None:
        for ids, how in ((msg.acked, "acked"), (msg.requeued, None), (msg.discarded, "discarded")):
            for msg_id in ids:
                tag = self.holder.pop(msg_id, None)
                con = self.consumers.get(tag) if tag is not None else None
                if con is None:
                    continue
                con.held.pop(msg_id, None)
                if how is not None:  # a lost requeue needs no memory: the resync returns it
                    getattr(con, how).append(msg_id)
                if con.cancelled and not con.held:
                    del self.consumers[tag]

    # -- queue -> channel ----------------------------------------------------------------------
    def receive(self, sender: str, msg: Any) -> None:
        if sender == self.target:
            self.idle_ticks = 0
        kind = type(msg)
        if kind is Deliver:
            fresh = self._delivered(msg)
            if fresh is not None:
                self._up.append(fresh)
        elif kind is Confirm:
            self._confirmed(msg.upto)
        elif kind is Rejected:
            seqs = [seq for seq in (self._pop(q) for q in msg.seqs) if seq]
            if seqs:
                self._up.append(Rejected(seqs))
        elif kind is Reply:
            self._replied(msg)
            self._up.append(msg)
        elif kind is ConsumerCancelled:
            con = self.consumers.pop(msg.consumer_tag, None)
            if con is None or not con.cancelled:  # the channel cancelled it already: nothing to say
                self._up.append(msg)
        elif kind is QueueLeader:
            if self._switches_to(msg.leader, msg.term):
                self._switch(msg.leader, msg.term)
        elif kind is NotQueueLeader:
            self._redirected(sender, msg)
        elif kind is ResendFrom:
            self._resend_from(msg.expected)
        else:
            self._up.append(msg)

    def _delivered(self, msg: Deliver) -> Deliver | None:
        """Track a delivery; drop what this consumer was given already. A new leader that applies,
        as leader, entries its predecessor had applied and delivered delivers them again under the
        same msg ids, and msg ids only grow (a redelivery gets a new one): a msg id at or below
        the consumer's last is a duplicate."""
        tag = msg.consumer_tag
        con = self.consumers.get(tag)
        if con is None:
            return msg  # not ours (any more): the channel hands it back
        messages = msg.messages
        if messages and messages[0][0] <= con.last_msg_id:
            messages = [m for m in messages if m[0] > con.last_msg_id]
            self.duplicates += len(msg.messages) - len(messages)
            if not messages:
                return None
            msg = Deliver(tag, messages)
        for m in messages:
            con.held[m[0]] = None
            self.holder[m[0]] = tag
        con.last_msg_id = messages[-1][0]
        con.quiet = 0
        return msg

    def _confirmed(self, upto: int) -> None:
        unconfirmed = self.unconfirmed
        top = 0
        while unconfirmed:
            qseq = next(iter(unconfirmed))
            if qseq > upto:
                break
            seq = unconfirmed.pop(qseq)[0]
            if seq > top:
                top = seq
        if top:
            self._up.append(Confirm(top))

    def _pop(self, qseq: int) -> int:
        found = self.unconfirmed.pop(qseq, None)
        return 0 if found is None else found[0]

    def _replied(self, msg: Reply) -> None:
        call = self.calls.pop(msg.rid, None)
        if call is None:
            return
        if type(call) is Consume and msg.error is not None:
            self.consumers.pop(call.consumer_tag, None)
        elif type(call) is Get and call.ack_required and msg.error is None and msg.value.message is not None:
            # the machine holds it under a one-message consumer of the front's naming
            tag = get_tag(call.rid)
            con = self.consumers[tag] = _Consumer(self.settled_memory)
            con.cancelled = True  # gone once settled
            msg_id = con.last_msg_id = msg.value.message[0]
            con.held[msg_id] = None
            self.holder[msg_id] = tag
        elif type(call) is Cancel:
            con = self.consumers.get(call.consumer_tag)
            if con is not None:
                con.cancelled = True
                if not con.held:
                    del self.consumers[call.consumer_tag]

    def _redirected(self, sender: str, msg: NotQueueLeader) -> None:
        refused = msg.refused
        tracked = refused is None or type(refused) in TRACKED
        if sender == self.target:
            # what we sent the target went nowhere (it does not lead, or not now: an election or a
            # leadership transfer): the next leader news re-sends it, even naming the same member
            # (who may well lead again in the same term, having said nothing: the retry asks)
            self.refused_by_target = True
        if msg.leader is None:
            if not tracked:
                self.parked.append(refused)  # an election runs: the next switch or retry sends it
        elif self._switches_to(msg.leader, msg.term):
            if not tracked:
                self.parked.append(refused)
            self._switch(msg.leader, msg.term)
        elif not tracked:
            self._out.append(Send(self.target, refused))  # refused by the old leader: send it on

    def _switches_to(self, leader: str, term: int) -> bool:
        """Whether news that `leader` leads in `term` is a switch (and its re-sends). News that the
        target leads, which has refused nothing, only teaches the term (a client starts at term 0,
        and learns it from a leader's probe or a FindLeader answer): the target has everything it
        was sent, on one FIFO link (a member that stops leading says so first, NotQueueLeader; one
        whose host restarted and lost it is `host_restarted`), so re-sending it would apply a call
        twice - a no-ack basic.get dequeuing a second message that nobody receives."""
        if leader == self.target and not self.refused_by_target:
            self.term = max(self.term, term)
            return False
        return term > self.term or self.refused_by_target or (term == self.term and leader != self.target)

    def target_restarted(self) -> None:
        """The target's host crashed and came back: what it was sent and had not answered is lost,
        as if it had refused it (the next leader news re-sends it; the retry asks for that news)."""
        if self.outstanding() or self.consumers:
            self.refused_by_target = True

    def _resend_from(self, expected: int) -> None:
        """The leader's sequence for us had a gap at `expected`: send again what is unconfirmed from
        there. (A ResendFrom may be stale - the gap filled since - so nothing is ever numbered
        anew: a seq the queue has applied always means the message it was first given to.)"""
        self._publish_all([numbered for qseq, (_seq, numbered) in self.unconfirmed.items() if qseq >= expected])

    # -- time and switching ----------------------------------------------------------------------
    def tick(self) -> None:
        if self.consumers:
            self._check_consumers()
        if not self.outstanding():
            self.idle_ticks = 0
            return
        self.idle_ticks += 1
        if self.idle_ticks >= self.retry_ticks:
            self.idle_ticks = 0
            for member in self.members:
                self._out.append(Send(member, FindLeader()))

    def _consuming(self) -> set[str]:
        """The tags of consumers whose Consume is still unanswered."""
        return {call.consumer_tag for call in self.calls.values() if type(call) is Consume}

    def _check_consumers(self) -> None:
        consuming = None
        for tag, con in self.consumers.items():
            con.quiet += 1
            if con.quiet < self.check_ticks or con.held or con.cancelled:
                continue
            con.quiet = 0
            if consuming is None:
                consuming = self._consuming()
            if tag not in consuming:
                self._out.append(Send(self.target, ConsumerResync(tag, [], [], [], con.last_msg_id)))

    def _switch(self, leader: str, term: int) -> None:
        self.target, self.term = leader, term
        self.refused_by_target = False
        self.idle_ticks = 0
        self.switches += 1
        out = self._out
        consuming = self._consuming()
        for tag, con in self.consumers.items():  # the settled ids stay: the target may not lead
            if tag not in consuming:  # a leader that does not know it yet would cancel it
                out.append(Send(leader, ConsumerResync(tag, list(con.held), list(con.acked),
                                                       list(con.discarded), con.last_msg_id)))
        for rid in sorted(self.calls):
            out.append(Send(leader, self.calls[rid]))
        self._publish_all([numbered for _seq, numbered in self.unconfirmed.values()])
        parked, self.parked = self.parked, []
        for msg in parked:
            out.append(Send(leader, msg))
        if self.closing:
            out.append(Send(leader, ChannelDown()))

    def _publish_all(self, messages: list[Published]) -> None:
        for k in range(0, len(messages), RESEND_BATCH_MAX):
            batch = messages[k:k + RESEND_BATCH_MAX]
            self._out.append(Send(self.target, Publish(batch), len(batch)))
