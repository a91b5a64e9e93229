"""The classic queue core (in memory): a pure state machine with RabbitMQ's delivery semantics.

Theory of operation: channels publish batches of messages; the queue numbers each with its own
increasing msg_id and keeps it in the ready list (`ready.py`, or `priority.py` for x-max-priority)
until a consumer with credit or a basic.get takes it. Ready messages leave in msg_id order (highest
priority first); a requeued message returns to its original position and is flagged redelivered.
Consumers are credit-based (`consumers.py`): the queue delivers to a consumer only while it has
credit, by consumer priority and round-robin, one Deliver per consumer per call. A message delivered
with ack_required stays "unacknowledged", filed under the channel that holds it, until that channel
settles it (ack / requeue / discard) or goes down (requeue). No-ack deliveries leave at once.

Time enters as `now_ms` (wall-clock milliseconds, as RabbitMQ stamps expiry and x-death) on every
call; an omitted `now_ms` means no time has passed. Features, all off unless configured
(`settings.py`: x-arguments at declare, replaced whole by `apply_policy`):
- TTL (x-message-ttl, per-message `expiration`; the lower wins): a message's expiry is stamped when
  it is enqueued and kept across requeues. As RabbitMQ's classic queues, expiry is checked only at
  the head: a message taken for delivery or basic.get that has expired is dead-lettered instead, and
  after every call expired messages at the head are dropped; a `StartTimer("ttl")` asks the shell to
  wake the queue when the head will expire. A published message that a consumer can take at once is
  delivered without a check (so TTL 0 reaches a waiting consumer, as in RabbitMQ). A durable
  queue's ready list shares the expiry map (`attach_expiry`) and keeps it on disk, so recovered
  messages keep their expiry: `start` drops (or dead-letters) what expired while the node was down
  as soon as it reaches the head and arms the timer for the rest, as RabbitMQ's init_ttl does.
- x-expires: while the queue has no consumers, every use (declare, which reaches the queue as the
  node's `stats` call - see `touch`; basic.get; the last consumer leaving) restarts
  `StartTimer("expires")`; when it fires with still no consumers the queue asks to be deleted.
- Length limits count READY messages (x-max-length) and their body bytes (x-max-length-bytes).
  drop-head: after enqueue/requeue the head is dropped (dead-lettered, reason maxlen) until within
  limits. reject-publish(-dlx): each published message that would overflow is refused before
  enqueueing, even if a consumer could take it; its confirm seq is reported in `Rejected`, and with
  -dlx it is also dead-lettered.
- Dead-lettering (`deadletter.py`): rejected (discarded by a settle), expired and maxlen messages go
  to the dead-letter exchange as `Send` effects, routed with the registry replica given as `router`.

Effects are the one vocabulary (effects/): `Send`s of typed messages (actors/messages) and timers.
Effect order within one call: Deliver sends first (one per consumer, in order of each consumer's
first message), then dead-letter Publishes and timers, then Rejected and Confirm (one each per
publish call; Rejected first, since Confirm's range covers refused seqs too), then AutoDeleteQueue
and the x-expires timer. ConsumerCancelled only comes from delete. `handle(sender, msg)` takes the
messages of actors/messages/channel_queue.py and node.py and answers requests with a `Reply`
(handlers.py: each message as a call of the operations below); an `Undelivered` (what it sent
found no actor) means the channel is gone, as `ChannelDown` does.

Confirms (THE ORDERING RULE of durable queues): Confirm means "enqueued", and for a queue made with
`hold_confirms` (a durable one) "on disk": its confirms are held here, the highest seq per channel;
`sync_started()` sets aside those that the group commit's next syncs cover (everything this queue
wrote so far, actors/queue/group_commit.py), and they leave only from `flushed()`, which the shell
calls once those syncs are done. Rejected is never held: a refused message was never written.

Storage: ready messages live in the ready list, in RAM (`ready.py`, `priority.py`) or, for a durable
queue, in `backed.BackedReady` over a paged store that the shell builds and recovers and hands in
with the msg_id to continue from. Every message taken from the ready list is either requeued or
`forget`-ed when it leaves for good (acked, discarded, dead-lettered, delivered without ack), so the
store can record the ack.

Invariants: every message is in exactly one of ready, unacked (under one channel) or gone (acked,
dead-lettered or dropped); when messages are ready, no consumer has credit, because delivery always
runs until one side is exhausted (asserted in `_deliver`); after every call the ready list is within
its drop-head limits and its head has not expired. The property tests check these against a model.

Left out: at-least-once dead-lettering (3.10 classic queues are at-most-once); BCC keys of a
dead-lettered message (see deadletter.py).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable, Hashable, Mapping

from actors.messages.channel_queue import Confirm, ConsumerCancelled, Deliver, Published, Rejected
from actors.messages.node import AutoDeleteQueue
from actors.stats.counters import MessageCounters
from actors.queue import deadletter
from actors.queue.consumers import Consumer, Consumers
from actors.queue.handlers import HANDLERS
from actors.queue.priority import PriorityReady
from actors.queue.properties import EXPIRATION_HIGH_BIT, expiration_ms
from actors.queue.settings import DROP_HEAD, REJECT_PUBLISH_DLX, QueueSettings
from effects import CancelTimer, Effect, Send, StartTimer
from persist.classic.message import BODY, HEADER, MSG_ID, Message, size_bytes
from persist.classic.ready import Ready, ReadyList
from wire.errors import ACCESS_REFUSED, NOT_ALLOWED, PRECONDITION_FAILED, AmqpError
from wire.properties import HEADER_PROPS_OFFSET

TTL_TIMER = "ttl"
EXPIRES_TIMER = "expires"


class ClassicQueue:
    """One classic queue's messages, consumers and unacknowledged deliveries."""

    def __init__(self, vhost: str, name: str, *, auto_delete: bool = False,
                 arguments: dict[str, Any] | None = None, router: deadletter.Router | None = None,
                 place: Callable[[str, str], Hashable] | None = None, now_ms: int = 0,
                 ready: Ready | None = None, next_id: int = 1, node: Hashable = "node",
                 hold_confirms: bool = False) -> None:
        self.vhost = vhost
        self._node = node  # where AutoDeleteQueue goes
        self._hold_confirms = hold_confirms
        self._held: dict[Hashable, int] = {}  # channel -> highest confirm seq not yet in a sync
        self._syncing: dict[Hashable, int] = {}  # the same, set aside by sync_started() for flushed()
        self.deleted = False
        self.name = name
        self.auto_delete = auto_delete
        self.arguments = dict(arguments or {})
        self._router = router
        self._place = place
        self._now = now_ms
        self._next_id = max(next_id, 1)
        max_priority = self.arguments.get("x-max-priority")
        self._ready: Ready = ready if ready is not None else (
            PriorityReady(max_priority) if isinstance(max_priority, int) and max_priority > 0 else ReadyList())
        self._consumers = Consumers(single_active=self.arguments.get("x-single-active-consumer") is True)
        self._unacked: dict[Hashable, dict[int, Message]] = {}  # channel -> msg_id -> message
        self._unacked_count = 0
        self._unacked_bytes = 0
        self._had_consumers = False
        # msg_id -> expires at (ms), for messages with a TTL only. Mutated in place, never rebound:
        # a durable queue's ready list shares it (writes it to disk, fills it from disk).
        self._expiry: dict[int, int] = {}
        self._ready.attach_expiry(self._expiry)
        self._ttl_timer_at: int | None = None
        self.settings = QueueSettings()
        self._configure(QueueSettings.from_arguments(self.arguments))
        # message_stats (actors/stats/counters.py), bumped once per batch; `redeliver` counts
        # messages requeued, each of which goes out again flagged redelivered
        self.counters = MessageCounters()

    # -- counts ---------------------------------------------------------------------------------

    @property
    def message_count(self) -> int:
        """Ready messages: what queue.declare-ok / delete-ok / basic.get-ok report (as RabbitMQ)."""
        return len(self._ready)

    @property
    def messages_ready(self) -> int:
        return len(self._ready)

    @property
    def messages_unacknowledged(self) -> int:
        return self._unacked_count

    @property
    def consumer_count(self) -> int:
        return len(self._consumers)

    def stats(self) -> dict[str, Any]:
        """Management-style counters; `messages` is ready + unacknowledged, as RabbitMQ reports,
        and message_bytes_* count bodies, as RabbitMQ's do."""
        unacked_body_bytes = sum([len(m[BODY]) for held in self._unacked.values() for m in held.values()])
        exclusive = self._consumers.exclusive
        return {
            "name": self.name,
            "vhost": self.vhost,
            "messages": len(self._ready) + self._unacked_count,
            "messages_ready": len(self._ready),
            "messages_unacknowledged": self._unacked_count,
            "consumers": len(self._consumers),
            "memory": self._ready.bytes + self._unacked_bytes,
            "message_bytes": self._ready.body_bytes + unacked_body_bytes,
            "message_bytes_ready": self._ready.body_bytes,
            "message_bytes_unacknowledged": unacked_body_bytes,
            "exclusive_consumer_pid": None if exclusive is None else str(exclusive.channel),
            "exclusive_consumer_tag": None if exclusive is None else exclusive.tag,
        }

    # -- configuration and time -----------------------------------------------------------------

    def _configure(self, settings: QueueSettings) -> None:
        self.settings = settings
        self._limited = settings.limited
        self._refusing = settings.limited and settings.overflow != DROP_HEAD
        self._queue_ttl = settings.message_ttl_ms

    def _clock(self, now_ms: int | None) -> None:
        if now_ms is not None and now_ms > self._now:
            self._now = now_ms

    def start(self, *, now_ms: int | None = None) -> list[Effect]:
        """The queue exists (the shell calls this once, after creating it): enforce the length
        limits and TTL on what it recovered from disk (RabbitMQ's init_max_length / init_ttl), arm
        the TTL timer for the head and the x-expires timer."""
        self._clock(now_ms)
        effects = self._housekeep() if self._ready and (self._limited or self._expiry) else []
        effects.extend(self._touch())
        return effects

    def apply_policy(self, settings: Mapping[str, Any], *, now_ms: int | None = None) -> list[Effect]:
        """Replace the effective settings (policy key names, already merged with the arguments by the
        node) and enforce them now: limits drop at once, the expiry timer restarts (RabbitMQ's
        process_args_policy). A new message-ttl applies to messages enqueued from now on."""
        self._clock(now_ms)
        old = self.settings
        self._configure(QueueSettings.from_policy(settings))
        effects = self._housekeep()
        if self.settings.expires_ms != old.expires_ms:
            effects.extend(self._touch() if self.settings.expires_ms is not None else [CancelTimer(EXPIRES_TIMER)])
        return effects

    def touch(self, *, now_ms: int | None = None) -> list[Effect]:
        """The queue was used without consuming: the node's `stats` call, made on every redeclare
        (queue.declare, passive or not), which RabbitMQ counts as use for x-expires."""
        self._clock(now_ms)
        return self._touch()

    def on_timer(self, name: str, *, now_ms: int | None = None) -> list[Effect]:
        """A timer the core asked for fired."""
        self._clock(now_ms)
        if name == TTL_TIMER:
            self._ttl_timer_at = None
            return self._housekeep()
        if name == EXPIRES_TIMER and self.settings.expires_ms is not None and not self._consumers:
            return [Send(self._node, AutoDeleteQueue(self.vhost, self.name))]
        return []

    # -- messages and the group commit ----------------------------------------------------------

    def handle(self, sender: Hashable, msg: Any, *, now_ms: int | None = None) -> list[Effect]:
        """One message from a channel or the node (actors/messages), as effects."""
        return HANDLERS[type(msg)](self, sender, msg, now_ms)

    @property
    def holds_confirms(self) -> bool:
        """Whether confirms wait for the next sync (the group commit's lazy marks are the rest)."""
        return bool(self._held)

    def sync_started(self) -> None:
        """The group commit asked for the syncs of everything this queue wrote so far: the
        confirms held until now are what those syncs cover. Later publishes wait for the next."""
        syncing = self._syncing
        for channel, upto in self._held.items():
            if upto > syncing.get(channel, 0):
                syncing[channel] = upto
        self._held = {}

    def flushed(self) -> list[Effect]:
        """The syncs asked for at `sync_started` are done: confirm what they cover."""
        syncing, self._syncing = self._syncing, {}
        return [Send(channel, Confirm(upto)) for channel, upto in syncing.items()]

    def _confirm(self, channel: Hashable, upto: int, effects: list[Effect]) -> None:
        if not self._hold_confirms:
            effects.append(Send(channel, Confirm(upto)))
        elif upto > self._held.get(channel, 0):
            self._held[channel] = upto

    # -- publishing -----------------------------------------------------------------------------

    def publish(self, channel: Hashable, messages: Sequence[Published], *,
                now_ms: int | None = None) -> list[Effect]:
        """Enqueue `messages` in order, deliver what consumer credit allows, then confirm."""
        if now_ms is not None and now_ms > self._now:  # inline _clock: the hot path
            self._now = now_ms
        refused: list[Published] = []
        if self._refusing:
            messages, refused = self._admit(messages)
        msg_id = self._next_id
        batch: list[Message] = []
        append = batch.append
        body_bytes = 0
        upto = 0
        expiring: list[Message] = []
        new = tuple.__new__  # Message(...) through its __new__ costs twice as much, per message
        for seq, exchange, routing_key, header, body in messages:
            message = new(Message, (msg_id, False, exchange, routing_key, header, body))
            append(message)
            msg_id += 1
            body_bytes += len(body)
            if seq > upto:
                upto = seq
            if header[HEADER_PROPS_OFFSET] & EXPIRATION_HIGH_BIT:
                expiring.append(message)
        self._next_id = msg_id
        self.counters.publish += len(batch)
        if self._queue_ttl is not None or expiring:
            self._stamp_expiry(batch if self._queue_ttl is not None else expiring)
        ready = self._ready
        if batch and not ready and self._consumers.credit_total() >= len(batch):
            # nothing waits and the consumers take it all: straight through, as RabbitMQ's
            # publish_delivered (the ready list files them as taken)
            effects = self._hand_out(ready.pass_on(batch, body_bytes))
        else:
            ready.extend(batch, body_bytes)
            effects = self._deliver(check_expiry=False)
        if self._limited or self._expiry:
            effects.extend(self._housekeep())
        if refused:
            if self.settings.overflow == REJECT_PUBLISH_DLX:
                effects.extend(self._dead_letter(
                    [Message(0, False, *p[1:]) for p in refused], deadletter.MAXLEN))
            seqs = [p[0] for p in refused if p[0]]
            if seqs:
                effects.append(Send(channel, Rejected(seqs)))
            for seq, *_ in refused:
                if seq > upto:
                    upto = seq
        if upto:
            self._confirm(channel, upto, effects)
        return effects

    def _admit(self, messages: Sequence[Published]) -> tuple[list[Published], list[Published]]:
        """reject-publish(-dlx): RabbitMQ's will_overflow, message by message, before enqueueing.

        A message a consumer takes at once never counts as ready, so consumer credit is spent first.
        """
        settings = self.settings
        max_length = settings.max_length if settings.max_length is not None else float("inf")
        max_bytes = settings.max_length_bytes if settings.max_length_bytes is not None else float("inf")
        credit = self._consumers.credit_total()
        length, nbytes = len(self._ready), self._ready.body_bytes
        admitted: list[Published] = []
        refused: list[Published] = []
        for published in messages:
            size = len(published[4])
            if length + 1 > max_length or nbytes + size > max_bytes:
                refused.append(published)
                continue
            admitted.append(published)
            if credit:
                credit -= 1
            else:
                length += 1
                nbytes += size
        return admitted, refused

    def _stamp_expiry(self, messages: list[Message]) -> None:
        now, queue_ttl, expiry = self._now, self._queue_ttl, self._expiry
        for message in messages:
            ttl = queue_ttl
            if message[HEADER][HEADER_PROPS_OFFSET] & EXPIRATION_HIGH_BIT:
                own = expiration_ms(message[HEADER])
                if own is not None and (ttl is None or own < ttl):
                    ttl = own
            if ttl is not None:
                expiry[message[MSG_ID]] = now + ttl

    # -- consumers ------------------------------------------------------------------------------

    def consume(self, channel: Hashable, consumer_tag: str, *, ack_required: bool, credit: int,
                exclusive: bool = False, arguments: dict[str, Any] | None = None,
                now_ms: int | None = None) -> list[Effect] | AmqpError:
        """Add a consumer with `credit` and deliver to it at once what it can take."""
        self._clock(now_ms)
        consumers = self._consumers
        if consumers.exclusive is not None or (exclusive and len(consumers)):
            return AmqpError(ACCESS_REFUSED, f"queue '{self.name}' in vhost '{self.vhost}' in exclusive use")
        if consumers.get(channel, consumer_tag) is not None:
            return AmqpError(NOT_ALLOWED, f"attempt to reuse consumer tag '{consumer_tag}'")
        consumers.add(Consumer(channel, consumer_tag, ack_required, credit, exclusive, dict(arguments or {})))
        self._had_consumers = True
        effects = self._deliver()
        if self._expiry:
            effects.extend(self._housekeep())
        if self.settings.expires_ms is not None and len(consumers) == 1:
            effects.append(CancelTimer(EXPIRES_TIMER))
        return effects

    def cancel(self, channel: Hashable, consumer_tag: str, *, now_ms: int | None = None) -> list[Effect]:
        """Remove a consumer; its unacknowledged messages stay with its channel."""
        self._clock(now_ms)
        consumer = self._consumers.get(channel, consumer_tag)
        if consumer is None:
            return []
        was_active = consumer is self._consumers.active
        self._consumers.remove(consumer)
        effects = self._deliver() if was_active else []  # single active consumer: the next one takes over
        effects.extend(self._auto_delete_check())
        effects.extend(self._touch())
        return effects

    def grant(self, channel: Hashable, consumer_tag: str, credit: int, *,
              now_ms: int | None = None) -> list[Effect]:
        """Add `credit` to a consumer and deliver what it allows."""
        if now_ms is not None and now_ms > self._now:  # inline _clock: the hot path
            self._now = now_ms
        consumer = self._consumers.get(channel, consumer_tag)
        if consumer is None or credit <= 0:
            return []
        self._consumers.grant(consumer, credit)
        effects = self._deliver()
        if self._expiry:
            effects.extend(self._housekeep())
        return effects

    def get(self, channel: Hashable, *, ack_required: bool,
            now_ms: int | None = None) -> tuple[Message | None, int, list[Effect]]:
        """basic.get: the next ready message (or None), how many stay ready after it, and effects
        (expired messages dead-lettered on the way, the x-expires timer restarted)."""
        self._clock(now_ms)
        taken, effects = self._take(1)
        counters = self.counters
        if taken:
            message = taken[0]
            if ack_required:
                counters.get += 1
                self._hold(channel, taken)
            else:
                counters.get_no_ack += 1
                self._ready.forget([message[MSG_ID]])
                if self._expiry:
                    self._expiry.pop(message[MSG_ID], None)
        else:
            counters.get_empty += 1
            message = None
        if self._expiry:
            effects.extend(self._housekeep())
        effects.extend(self._touch())
        return message, (len(self._ready) if message is not None else 0), effects

    # -- settling -------------------------------------------------------------------------------

    def settle(self, channel: Hashable, *, acked: Sequence[int] = (), requeued: Sequence[int] = (),
               discarded: Sequence[int] = (), now_ms: int | None = None) -> list[Effect]:
        """Settle msg_ids that `channel` holds; ids it does not hold are ignored."""
        if now_ms is not None and now_ms > self._now:  # inline _clock: the hot path
            self._now = now_ms
        held = self._unacked.get(channel)
        if held is None:
            return []
        pop = held.pop
        gone_bytes = 0
        gone: list[int] = []
        for msg_id in acked:
            message = pop(msg_id, None)
            if message is not None:
                gone.append(msg_id)
                gone_bytes += len(message[HEADER]) + len(message[BODY])
        acked_count = len(gone)
        self.counters.ack += acked_count
        if self._expiry:
            self._forget(acked)
        dropped = [m for msg_id in discarded if (m := pop(msg_id, None)) is not None]
        gone.extend([m[MSG_ID] for m in dropped])
        self._ready.forget(gone)
        back = [m for msg_id in requeued if (m := pop(msg_id, None)) is not None]
        gone_bytes += sum([size_bytes(m) for m in dropped]) + sum([size_bytes(m) for m in back])
        self._unacked_count -= acked_count + len(dropped) + len(back)
        self._unacked_bytes -= gone_bytes
        if not held:
            del self._unacked[channel]
        effects = self._dead_letter(dropped, deadletter.REJECTED)
        if back:
            self.counters.redeliver += len(back)
            self._ready.requeue(back)
            effects = self._deliver() + effects
            if self._limited or self._expiry:
                effects.extend(self._housekeep())
        return effects

    def channels(self) -> set[Hashable]:
        """The channels this queue knows: those with a consumer here or unacknowledged messages."""
        return {c.channel for c in self._consumers} | set(self._unacked)

    def channel_down(self, channel: Hashable, *, now_ms: int | None = None) -> list[Effect]:
        """The channel closed: drop its consumers and requeue everything it held (redelivered)."""
        self._clock(now_ms)
        lost = self._consumers.on_channel(channel)
        for consumer in lost:
            self._consumers.remove(consumer)
        held = self._unacked.pop(channel, None)
        effects: list[Effect] = []
        if held:
            self._unacked_count -= len(held)
            self._unacked_bytes -= sum([size_bytes(m) for m in held.values()])
            self.counters.redeliver += len(held)
            self._ready.requeue(held.values())
        if held or lost:
            effects = self._deliver()  # lost may have held the single-active role
            if self._limited or self._expiry:
                effects.extend(self._housekeep())
        if lost:
            effects.extend(self._auto_delete_check())
            effects.extend(self._touch())
        return effects

    # -- queue-level operations -----------------------------------------------------------------

    def purge(self) -> int:
        """queue.purge: drop every READY message (unacknowledged ones stay); return how many."""
        n = self._ready.clear()  # first: draining a durable queue reads expiries back from disk
        if self._expiry:  # keep only the expiry of unacknowledged messages
            held = self._unacked.values()
            expiry = self._expiry
            for msg_id in [i for i in expiry if not any(i in h for h in held)]:
                del expiry[msg_id]
        return n

    def delete(self, *, if_unused: bool, if_empty: bool) -> tuple[int, list[Effect]] | AmqpError:
        """queue.delete: check the conditions (not-empty first, as RabbitMQ), then drop everything.

        "Empty" means no READY messages, as in RabbitMQ: unacknowledged ones do not count.
        Returns the ready count (delete-ok's message-count) and a ConsumerCancelled per consumer.
        """
        where = f"queue '{self.name}' in vhost '{self.vhost}'"
        if if_empty and len(self._ready):
            return AmqpError(PRECONDITION_FAILED, f"{where} not empty")
        if if_unused and len(self._consumers):
            return AmqpError(PRECONDITION_FAILED, f"{where} in use")
        effects: list[Effect] = [Send(c.channel, ConsumerCancelled(c.tag)) for c in self._consumers]
        self._consumers.clear()
        self._unacked.clear()
        self._unacked_count = 0
        self._unacked_bytes = 0
        n = self._ready.clear()  # first: draining a durable queue reads expiries back from disk
        self._expiry.clear()
        return n, effects

    # -- internals ------------------------------------------------------------------------------

    def _take(self, n: int, check_expiry: bool = True) -> tuple[list[Message], list[Effect]]:
        """Up to `n` ready messages from the head; expired ones met on the way are dead-lettered."""
        ready = self._ready
        expiry = self._expiry
        taken = ready.take(n)
        # tested after the take: reading recovered messages back from disk may fill `expiry`
        if not expiry or not check_expiry:
            return taken, []
        now = self._now
        out: list[Message] = []
        expired: list[Message] = []
        while taken:
            for message in taken:
                at = expiry.get(message[MSG_ID])
                (expired if at is not None and now >= at else out).append(message)
            taken = ready.take(n - len(out)) if len(out) < n else []
        if expired:
            ready.forget([m[MSG_ID] for m in expired])
        return out, self._dead_letter(expired, deadletter.EXPIRED)

    def _deliver(self, check_expiry: bool = True) -> list[Effect]:
        """Deliver ready messages while any consumer has credit: one Deliver per consumer."""
        ready = self._ready
        if not ready:
            return []
        credit = self._consumers.credit_total()
        if not credit:
            return []
        taken, dead = self._take(credit, check_expiry)
        effects = self._hand_out(taken) if taken else []
        assert not ready or not self._consumers.credit_total(), "delivery stopped with credit left"
        return effects + dead

    def _hand_out(self, taken: list[Message]) -> list[Effect]:
        """Messages taken from the ready list, to the consumers by their credit: one Deliver each."""
        ready = self._ready
        effects: list[Effect] = []
        expiry = self._expiry
        counters = self.counters
        for consumer, messages in self._consumers.distribute(taken):
            if consumer.ack_required:
                counters.deliver += len(messages)
                self._hold(consumer.channel, messages)
            else:
                counters.deliver_no_ack += len(messages)
                ready.forget([m[MSG_ID] for m in messages])
                if expiry:
                    self._forget([m[MSG_ID] for m in messages])
            effects.append(Send(consumer.channel, Deliver(consumer.tag, messages)))
        return effects

    def _housekeep(self) -> list[Effect]:
        """After a change: drop-head down to the limits (maxlen), then drop expired messages at the
        head (expired), as RabbitMQ's maybe_drop_head then drop_expired_msgs; arm the TTL timer."""
        ready = self._ready
        effects: list[Effect] = []
        settings = self.settings
        if self._limited and settings.overflow == DROP_HEAD:
            max_length, max_bytes = settings.max_length, settings.max_length_bytes
            over: list[Message] = []
            while ready and ((max_length is not None and len(ready) > max_length)
                             or (max_bytes is not None and ready.body_bytes > max_bytes)):
                over.extend(ready.take(1))
            ready.forget([m[MSG_ID] for m in over])
            effects.extend(self._dead_letter(over, deadletter.MAXLEN))
        expiry = self._expiry
        if expiry:
            now = self._now
            expired: list[Message] = []
            while ready:
                at = expiry.get(ready.head_id())
                if at is None or now < at:
                    break
                expired.extend(ready.take(1))
            ready.forget([m[MSG_ID] for m in expired])
            effects.extend(self._dead_letter(expired, deadletter.EXPIRED))
            head_at = expiry.get(ready.head_id()) if ready else None
            if head_at is not None and (self._ttl_timer_at is None or head_at < self._ttl_timer_at):
                self._ttl_timer_at = head_at
                effects.append(StartTimer(TTL_TIMER, head_at - now))
        return effects

    def _touch(self) -> list[Effect]:
        """x-expires: (re)start the period while the queue has no consumers."""
        expires = self.settings.expires_ms
        if expires is None or self._consumers:
            return []
        return [StartTimer(EXPIRES_TIMER, expires)]

    def _forget(self, msg_ids: Sequence[int]) -> None:
        pop = self._expiry.pop
        for msg_id in msg_ids:
            pop(msg_id, None)

    def _hold(self, channel: Hashable, messages: list[Message]) -> None:
        """File delivered messages as unacknowledged under the channel that holds them."""
        held = self._unacked.get(channel)
        if held is None:
            self._unacked[channel] = held = {}
        held.update([(m[MSG_ID], m) for m in messages])
        self._unacked_count += len(messages)
        self._unacked_bytes += sum([len(m[HEADER]) + len(m[BODY]) for m in messages])

    def _dead_letter(self, messages: list[Message], reason: str) -> list[Effect]:
        """Messages leaving for `reason`: republished to the dead-letter exchange if one is set
        (and a router is known), else dropped."""
        if not messages:
            return []
        if self._expiry:
            self._forget([m[MSG_ID] for m in messages])
        exchange = self.settings.dead_letter_exchange
        if exchange is None or self._router is None or self._place is None:
            return []
        return list(deadletter.dead_letter(self._router, self._place, self.vhost, self.name, messages, reason,
                                           exchange, self.settings.dead_letter_routing_key, self._now))

    def _auto_delete_check(self) -> list[Effect]:
        if self.auto_delete and self._had_consumers and not self._consumers:
            return [Send(self._node, AutoDeleteQueue(self.vhost, self.name))]
        return []
