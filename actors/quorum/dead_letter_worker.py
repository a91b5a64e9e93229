"""Dead-lettering out of quorum queues: where the copies go, and the at-least-once worker's books.

Theory of operation (rabbit_fifo_dlx_worker, RabbitMQ 4.0). A quorum queue's leader hands its
dead-lettered messages to the node's one `DeadLetters` (its shell is actors/quorum/dead_letter_shell.py):
- at-most-once (front.DeadLettered): the copies are published without confirms (seq 0), as classic
  queues do (actors/queue/deadletter.py writes x-death and picks the target queues); nothing waits.
- at-least-once (front.DeadLetterHanded): each message the machine checked out to the worker
  (msg_id, at most 32 held) is published to every target queue with a publisher-confirm seq of its
  own; once EVERY target confirmed it, the message is settled (`settled` returns it per source
  member, which proposes commands.DeadLetterSettle). A message that routes nowhere (no such
  exchange, no binding) or that a target rejected (a full reject-publish queue, say) stays with the
  worker and is published again `RETRY_MS` later, so the source queue keeps it meanwhile, as
  RabbitMQ's worker keeps retrying.
A source member that stops leading, or stops dead-lettering at-least-once, is `forget`-ten: its next
leader re-attaches and gets everything unsettled again (dead-letter msg ids start over), so what
this worker held is not needed any more; a confirm arriving later finds nothing and is ignored.

Sequences: one counter for the worker, so seqs to each target queue rise; a target's `Confirm(upto)`
covers every seq up to `upto` sent to it, and `Rejected(seqs)` comes before the Confirm whose range
covers them (the queues' ordering rule), so a rejected seq is never taken for confirmed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Hashable

from actors.messages.channel_queue import Publish, Published
from actors.queue.deadletter import Router, copy_and_targets
from effects import Send
from persist.classic.message import Message

RETRY_MS = 1000  # how long an unroutable or rejected copy waits before it is published again


@dataclass(frozen=True, slots=True)
class Source:
    """A quorum queue whose leader dead-letters through this worker, and where its copies go."""

    member: str  # the leading member's id
    vhost: str
    queue: str
    exchange: str
    routing_key: str | None


@dataclass(slots=True)
class Held:
    source: Source
    msg_id: int
    reason: str
    message: Message
    waiting: set[Hashable] = field(default_factory=set)  # target queues that have not confirmed
    retry_at: int | None = None  # when to publish again (nothing routed, or a target refused)


class DeadLetters:
    def __init__(self, router: Router, place: Callable[[str, str], Hashable]) -> None:
        self.router = router
        self.place = place
        self.next_seq = 1
        self.held: dict[tuple[str, int], Held] = {}  # (member, msg_id) -> what waits for confirms
        self.sent: dict[Hashable, dict[int, tuple[str, int]]] = {}  # target -> seq -> (member, msg_id)

    def at_most_once(self, source: Source, reason: str, messages: tuple[Message, ...], now_ms: int) -> list[Send]:
        sends: dict[Hashable, list[Published]] = {}
        for message in messages:
            record, targets = self._copy(source, reason, message, now_ms)
            for target in targets:
                sends.setdefault(target, []).append(record)
        return [Send(to, Publish(batch)) for to, batch in sends.items()]

    def hand(self, source: Source, items: tuple[tuple[int, str, Message], ...], now_ms: int) -> list[Send]:
        """At-least-once: messages checked out to the worker, (msg_id, reason, message)."""
        batches: dict[Hashable, list[Published]] = {}
        for msg_id, reason, message in items:
            held = self.held.get((source.member, msg_id))
            if held is None:
                held = self.held[(source.member, msg_id)] = Held(source, msg_id, reason, message)
            self._publish(held, now_ms, batches)
        return [Send(to, Publish(batch)) for to, batch in batches.items()]

    def confirmed(self, target: Hashable, upto: int) -> dict[str, list[int]]:
        """A target confirmed every seq up to `upto`: the messages now confirmed by all their
        targets, by source member."""
        sent = self.sent.get(target)
        settled: dict[str, list[int]] = {}
        if not sent:
            return settled
        for seq in [s for s in sent if s <= upto]:
            key = sent.pop(seq)
            held = self.held.get(key)
            if held is None:
                continue  # forgotten meanwhile
            held.waiting.discard(target)
            if not held.waiting and held.retry_at is None:
                del self.held[key]
                settled.setdefault(key[0], []).append(key[1])
        return settled

    def rejected(self, target: Hashable, seqs: list[int], now_ms: int) -> None:
        """A target refused these copies: they are published again later (to that target only
        matters, but the message goes again to every target that has not confirmed it)."""
        sent = self.sent.get(target, {})
        for seq in seqs:
            key = sent.pop(seq, None)
            held = self.held.get(key) if key is not None else None
            if held is not None:
                held.waiting.discard(target)
                held.retry_at = now_ms + RETRY_MS

    def retry(self, now_ms: int) -> list[Send]:
        """Publish again what is due: unroutable copies and rejected ones."""
        batches: dict[Hashable, list[Published]] = {}
        for held in self.held.values():
            if held.retry_at is not None and held.retry_at <= now_ms:
                self._publish(held, now_ms, batches)
        return [Send(to, Publish(batch)) for to, batch in batches.items()]

    def forget(self, member: str) -> None:
        """The member stopped leading or stopped dead-lettering at-least-once."""
        for key in [k for k in self.held if k[0] == member]:
            del self.held[key]

    def _publish(self, held: Held, now_ms: int, batches: dict[Hashable, list[Published]]) -> None:
        record, targets = self._copy(held.source, held.reason, held.message, now_ms)
        if not targets:
            held.retry_at = now_ms + RETRY_MS
            return
        held.retry_at = None
        for target in targets:
            seq = self.next_seq
            self.next_seq += 1
            self.sent.setdefault(target, {})[seq] = (held.source.member, held.msg_id)
            held.waiting.add(target)
            batches.setdefault(target, []).append(record._replace(seq=seq))

    def _copy(self, source: Source, reason: str, message: Message, now_ms: int) -> tuple[Published, list[Hashable]]:
        record, names = copy_and_targets(self.router, source.vhost, source.queue, message, reason,
                                         source.exchange, source.routing_key, now_ms)
        return record, [self.place(source.vhost, name) for name in names]
