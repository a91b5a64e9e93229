"""Channel -> channel: direct reply-to (actors/channel/reply_to.py).

A publish to "amq.rabbitmq.reply-to.<channel>.<key>" is sent straight to the channel that issued
the name, without a queue; that channel delivers it if `key` is still its reply consumer's.
"""
from __future__ import annotations

from actors.messages import message


@message
class DirectReply:
    key: str
    exchange: str
    routing_key: str
    header: bytes
    body: bytes
