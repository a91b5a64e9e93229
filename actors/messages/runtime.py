"""What the runtime itself sends between mailboxes (actors/runtime/mailbox.py).

`Credit` grants travel back from a receiver to a sender (flow/credit.py); with `link_closed` it
goes the other way and says that the sender is gone (mailbox.py: `remove`). `Undelivered` answers a
message whose target actor does not exist (its host is restarting, or it was removed), carrying
the message itself, so a sender waiting for a reply or a confirm learns it will not come; `gone`
when the actor was removed for good (a deleted queue), not lost with its host.
`Address` is registered so that addresses can travel inside other messages. A frame whose first
byte is `RAW_FRAME` is no envelope but a protocol's own (mailbox.py's raw frames).
"""
from __future__ import annotations

from typing import Any

from actors.messages import message, register
from actors.runtime.address import Address

register(Address)

RAW_FRAME = 0xC1  # msgpack never uses this byte, so no envelope starts with it


@message
class Credit:
    amount: int
    # sent the other way, by the runtime of an actor removed, to each actor it sent to with
    # credit: that link is closed, its receiver drops it (amount 0; a node of older code reads
    # a grant of 0, which changes nothing)
    link_closed: bool = False


@message
class Undelivered:
    msg: Any
    gone: bool = False
