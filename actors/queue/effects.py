"""Effects the classic queue core returns; the queue actor shell carries them out in list order.

Besides these, the core returns the shared `actors.effects` records: `Send(to, "publish", batch)`
for dead-lettered messages, and `StartTimer(name, ticks)` / `CancelTimer(name)` with ticks in
milliseconds, after which the shell calls `ClassicQueue.on_timer(name, now_ms=...)`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable

from actors.effects import CancelTimer, Send, StartTimer
from persist.classic.message import Message


@dataclass(frozen=True, slots=True)
class Deliver:
    """Deliver `messages` (ascending msg_id) to consumer `consumer_tag` on `channel`."""

    channel: Hashable
    consumer_tag: str
    messages: list[Message]


@dataclass(frozen=True, slots=True)
class Confirmed:
    """Every message `channel` published with confirm seq <= `upto` is now safely enqueued."""

    channel: Hashable
    upto: int


@dataclass(frozen=True, slots=True)
class Rejected:
    """The queue refused these confirm seqs of `channel` (x-overflow reject-publish / -dlx): the
    channel nacks them. Always emitted BEFORE the Confirmed of the same call, which may cover them."""

    channel: Hashable
    seqs: list[int]


@dataclass(frozen=True, slots=True)
class ConsumerCancelled:
    """The queue cancelled this consumer (queue deleted): the channel sends basic.cancel."""

    channel: Hashable
    consumer_tag: str


@dataclass(frozen=True, slots=True)
class AutoDelete:
    """Delete this queue if it is unused: an auto-delete queue lost its last consumer, or an
    x-expires queue stayed unused for its period. The shell asks the node (delete with if-unused)."""


QueueEffect = Deliver | Confirmed | Rejected | ConsumerCancelled | AutoDelete | Send | StartTimer | CancelTimer
