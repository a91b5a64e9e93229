"""What the quorum queue machine returns: effects for the leader's shell to carry out, and replies.

Theory of operation: `apply` returns (state, reply, effects). Every member computes the same
effects; only the leader's shell carries them out, in list order (a new leader first carries out
`QuorumMachine.on_leader`). The reply goes to whoever proposed the command.

Messages are named by their Raft index: the shell reads the entry (commands.published) to get the
exchange, routing key, header and body. Ordering rule: the shell reads the bodies a `Deliver`,
`DeadLetter`, `DeadLetterDeliver` or `GetOk` names BEFORE it lets the log compact past them — the
machine may already have forgotten a message it hands out settled (a no-ack consumer, a basic.get
without ack, at-most-once dead-lettering), so `live_indexes` no longer protects it. Reading them
while carrying out the effects of the same apply satisfies the rule, since compaction waits for a
snapshot written later.

A delivered message's `delivery_count` is rabbit_fifo's acquired count: how many times it went
back to the queue (returned, rejected, or its channel went down). It is what the shell puts in the
`x-delivery-count` header (RabbitMQ 4.0 adds the header when it is above 0; the 3.10 oracle also
sends 0 on first deliveries), and `redelivered` is `delivery_count > 0`. A `Release` in the same list
comes after the effects that name the messages it releases, so carrying them out in order reads
every body before the log may go.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

# (msg_id, raft index, delivery_count)
Delivered = tuple[int, int, int]

EXPIRE_MSGS = "expire_msgs"    # timer name: the head message's TTL
QUEUE_EXPIRY = "queue_expiry"  # timer name: x-expires

# dead-letter reasons, as in x-death
REJECTED = "rejected"
EXPIRED = "expired"
MAXLEN = "maxlen"
DELIVERY_LIMIT = "delivery_limit"


@dataclass(frozen=True, slots=True)
class Deliver:
    """Send these messages to consumer (channel, tag), in order. `delivered_before` counts the
    consumer's earlier deliveries, so a channel that has seen fewer knows it missed some
    (after a leader change) and asks `queries.checked_out` for them."""

    channel: str
    tag: str
    delivered_before: int
    messages: tuple[Delivered, ...]


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """At-most-once dead-lettering: publish these messages to `exchange` (with
    `routing_key` if set, else their own) with an x-death entry for `reason`; nothing confirms it.
    `messages` are (raft index, delivery_count)."""

    reason: str
    exchange: str
    routing_key: str | None
    messages: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class DeadLetterDeliver:
    """At-least-once dead-lettering: hand these to the worker, which publishes with confirms and
    proposes commands.DeadLetterSettle for those every target queue confirmed.
    `messages` are (dead-letter msg_id, reason, raft index, delivery_count)."""

    worker: str
    messages: tuple[tuple[int, str, int, int], ...]


@dataclass(frozen=True, slots=True)
class StartDeadLetterWorker:
    """The queue dead-letters at-least-once: the leader runs a worker, which attaches with
    commands.DeadLetterCheckout (rabbit_fifo_dlx_worker)."""


@dataclass(frozen=True, slots=True)
class StopDeadLetterWorker:
    """The queue no longer dead-letters at-least-once (its held messages were dropped)."""


@dataclass(frozen=True, slots=True)
class Timer:
    """Propose commands.Tick(now_ms) at wall-clock `at_ms`; replaces the timer of the same name."""

    name: str
    at_ms: int


@dataclass(frozen=True, slots=True)
class Release:
    """RabbitMQ's release cursor: no log entry up to and including `upto` is needed any more, so a
    snapshot taken at or after it may compact them (live_indexes says the same, exactly). Given
    when the queue lets go of its last message, and from time to time while it is busy."""

    upto: int


@dataclass(frozen=True, slots=True)
class DeleteQueue:
    """x-expires elapsed with the queue unused: ask the node to delete this queue."""


Effect = (Deliver | DeadLetter | DeadLetterDeliver | StartDeadLetterWorker | StopDeadLetterWorker
          | Timer | Release | DeleteQueue)


class Reply(Enum):
    OK = "ok"
    DUPLICATE = "duplicate"          # an enqueue seq already applied: confirm it, enqueue nothing
    REJECTED = "rejected"            # x-overflow reject-publish: the channel nacks it
    EMPTY = "empty"                  # basic.get-empty
    NOT_FOUND = "consumer_not_found"  # cancel of an unknown consumer
    INVALID = "invalid_command"      # bytes that decode to no command (a proposer's bug)


@dataclass(frozen=True, slots=True)
class OutOfSequence:
    """An enqueue skipped seqs: the publisher must resend from `expected`."""

    expected: int


@dataclass(frozen=True, slots=True)
class ConsumerInfo:
    """The checkout's outcome: `active` is False for a waiting single-active-consumer."""

    active: bool


@dataclass(frozen=True, slots=True)
class GetOk:
    """basic.get-ok for the message at raft `index`; `ready` is the message-count to report.
    With ack it is settled as delivery `msg_id` of consumer (channel, the Get's tag)."""

    msg_id: int
    index: int
    delivery_count: int
    ready: int


@dataclass(frozen=True, slots=True)
class Purged:
    count: int
