"""Channel <-> classic queue: publishing, consuming, settling, and the queue's answers.

Channel to queue: `Publish` (a batch of `Published` records; it takes one credit per record on the
channel's link to the queue), `Settle`, `Grant` (consumer credit, flow/qos.py), `ChannelDown`, and
the requests `Consume`, `Cancel`, `Get`, `Purge`, answered with `Reply` (calls.py). Queue to channel:
`Deliver` (a batch of `Message` records for one consumer), `Confirm` (every confirm seq up to
`upto` is enqueued - for a durable queue: on disk), `Rejected` (these seqs were refused:
x-overflow reject-publish), `ConsumerCancelled` (basic.cancel from the server). A dead-lettering
queue sends `Publish` to its target queues too, with seq 0 (no confirm).
"""
from __future__ import annotations

from typing import NamedTuple

from actors.messages import message
from persist.classic.message import Message
from wire.codec import FieldTable


class Published(NamedTuple):
    seq: int  # the channel's confirm seq, 0 when the channel is not in confirm mode
    exchange: str
    routing_key: str
    header: bytes  # the content header payload as received: never re-encoded
    body: bytes


@message
class Publish:
    messages: list[Published]


@message
class Settle:
    acked: list[int]
    requeued: list[int]
    discarded: list[int]


@message
class Grant:
    consumer_tag: str
    credit: int


@message
class ChannelDown:
    """The channel is gone: requeue what it holds unacked here and drop its consumers."""


@message
class Consume:
    rid: int
    consumer_tag: str
    ack_required: bool
    credit: int
    exclusive: bool
    arguments: FieldTable


@message
class Cancel:
    rid: int
    consumer_tag: str


@message
class Get:
    rid: int
    ack_required: bool


@message
class GetResult:
    """The value of the Reply to `Get`: the message (None: queue empty) and the ready count left."""

    message: Message | None
    remaining: int


@message
class Purge:
    rid: int


@message
class Deliver:
    consumer_tag: str
    messages: list[Message]


@message
class Confirm:
    upto: int


@message
class Rejected:
    seqs: list[int]


@message
class ConsumerCancelled:
    consumer_tag: str
