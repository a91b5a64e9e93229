"""The quorum queue machine's command vocabulary and its one wire format.

Theory of operation: every change to a quorum queue is one of these records, proposed by a member's
shell, appended to the Raft log as `encode(command)` bytes and applied on every member by
`machine.QuorumMachine.apply`, which calls `decode`. The encoding is a msgpack array
`[code, field, ...]` in field order (a nested `QueueSettings` as an array of its own); tuples come
back as tuples, str as str, bytes as bytes, so `decode(encode(c)) == c`.

Time is data: every command carries the proposer's `now_ms` (wall-clock milliseconds, as
rabbit_fifo uses the system_time of the Raft entry), so every member decides TTL expiry, x-expires
and timers identically; the machine never reads a clock and treats time as max(seen, now_ms).

Identities: a channel is a str the shells agree on (its actor address); a consumer is
(channel, consumer tag); a publisher is the channel that enqueues, with `seq` numbering ITS enqueues
to this queue 1, 2, 3... without gaps (not the channel's confirm seq, which skips the publishes
routed elsewhere): the machine drops a duplicate seq and refuses a gap, which is how a publisher
that resends after a leader change gets each message in exactly once (rabbit_fifo's enqueuers).
`publisher=None` enqueues untracked (seq ignored). Settle, Return, Discard and Requeue may leave
`tag` empty: then each msg id goes to whichever consumer of the channel holds it (msg ids are unique
over the queue's life), which is all a channel's classic `Settle` message says.

Bodies stay in the log: `published(data)` gives a shell that reads entry bytes back for a delivery
(exchange, routing key, header, body) of the Enqueue or Requeue they hold.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import msgpack

from actors.quorum.config import QueueSettings

MsgIds = tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Enqueue:
    """basic.publish routed here. `header` is the raw content-header payload, `body` the body."""

    now_ms: int
    publisher: str | None
    seq: int
    exchange: str
    routing_key: str
    header: bytes
    body: bytes


@dataclass(frozen=True, slots=True)
class Checkout:
    """basic.consume. `prefetch` is the consumer's credit (0: unlimited, capped at
    machine.CREDIT_UNLIMITED as rabbit_fifo_client does); with `ack` it is topped up as deliveries
    are settled, without `ack` deliveries are settled as they leave and the channel tops credit up
    with `Credit`. `priority` is x-priority; `exclusive` is recorded only (RabbitMQ 4.0 does not
    enforce exclusive consumers on quorum queues: single active consumer is their exclusivity)."""

    now_ms: int
    channel: str
    tag: str
    prefetch: int
    ack: bool
    priority: int = 0
    exclusive: bool = False


@dataclass(frozen=True, slots=True)
class Credit:
    """Give a consumer `credit` more deliveries (a no-ack consumer's channel, as it writes)."""

    now_ms: int
    channel: str
    tag: str
    credit: int


@dataclass(frozen=True, slots=True)
class Cancel:
    """basic.cancel: no more deliveries; unacked messages stay with the consumer until settled."""

    now_ms: int
    channel: str
    tag: str


@dataclass(frozen=True, slots=True)
class Settle:
    """basic.ack of these deliveries."""

    now_ms: int
    channel: str
    tag: str
    msg_ids: MsgIds


@dataclass(frozen=True, slots=True)
class Return:
    """basic.reject / basic.nack with requeue: back near the head (or dead-lettered when past the
    delivery limit). With an unlimited delivery limit the shell proposes `Requeue`s instead."""

    now_ms: int
    channel: str
    tag: str
    msg_ids: MsgIds


@dataclass(frozen=True, slots=True)
class Discard:
    """basic.reject / basic.nack without requeue: dead-lettered with reason `rejected`, or dropped."""

    now_ms: int
    channel: str
    tag: str
    msg_ids: MsgIds


@dataclass(frozen=True, slots=True)
class Requeue:
    """A requeue to the BACK of the queue (delivery limit unlimited, 4.0): the shell read delivery
    `msg_id`'s message from the log at `index` and appends it again, so the old entry can go."""

    now_ms: int
    channel: str
    tag: str
    msg_id: int
    index: int
    exchange: str
    routing_key: str
    header: bytes
    body: bytes


@dataclass(frozen=True, slots=True)
class ChannelDown:
    """The channel is gone: its consumers are removed and their unacked messages come back."""

    now_ms: int
    channel: str


@dataclass(frozen=True, slots=True)
class ConsumersDown:
    """The channel is out of reach (its node was seen down: a partition, a pause or a crash, which
    no member can tell apart): its consumers are removed and their unacked messages come back, as
    ChannelDown does, but its publisher sequence stays, so a channel that was only out of reach
    publishes on where it left off (its next seq is no gap) and a resend is still dropped once."""

    now_ms: int
    channel: str


@dataclass(frozen=True, slots=True)
class Purge:
    """queue.purge: drop every ready message (not the unacked ones)."""

    now_ms: int


@dataclass(frozen=True, slots=True)
class Get:
    """basic.get; `tag` is a name the channel picks for this one delivery (a consumer of one
    message, settled with Settle/Return/Discard under that tag when `ack`)."""

    now_ms: int
    channel: str
    tag: str
    ack: bool


@dataclass(frozen=True, slots=True)
class UpdateSettings:
    """A policy changed: the new effective settings (config.resolve_settings)."""

    now_ms: int
    settings: QueueSettings


@dataclass(frozen=True, slots=True)
class Tick:
    """A timer the machine asked for (effects.Timer) fired: expire messages and check x-expires."""

    now_ms: int


@dataclass(frozen=True, slots=True)
class DeadLetterCheckout:
    """The at-least-once dead-letter worker (re)attaches with `prefetch`
    (deadletter.WORKER_PREFETCH, 32, unless configured otherwise)."""

    now_ms: int
    worker: str
    prefetch: int


@dataclass(frozen=True, slots=True)
class DeadLetterSettle:
    """Every target queue confirmed these dead-lettered messages: they can go."""

    now_ms: int
    msg_ids: MsgIds


Command = (Enqueue | Checkout | Credit | Cancel | Settle | Return | Discard | Requeue | ChannelDown
           | Purge | Get | UpdateSettings | Tick | DeadLetterCheckout | DeadLetterSettle | ConsumersDown)

_CLASSES: tuple[type, ...] = (Enqueue, Checkout, Credit, Cancel, Settle, Return, Discard, Requeue,
                              ChannelDown, Purge, Get, UpdateSettings, Tick, DeadLetterCheckout,
                              DeadLetterSettle, ConsumersDown)  # append only: codes are in logs
_CODES = {cls: code for code, cls in enumerate(_CLASSES)}
_FIELDS = {cls: tuple(f.name for f in fields(cls)) for cls in _CLASSES}
_SETTINGS_FIELDS = tuple(f.name for f in fields(QueueSettings))
_ENQUEUE, _REQUEUE, _UPDATE = _CODES[Enqueue], _CODES[Requeue], _CODES[UpdateSettings]

# The types each field accepts: a command of the wrong shape must fail to decode, not fail the
# machine on every member (and again at every replay of the log).
_ACCEPTS: dict[str, type | tuple[type, ...]] = {
    "int": int, "str": str, "bytes": bytes, "bool": bool, "MsgIds": tuple,
    "str | None": (str, type(None)), "int | None": (int, type(None)), "QueueSettings": QueueSettings,
}
_TYPES = {cls: tuple(_ACCEPTS[str(f.type)] for f in fields(cls)) for cls in (*_CLASSES, QueueSettings)}
_ID_TUPLES = {cls: at for cls in _CLASSES
              if (at := tuple(i for i, f in enumerate(fields(cls)) if f.type == "MsgIds"))}

_packb = msgpack.Packer(use_bin_type=True).pack


def _unpackb(data: bytes) -> tuple:
    return msgpack.unpackb(data, raw=False, use_list=False)


def _build(cls: type, values: tuple) -> Any:
    types = _TYPES[cls]
    if len(values) != len(types) or not all(map(isinstance, values, types)):
        raise ValueError(f"malformed {cls.__name__}: {values!r:.200}")
    for at in _ID_TUPLES.get(cls, ()):
        if not all(isinstance(i, int) for i in values[at]):
            raise ValueError(f"malformed {cls.__name__}: {values!r:.200}")
    return cls(*values)


def encode(command: Command) -> bytes:
    cls = type(command)
    values: list[Any] = [_CODES[cls]]
    values += [getattr(command, name) for name in _FIELDS[cls]]
    if cls is UpdateSettings:
        values[2] = [getattr(command.settings, name) for name in _SETTINGS_FIELDS]
    return _packb(values)


def decode(data: bytes) -> Command:
    """The command `encode` wrote; ValueError for bytes that are not one."""
    try:
        values = _unpackb(data)
    except (ValueError, TypeError, msgpack.UnpackException) as e:
        raise ValueError(f"not a quorum queue command: {e}") from e
    if type(values) is not tuple or not values or type(values[0]) is not int \
            or not 0 <= values[0] < len(_CLASSES):
        raise ValueError(f"not a quorum queue command: {values!r:.200}")
    if values[0] == _UPDATE and len(values) == 3 and type(values[2]) is tuple:
        values = (values[0], values[1], _build(QueueSettings, values[2]))
    return _build(_CLASSES[values[0]], values[1:])


def published(data: bytes) -> tuple[str, str, bytes, bytes]:
    """(exchange, routing key, header, body) of the Enqueue or Requeue in a log entry's bytes."""
    values = _unpackb(data)
    if values[0] == _ENQUEUE:
        return values[4], values[5], values[6], values[7]
    if values[0] == _REQUEUE:
        return values[6], values[7], values[8], values[9]
    raise ValueError(f"log entry holds no message (command code {values[0]})")
