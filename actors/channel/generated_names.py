"""Names the server makes up for a client: consumer tags and queue names.

Theory of operation: RabbitMQ's generated names are a prefix ("amq.ctag-", "amq.gen-") and 22
url-safe base64 characters of 16 random bytes. The randomness is the channel's injected rng, so a
seeded run names the same things.
"""
from __future__ import annotations

import base64
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import random

CONSUMER_TAG_PREFIX = "amq.ctag-"
QUEUE_NAME_PREFIX = "amq.gen-"


def new_tag(rng: random.Random, prefix: str) -> str:
    """RabbitMQ's generated names: prefix + 22 url-safe base64 characters of 16 random bytes."""
    raw = rng.getrandbits(128).to_bytes(16, "big")
    return prefix + base64.urlsafe_b64encode(raw).decode().rstrip("=")
