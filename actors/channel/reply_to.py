"""Direct reply-to names: "amq.rabbitmq.reply-to.<channel>.<key>".

Theory of operation: a channel consuming from the pseudo-queue "amq.rabbitmq.reply-to" (no-ack
only) gets a name that says where replies go, so no queue is ever involved: the channel's runtime
address as text, base64-encoded like RabbitMQ's encoded pid, then a random key, also base64. A
publish to the default exchange with such a routing key is sent straight to that channel
("direct_reply"), which delivers it only if the key is still its current one; a cancelled or
re-created reply consumer gets a new key, so a stale name reaches nobody, as in RabbitMQ.
"""
from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING

from actors.channel.publish_checks import REPLY_TO_PREFIX

if TYPE_CHECKING:
    from random import Random


def new_key(rng: "Random") -> str:
    return base64.b64encode(rng.getrandbits(128).to_bytes(16, "big")).decode()


def reply_name(address_text: str, key: str) -> str:
    return f"{REPLY_TO_PREFIX}{base64.b64encode(address_text.encode()).decode()}.{key}"


def parse_reply_name(name: str) -> tuple[str, str] | None:
    """(address text, key) from a direct reply-to name; None when it is not one."""
    if not name.startswith(REPLY_TO_PREFIX):
        return None
    encoded, sep, key = name[len(REPLY_TO_PREFIX):].partition(".")
    if not sep or not key:
        return None
    try:
        return base64.b64decode(encoded, validate=True).decode(), key
    except (binascii.Error, UnicodeDecodeError):
        return None
