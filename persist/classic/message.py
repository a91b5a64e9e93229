"""The message record a classic queue holds, and the few operations on it.

Theory of operation: a message is one flat record (a NamedTuple), built once when the queue
enqueues it and handed out unchanged on delivery, so the hot path allocates nothing per delivery:

    (msg_id, redelivered, exchange, routing_key, header, body)

which is exactly what a `Deliver` (actors/messages/channel_queue.py) carries. `header` is the raw content-header payload and
`body` the body bytes; the queue never decodes either. The only field that ever changes is
`redelivered`, and it changes one way (False -> True) when a message is requeued, which builds a new
tuple (`requeued`). This record is the seam a paged store will replace: whatever holds messages later
must still yield these tuples in msg_id order.
"""
from __future__ import annotations

from typing import NamedTuple


class Message(NamedTuple):
    msg_id: int
    redelivered: bool
    exchange: str
    routing_key: str
    header: bytes
    body: bytes


MSG_ID = 0
REDELIVERED = 1
EXCHANGE = 2
ROUTING_KEY = 3
HEADER = 4
BODY = 5


def requeued(message: Message) -> Message:
    """The same message flagged redelivered, as it goes back to the ready list."""
    if message[REDELIVERED]:
        return message
    return Message(message[MSG_ID], True, *message[EXCHANGE:])


def size_bytes(message: Message) -> int:
    """Bytes of payload the queue holds for this message (header + body), for memory stats."""
    return len(message[HEADER]) + len(message[BODY])
