"""A quorum queue member's face to channels: the classic channel<->queue protocol onto the machine.

Theory of operation. A channel talks to a quorum queue's leader with the messages of
actors/messages/channel_queue.py, as to a classic queue. `QueueFront.handle` turns each into
machine commands (actors/quorum/commands.py) for the member to propose to its RaftCore, keyed by
a `corr` that says who waits for the outcome; `committed(corr, reply)` turns the machine's reply
into the answer (a `Reply` to a call, a confirm, a rejection); `machine_effect` carries out what
the machine asked of the leader (deliveries with their bodies read back from the log, timers,
dead-lettering). Everything to send accumulates in order and leaves with `flush()`, once per
member turn: confirms coalesce into ONE `Confirm(upto)` (and one `Rejected`) per channel per turn.

A member that does not lead answers every channel message with `NotQueueLeader(leader, term,
refused)` (a publish batch is not echoed: the client keeps its unconfirmed messages and resends
them). A leader that loses leadership with proposals outstanding tells their channels the same,
with `refused=None`: the Raft core drops a deposed leader's pending proposals without a word.

Ordering rules kept here:
- Confirm only what is committed: a publish is confirmed from the machine's reply, which the core
  gives only once the entry is committed (on a majority's disks) and applied.
- A delivery's body is read from the log at the end of the run of applies that delivered it
  (`after_run`, which the member calls before it may take a snapshot), so the log cannot have been
  compacted past it (effects.py); consecutive deliveries to one consumer in that run, one per
  committed entry, leave as one Deliver, in their place among the other sends.
- An answer before what its command caused: the core gives the reply before the machine's effects,
  and this front emits both in that order, so consume-ok precedes the first delivery.
- A new leader announces itself (`QueueLeader` to every channel its state knows) and takes
  `ConsumerResync`s only once it has applied an entry of its own term, i.e. everything committed
  before it: a consumer's deliveries that the old leader made (or never sent) are then in its state.
- A resync returns no delivery this leader made itself and the channel has not seen yet (after the
  last msg id it saw): that one is on its way on a FIFO link, and would come twice, the second
  time after its ack. (A switch to the member that leads already - a channel whose target
  did not lead, told by a FindLeader answer - resyncs while such a delivery is on its way.) What
  an earlier leader delivered may have died with it and goes back, as what the channel saw and
  neither holds nor settled (a requeue lost with a leader).

Identities: a channel is its address as text (the machine's `channel`); a consumer is (channel,
consumer tag); a basic.get's one-message consumer is (channel, "get:<rid>"). The publisher of an
enqueue is the channel, and `Published.seq` its gapless per-queue sequence (0: untracked).

Consumer credit: an acking consumer is a machine consumer with prefetch = the credit its Consume
carries, refilled by the machine as deliveries are settled, so the channel's later `Grant`s for
it are ignored; a no-ack consumer's Grants become machine `Credit`.

Dead-lettering leaves the front as `DeadLettered` (at-most-once) and `DeadLetterHanded`
(at-least-once: the machine's checkout to this leader's worker, which attaches as the member's
id); the member hands both to the node's dead-letter worker (actors/quorum/dead_letter_worker.py).

Channels out of reach. A node's quorum host that sees another node go down cannot tell a crash
from a partition or a pause, so its members treat that node's channels as suspects
(`channels_gone`, by connection host incarnation): the leader removes their consumers and gives
back what they held (`ConsumersDown`; their publisher sequences stay, so a channel that was only
out of reach publishes on without a gap), and remembers which consumers it removed. When the node
is seen again (`channels_back`) the suspicion is lifted (a later leader no longer removes that
incarnation's channels, old or new) and the leader tells each consumer it removed that it is
cancelled (`ConsumerCancelled`, the client's basic.cancel), and reminds every other channel of the
node who leads (`QueueLeader`). A channel that is dead after all answers neither: the runtime
hands back `Undelivered`, and the leader takes the channel down for good (`ChannelDown`, its
publisher sequence too); so does any delivery to a channel that is gone. A channel that died with
its node up (its connection host crashed and came back) and holds unacked deliveries with no
credit left gets no delivery that could bounce: every `PROBE_MS` the leader reminds each channel
holding unacked deliveries who leads (`probe`), and a dead one bounces that. A consumer a new leader
no longer knows (its `ConsumerResync` names it) is told it is cancelled too, so a channel that
missed the word is not left waiting for deliveries that will never come.

Left out: consumer timeouts (the channel's), policies beyond handing the definition to
`config.resolve_settings`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Hashable, Protocol

from actors.messages.calls import Reply as CallReply
from actors.messages.channel_queue import (
    Cancel, ChannelDown, Confirm, Consume, ConsumerCancelled, Deliver, Get, GetResult, Grant, Publish,
    Purge, Rejected, Settle,
)
from actors.messages.node import ApplyPolicy, AutoDeleteQueue, Dispose, QueueCounts, QueueStats
from actors.messages.quorum import (ChannelsGone, ConsumerResync, FindLeader, NotQueueLeader, QueueLeader,
                                    ResendFrom)
from actors.messages.runtime import Undelivered
from actors.quorum import commands as c
from actors.quorum import effects as qe
from actors.quorum.config import resolve_settings
from actors.quorum.deadletter import WORKER_PREFETCH
from actors.quorum.machine import QuorumMachine
from actors.quorum.queries import requeue_plan, stats
from actors.quorum.names import get_tag
from actors.quorum.state import QueueState
from effects import Log, Send, StartTimer
from persist.classic.message import Message
from raft.commands import USER
from raft.log import Entry
from raft.roles import LEADER
from wire.errors import PRECONDITION_FAILED, AmqpError
from wire.field_types import Int64
from wire.properties import BasicProperties, encode_content_header, parse_content_header

PUBLISH, CONSUME, CANCEL, GET, PURGE = "publish", "consume", "cancel", "get", "purge"
DELIVERY_COUNT_HEADER = "x-delivery-count"


class MemberView(Protocol):
    """What the front reads of its member: the Raft core's role and the machine's state."""

    id: str

    def is_leader(self) -> bool: ...

    def leader(self) -> str | None: ...

    def term(self) -> int: ...

    def caught_up(self) -> bool:
        """Leads and has applied an entry of its own term (all that was committed before it)."""

    def state(self) -> QueueState: ...

    def entries(self, lo: int, hi: int) -> list[Entry]: ...

    def first_index(self) -> int:
        """The lowest index the log still holds (everything below is in a snapshot)."""


class RaftView:
    """A `MemberView` over a RaftCore whose machine is the queue's (the member shell's and the
    simulator's)."""

    def __init__(self, core: Any) -> None:
        self.core = core
        self.id = core.id

    def is_leader(self) -> bool:
        return self.core.role == LEADER and self.core.transferee is None

    def leader(self) -> str | None:
        leader = self.core.leader_id
        return None if leader == self.id else leader

    def term(self) -> int:
        return self.core.term

    def caught_up(self) -> bool:
        core = self.core
        return core.role == LEADER and core.log.term_at(core.applied) == core.term

    def state(self) -> QueueState:
        return self.core.state

    def entries(self, lo: int, hi: int) -> list[Entry]:
        return self.core.log.entries(lo, hi)

    def first_index(self) -> int:
        return self.core.log.first_index()


@dataclass(frozen=True, slots=True)
class DeadLettered:
    """At-most-once dead-lettering, bodies read: publish `messages` to `exchange` (routing key
    `routing_key`, or their own) with an x-death entry for `reason`. The front's own output, for
    the member's dead-letter port (the router lives elsewhere)."""

    reason: str
    exchange: str
    routing_key: str | None
    messages: tuple[Message, ...]


@dataclass(frozen=True, slots=True)
class DeadLetterHanded:
    """At-least-once dead-lettering, bodies read: the messages the machine checked out to this
    leader's worker, (dead-letter msg_id, reason, message), for the member's dead-letter port; the
    worker settles each once every target queue confirmed it (`QueueFront.dead_letters_settled`)."""

    exchange: str
    routing_key: str | None
    items: tuple[tuple[int, str, Message], ...]


@dataclass(frozen=True, slots=True)
class DeadLetterWorkerStopped:
    """This member's worker holds nothing any more: it stopped leading, or the queue no longer
    dead-letters at-least-once (a new leader's worker gets everything unsettled again)."""


def with_delivery_count(header: bytes, count: int) -> bytes:
    """The content header with `x-delivery-count` set (RabbitMQ 4.0 adds it to redeliveries)."""
    class_id, body_size, offset = parse_content_header(header)
    props = BasicProperties.decode(header, offset)
    props.headers = {**(props.headers or {}), DELIVERY_COUNT_HEADER: Int64(count)}  # a long, as RabbitMQ writes it
    return encode_content_header(class_id, body_size, props)


PROBE_MS = 5_000  # how often a leader asks the channels holding unacked deliveries if they are there
DEAD_REMEMBERED = 64  # host incarnations whose channels a member remembers dead: far more than restart in one election


class _Deliveries:
    """Deliveries to one consumer waiting in `QueueFront.out` for their bodies."""

    __slots__ = ("channel", "tag", "delivered")

    def __init__(self, channel: str, tag: str, delivered: list) -> None:
        self.channel, self.tag, self.delivered = channel, tag, delivered


class QueueFront:
    def __init__(self, view: MemberView, machine: QuorumMachine, arguments: dict[str, Any],
                 node: Hashable | None = None) -> None:
        self.view = view
        self.machine = machine
        self.arguments = dict(arguments)
        self.node = node  # where x-expires asks for the queue's deletion (None: nowhere yet)
        self.now_ms = 0
        self.proposals: list[tuple[bytes, Hashable]] = []
        self.out: list[Any] = []
        self._confirms: dict[str, int] = {}
        self._rejected: dict[str, list[int]] = {}
        self._resend: dict[str, int] = {}
        self._pending: dict[str, int] = {}  # channel -> proposals it waits for
        self._resyncs: list[tuple[str, ConsumerResync]] = []  # until caught up
        self._announce = False
        self._own_from: int | None = None  # msg ids from here on: delivered by this member as leader
        self._unread = False  # `out` holds _Deliveries whose bodies are not read yet
        self.gone: set[str] = set()  # address prefixes of channels suspected gone (channels_gone)
        self.dead: dict[str, None] = {}  # address prefixes of channels gone for good, oldest first (channels_dead)
        self.downed: dict[str, set[str]] = {}  # channel -> the consumer tags ConsumersDown removed
        self._next_probe_ms = 0

    # -- inputs --------------------------------------------------------------------------------
    def handle(self, sender: str, msg: Any) -> None:
        """A message from a channel or the node."""
        if type(msg) is ChannelsGone:
            self.channels_gone(msg.prefix)
            return
        if type(msg) is Undelivered:
            self._undelivered(sender)
            return
        if not self.view.is_leader():
            refused = None if type(msg) in (Publish, FindLeader) else msg
            self.out.append(Send(sender, NotQueueLeader(self.view.leader(), self.view.term(), refused)))
            return
        if type(msg) in _READS_STATE and not self.view.caught_up():
            # a new leader may not have applied all that was committed (and confirmed) before it:
            # the node asks again a moment later, as during an election
            self.out.append(Send(sender, NotQueueLeader(None, self.view.term(), msg)))
            return
        handler = _HANDLERS.get(type(msg))
        if handler is None:
            self.out.append(Log("quorum.unexpected_message", "warning", (("kind", type(msg).__name__),)))
            return
        handler(self, sender, msg)

    def committed(self, corr: Hashable, reply: Any) -> None:
        """The core applied a command this member proposed (ClientReply)."""
        if corr is None:
            return
        kind, channel, key = corr
        self._done(channel)
        if kind == PUBLISH:
            self._published(channel, key, reply)
        elif kind == GET:
            self.out.append(Send(channel, self._get_reply(key, reply)))
        elif kind == PURGE:
            self.out.append(Send(channel, CallReply(key, reply.count)))
        else:  # consume, cancel: their replies carry nothing a channel uses
            self.out.append(Send(channel, CallReply(key)))

    def not_leader(self, corr: Hashable, leader: str | None) -> None:
        """The core refused a proposal (a leadership transfer in progress)."""
        if corr is not None:
            self._done(corr[1])
            self.out.append(Send(corr[1], NotQueueLeader(leader, self.view.term(), None)))

    def leader_changed(self, leader: str | None) -> None:
        if leader == self.view.id:
            self._announce = True
            self._own_from = self.view.state().next_msg_id
            return
        self._announce = False
        self._own_from = None
        self._resyncs.clear()
        if self.view.state().dlx.worker == self.view.id:  # its worker's books are the next leader's now
            self.out.append(DeadLetterWorkerStopped())
        term = self.view.term()
        for channel in self._pending:
            self.out.append(Send(channel, NotQueueLeader(leader, term, None)))
        self._pending.clear()

    def machine_effect(self, effect: Any) -> None:
        kind = type(effect)
        if kind is qe.Deliver:
            # every entry a flush commits delivers on its own: consecutive deliveries to one
            # consumer leave as ONE Deliver, their bodies read in one pass (_read_deliveries)
            out = self.out
            last = out[-1] if out else None
            if type(last) is _Deliveries and last.channel == effect.channel and last.tag == effect.tag:
                last.delivered += effect.messages
            else:
                out.append(_Deliveries(effect.channel, effect.tag, list(effect.messages)))
                self._unread = True
        elif kind is qe.Timer:
            self.out.append(StartTimer(effect.name, max(0, effect.at_ms - self.now_ms)))
        elif kind is qe.DeadLetter:
            # as published: a dead-lettered copy starts a new life (its target counts its own
            # deliveries), so it carries no x-delivery-count of this queue's
            found = self._read([index for index, _count in effect.messages])
            bodies = [Message(0, False, *found[index]) for index, _count in effect.messages if index in found]
            if bodies:
                self.out.append(DeadLettered(effect.reason, effect.exchange, effect.routing_key, tuple(bodies)))
        elif kind is qe.DeleteQueue:
            config = self.view.state().config
            if self.node is not None:
                self.out.append(Send(self.node, AutoDeleteQueue(config.vhost, config.name)))
            else:
                self.out.append(Log("quorum.expired_queue_not_deleted", "warning",
                                    (("queue", config.name), ("why", "no node to ask"))))
        elif kind is qe.Release:
            pass  # the member's release cursor reads the state (actors/quorum/release.py)
        elif kind is qe.DeadLetterDeliver:
            found = self._read([index for _msg_id, _reason, index, _count in effect.messages])
            items = tuple((msg_id, reason, Message(msg_id, False, *found[index]))  # a copy: as published
                          for msg_id, reason, index, _count in effect.messages if index in found)
            settings = self.view.state().config.settings
            if items:
                self.out.append(DeadLetterHanded(settings.dead_letter_exchange or "",
                                                 settings.dead_letter_routing_key, items))
        elif kind is qe.StartDeadLetterWorker:  # the worker is this member's: it attaches
            self.proposals.append((c.encode(c.DeadLetterCheckout(self.now_ms, self.view.id, WORKER_PREFETCH)),
                                   None))
        elif kind is qe.StopDeadLetterWorker:
            self.out.append(DeadLetterWorkerStopped())
        else:
            self.out.append(Log("quorum.unexpected_effect", "warning", (("effect", kind.__name__),)))

    def dead_letters_settled(self, msg_ids: list[int]) -> None:
        """Every target queue confirmed these at-least-once dead-lettered messages."""
        if self.view.is_leader():
            self.proposals.append((c.encode(c.DeadLetterSettle(self.now_ms, tuple(msg_ids))), None))

    def timer(self, name: str) -> None:
        """A machine timer fired (effects.Timer): the leader proposes a Tick."""
        if self.view.is_leader():
            self.proposals.append((c.encode(c.Tick(self.now_ms)), None))

    def after_run(self) -> None:
        """The end of a member input: a new leader that has caught up announces itself, restarts
        the machine's leader work (timers, pending deletion) and takes the deferred resyncs; the
        bodies of the run's deliveries are read (before the member may snapshot)."""
        if (self._announce or self._resyncs) and self.view.caught_up():
            self._caught_up()
        self._read_deliveries()

    def _caught_up(self) -> None:
        if self._announce:
            self._announce = False
            state, term, me = self.view.state(), self.view.term(), self.view.id
            for channel in channels(state):
                self.out.append(Send(channel, QueueLeader(me, term)))
            for effect in self.machine.on_leader(state):
                self.machine_effect(effect)
            if self.gone:
                self._down_gone()
            if self.dead:
                self._down_dead()
        resyncs, self._resyncs = self._resyncs, []
        for channel, msg in resyncs:
            self._resync(channel, msg)

    def pending(self) -> bool:
        """Whether anything waits for `after_run`, `take_proposals` or `flush`."""
        return bool(self.out or self.proposals or self._confirms or self._rejected or self._resend
                    or self._announce or self._resyncs)

    def take_proposals(self) -> list[tuple[bytes, Hashable]]:
        proposals, self.proposals = self.proposals, []
        for _command, corr in proposals:
            if corr is not None:
                self._pending[corr[1]] = self._pending.get(corr[1], 0) + 1
        return proposals

    def flush(self) -> list[Any]:
        """Everything to send since the last flush; confirms last, one per channel."""
        self._read_deliveries()
        out, self.out = self.out, []
        for channel, seqs in self._rejected.items():
            out.append(Send(channel, Rejected(seqs)))
        for channel, upto in self._confirms.items():
            out.append(Send(channel, Confirm(upto)))
        for channel, expected in self._resend.items():
            if self._confirms.get(channel, 0) < expected:  # else a later entry filled the gap
                out.append(Send(channel, ResendFrom(expected)))
        self._rejected, self._confirms, self._resend = {}, {}, {}
        return out

    # -- channel messages ----------------------------------------------------------------------
    def _publish(self, channel: str, msg: Publish) -> None:
        now, encode, propose = self.now_ms, c.encode, self.proposals.append
        for seq, exchange, routing_key, header, body in msg.messages:
            publisher = channel if seq else None
            propose((encode(c.Enqueue(now, publisher, seq, exchange, routing_key, header, body)),
                     (PUBLISH, channel, seq) if seq else None))

    def _settle(self, channel: str, msg: Settle) -> None:
        now = self.now_ms
        if msg.acked:
            self.proposals.append((c.encode(c.Settle(now, channel, "", tuple(msg.acked))), None))
        if msg.requeued:
            self._requeue(channel, "", tuple(msg.requeued))
        if msg.discarded:
            self.proposals.append((c.encode(c.Discard(now, channel, "", tuple(msg.discarded))), None))

    def _requeue(self, channel: str, tag: str, msg_ids: tuple[int, ...]) -> None:
        """Back near the head (a delivery limit is set), or to the back under a new index."""
        plan = requeue_plan(self.view.state(), channel, tag, msg_ids)
        rest = msg_ids
        if plan:
            found = self._read([index for _msg_id, index in plan])
            for msg_id, index in plan:
                exchange, routing_key, header, body = found[index]
                self.proposals.append((c.encode(c.Requeue(self.now_ms, channel, tag, msg_id, index, exchange,
                                                          routing_key, header, body)), None))
            planned = {msg_id for msg_id, _index in plan}
            rest = tuple(i for i in msg_ids if i not in planned)
        if rest:  # limited, or not (yet) in this leader's state: Return finds them when applied
            self.proposals.append((c.encode(c.Return(self.now_ms, channel, tag, rest)), None))

    def _grant(self, channel: str, msg: Grant) -> None:
        con = self.view.state().consumers.get((channel, msg.consumer_tag))
        if con is not None and not con.ack and msg.credit > 0:
            self.proposals.append((c.encode(c.Credit(self.now_ms, channel, msg.consumer_tag, msg.credit)),
                                   None))

    def _channel_down(self, channel: str, msg: ChannelDown) -> None:
        self.proposals.append((c.encode(c.ChannelDown(self.now_ms, channel)), None))

    def _consume(self, channel: str, msg: Consume) -> None:
        priority = msg.arguments.get("x-priority", 0)
        if isinstance(priority, bool) or not isinstance(priority, int):
            priority = 0
        command = c.Checkout(self.now_ms, channel, msg.consumer_tag, max(0, msg.credit), msg.ack_required,
                             priority, msg.exclusive)
        self.proposals.append((c.encode(command), (CONSUME, channel, msg.rid)))

    def _cancel(self, channel: str, msg: Cancel) -> None:
        self.proposals.append((c.encode(c.Cancel(self.now_ms, channel, msg.consumer_tag)),
                               (CANCEL, channel, msg.rid)))

    def _get(self, channel: str, msg: Get) -> None:
        command = c.Get(self.now_ms, channel, get_tag(msg.rid), msg.ack_required)
        self.proposals.append((c.encode(command), (GET, channel, msg.rid)))

    def _purge(self, channel: str, msg: Purge) -> None:
        self.proposals.append((c.encode(c.Purge(self.now_ms)), (PURGE, channel, msg.rid)))

    def _consumer_resync(self, channel: str, msg: ConsumerResync) -> None:
        if self.view.caught_up():
            self._resync(channel, msg)
        else:
            self._resyncs.append((channel, msg))

    def _resync(self, channel: str, msg: ConsumerResync) -> None:
        """Settle what the channel settled, return what it never got (redelivered, count + 1)."""
        now, tag = self.now_ms, msg.consumer_tag
        if msg.acked:
            self.proposals.append((c.encode(c.Settle(now, channel, tag, tuple(msg.acked))), None))
        if msg.discarded:
            self.proposals.append((c.encode(c.Discard(now, channel, tag, tuple(msg.discarded))), None))
        con = self.view.state().consumers.get((channel, tag))
        if con is None:  # removed while its channel was out of reach (or cancelled meanwhile)
            self.out.append(Send(channel, ConsumerCancelled(tag)))
            return
        known = set(msg.held) | set(msg.acked) | set(msg.discarded)
        last, own = msg.last_msg_id, self._own_from
        # past the last msg id the channel saw, this leader's own deliveries are still on their way
        # (one FIFO link to a live channel): returning them would deliver them twice
        missing = tuple(i for i in con.checked
                        if i not in known and (i <= last or own is None or i < own))
        if missing:
            self.proposals.append((c.encode(c.Return(now, channel, tag, missing)), None))

    def _find_leader(self, channel: str, _msg: FindLeader) -> None:
        self.out.append(Send(channel, QueueLeader(self.view.id, self.view.term())))

    def channels_gone(self, prefix: str) -> None:
        """Every channel whose address starts with `prefix` may be gone (its node was seen down).
        Every member remembers it, so a leader elected later also gives their messages back."""
        self.gone.add(prefix)
        if self.view.caught_up():
            self._down_gone()

    def channels_dead(self, prefix: str) -> None:
        """Every channel under `prefix` is gone for good (its host restarted: a new process, whose
        channels have other names): the leader proposes a ChannelDown for each one the state
        knows, consumers and publishers alike, so their unacked messages come back and their
        publisher sequences go (rabbit_fifo's enqueuer 'DOWN'). Every member remembers the last
        DEAD_REMEMBERED prefixes, so a leader elected later does the same."""
        self.dead[prefix] = None
        while len(self.dead) > DEAD_REMEMBERED:
            del self.dead[next(iter(self.dead))]
        if self.view.caught_up():
            self._down_dead()

    def _down_dead(self) -> None:
        dead = tuple(self.dead)
        for channel in channels(self.view.state()):
            if channel.startswith(dead):
                self.proposals.append((c.encode(c.ChannelDown(self.now_ms, channel)), None))

    def channels_back(self, prefix: str) -> None:
        """The node whose channels' addresses start with `prefix` is seen again: its channels are no
        longer suspect; the leader tells those whose consumers it removed, and probes the rest."""
        self.gone = {p for p in self.gone if not p.startswith(prefix)}
        back = [ch for ch in self.downed if ch.startswith(prefix)]
        if not self.view.is_leader():
            return
        state = self.view.state()
        for channel in back:
            for tag in sorted(self.downed.pop(channel)):
                # one still there was not removed after all (its ConsumersDown is pending or was
                # dropped with a leader): cancelling it here would leave the queue delivering to a
                # consumer its channel no longer has; if it goes later, the client's check finds out
                if (channel, tag) not in state.consumers and not any(k == (channel, tag) for k, _ in state.waiting):
                    self.out.append(Send(channel, ConsumerCancelled(tag)))
        me, term = self.view.id, self.view.term()
        for channel in channels(state):
            if channel.startswith(prefix):
                self.out.append(Send(channel, QueueLeader(me, term)))

    def _down_gone(self) -> None:
        gone = tuple(self.gone)
        state = self.view.state()
        for channel in channels(state):
            if channel.startswith(gone):
                tags = {tag for ch, tag in state.consumers if ch == channel}
                tags.update(tag for (ch, tag), _con in state.waiting if ch == channel)
                if tags:
                    self.downed.setdefault(channel, set()).update(tags)
                    self.proposals.append((c.encode(c.ConsumersDown(self.now_ms, channel)), None))

    def needs_ticks(self) -> bool:
        """Whether `probe` has channels to ask about (a leader's consumers holding deliveries)."""
        return self.view.is_leader() and any(con.checked for con in self.view.state().consumers.values())

    def probe(self) -> None:
        """Every PROBE_MS, a leader's QueueLeader to each channel holding unacked deliveries: a
        live channel's client takes it as news it has (nothing happens), a dead one bounces it."""
        if self.now_ms < self._next_probe_ms or not self.view.is_leader():
            return
        self._next_probe_ms = self.now_ms + PROBE_MS
        holding = dict.fromkeys(ch for (ch, _tag), con in self.view.state().consumers.items() if con.checked)
        me, term = self.view.id, self.view.term()
        for channel in holding:
            self.out.append(Send(channel, QueueLeader(me, term)))

    def _undelivered(self, channel: str) -> None:
        """The runtime could not deliver to `channel`: it is dead, whatever was suspected."""
        self.downed.pop(channel, None)
        if self.view.is_leader() and channel in channels(self.view.state()):
            self.proposals.append((c.encode(c.ChannelDown(self.now_ms, channel)), None))

    # -- node messages (answered from the leader's state) ---------------------------------------
    def _stats(self, sender: str, msg: QueueStats) -> None:
        s = stats(self.view.state())
        self.out.append(Send(sender, CallReply(msg.rid, QueueCounts(s["messages_ready"], s["consumers"]))))

    def _dispose(self, sender: str, msg: Dispose) -> None:
        state = self.view.state()
        s = stats(state)
        where = f"queue '{state.config.name}' in vhost '{state.config.vhost}'"
        if msg.if_empty and s["messages_ready"]:
            self.out.append(Send(sender, CallReply(msg.rid, error=AmqpError(PRECONDITION_FAILED,
                                                                             f"{where} not empty"))))
            return
        if msg.if_unused and s["consumers"]:
            self.out.append(Send(sender, CallReply(msg.rid, error=AmqpError(PRECONDITION_FAILED,
                                                                             f"{where} in use"))))
            return
        for (channel, tag), con in state.consumers.items():
            if not con.once:
                self.out.append(Send(channel, ConsumerCancelled(tag)))
        for (channel, tag), _con in state.waiting:
            self.out.append(Send(channel, ConsumerCancelled(tag)))
        self.out.append(Send(sender, CallReply(msg.rid, s["messages_ready"])))

    def _apply_policy(self, _sender: str, msg: ApplyPolicy) -> None:
        settings = resolve_settings(self.arguments, msg.settings)
        self.proposals.append((c.encode(c.UpdateSettings(self.now_ms, settings)), None))

    # -- outcomes ------------------------------------------------------------------------------
    def _done(self, channel: str) -> None:
        left = self._pending.get(channel, 0) - 1
        if left > 0:
            self._pending[channel] = left
        else:
            self._pending.pop(channel, None)

    def _published(self, channel: str, seq: int, reply: Any) -> None:
        if reply is qe.Reply.OK or reply is qe.Reply.DUPLICATE:
            pass
        elif reply is qe.Reply.REJECTED:
            self._rejected.setdefault(channel, []).append(seq)
        elif type(reply) is qe.OutOfSequence:
            expected = self._resend.get(channel)
            self._resend[channel] = reply.expected if expected is None else min(expected, reply.expected)
            return
        else:
            self.out.append(Log("quorum.enqueue_failed", "error", (("channel", channel), ("reply", repr(reply)))))
            return
        if seq > self._confirms.get(channel, 0):
            self._confirms[channel] = seq

    def _get_reply(self, rid: int, reply: Any) -> CallReply:
        if type(reply) is qe.GetOk:
            (message,) = self._messages([(reply.msg_id, reply.index, reply.delivery_count)])
            return CallReply(rid, GetResult(message, reply.ready))
        if isinstance(reply, AmqpError):
            return CallReply(rid, error=reply)
        return CallReply(rid, GetResult(None, 0))

    # -- reading the log -------------------------------------------------------------------------
    def _read(self, indexes: list[int]) -> dict[int, tuple[str, str, bytes, bytes]]:
        """(exchange, routing key, header, body) of the messages at these indexes: one log read
        per run of consecutive indexes. Indexes below the log's first index are left out: a member
        that installed a snapshot (at S, taken when nothing at or below S was live any more) and then
        applies, as leader, entries after S that an earlier leader applied, meets deliveries of
        messages at or below S; those were delivered by that leader and settled before the
        snapshot was released, so they are stale and there is nothing to send."""
        found: dict[int, tuple[str, str, bytes, bytes]] = {}
        first = self.view.first_index()
        ordered = sorted(i for i in set(indexes) if i >= first)
        entries, published = self.view.entries, c.published
        k = 0
        while k < len(ordered):
            lo = hi = ordered[k]
            while k + 1 < len(ordered) and ordered[k + 1] == hi + 1:
                k += 1
                hi += 1
            k += 1
            for e in entries(lo, hi + 1):
                command = e.command
                assert command[0] == USER, f"log entry {e.index} holds no message"
                found[e.index] = published(memoryview(command)[1:])
        missing = [i for i in ordered if i not in found]
        assert not missing, f"message bodies missing from the log: {missing[:5]}"
        return found

    def _read_deliveries(self) -> None:
        """Turn the pending `_Deliveries` in `out` into Deliver sends, reading every body they
        name in one pass (one log read per run of consecutive indexes)."""
        if not self._unread:
            return
        self._unread = False
        out = self.out
        pending = [k for k, e in enumerate(out) if type(e) is _Deliveries]
        found = self._read([index for k in pending for _msg_id, index, _count in out[k].delivered])
        for k in pending:
            d = out[k]
            messages = self._messages(d.delivered, found)
            out[k] = Send(d.channel, Deliver(d.tag, messages)) if messages else None
        if None in out:
            self.out = [e for e in out if e is not None]

    def _messages(self, delivered: Any, found: dict[int, tuple[str, str, bytes, bytes]] | None = None,
                  ) -> list[Message]:
        if found is None:
            found = self._read([index for _msg_id, index, _count in delivered])
        out = []
        for msg_id, index, count in delivered:
            if index not in found:
                continue  # stale: see _read
            exchange, routing_key, header, body = found[index]
            if count:
                header = with_delivery_count(header, count)
            out.append(Message(msg_id, count > 0, exchange, routing_key, header, body))
        return out


def channels(state: QueueState) -> list[str]:
    """Every channel the state knows: consumers (waiting ones too) and publishers."""
    seen = dict.fromkeys(key[0] for key in state.consumers)
    seen.update(dict.fromkeys(key[0] for key, _con in state.waiting))
    seen.update(dict.fromkeys(state.enqueuers))
    return list(seen)


_READS_STATE = (QueueStats, Dispose)  # node calls answered from the leader's applied state

_HANDLERS: dict[type, Callable[[QueueFront, str, Any], None]] = {
    Publish: QueueFront._publish, Settle: QueueFront._settle, Grant: QueueFront._grant,
    ChannelDown: QueueFront._channel_down, Consume: QueueFront._consume, Cancel: QueueFront._cancel,
    Get: QueueFront._get, Purge: QueueFront._purge, ConsumerResync: QueueFront._consumer_resync,
    FindLeader: QueueFront._find_leader,
    QueueStats: QueueFront._stats, Dispose: QueueFront._dispose,
    ApplyPolicy: QueueFront._apply_policy,
}
