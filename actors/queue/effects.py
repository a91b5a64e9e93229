"""Effects the classic queue core returns; the queue actor shell carries them out in list order."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable

from actors.queue.message import Message


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
class ConsumerCancelled:
    """The queue cancelled this consumer (queue deleted): the channel sends basic.cancel."""

    channel: Hashable
    consumer_tag: str


@dataclass(frozen=True, slots=True)
class AutoDelete:
    """An auto-delete queue lost its last consumer: the shell asks the node to delete it."""


QueueEffect = Deliver | Confirmed | ConsumerCancelled | AutoDelete
