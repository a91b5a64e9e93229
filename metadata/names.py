"""Name rules for exchanges and queues, as RabbitMQ 3.10 applies them.

Theory of operation: names arrive as the client sent them. RabbitMQ strips CR and LF from every
exchange and queue name before anything else (so "a\\r\\nb" names the queue "ab"); names starting
"amq." are reserved for the server on creation (redeclaring an existing amq.* entity with equal
properties is allowed, creating one is not). Server-named queues are "amq.gen-" followed by the
URL-safe base64 (no padding) of 16 random bytes, 22 characters: the randomness is injected.
"""
from __future__ import annotations

import base64
import hashlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the type only: cores never import random at run time
    from random import Random

RESERVED_PREFIX = "amq."
SERVER_NAMED_PREFIX = "amq.gen-"
SERVER_NAME_RANDOM_BYTES = 16

_CR_LF = str.maketrans("", "", "\r\n")


def strip_cr_lf(name: str) -> str:
    return name.translate(_CR_LF) if ("\r" in name or "\n" in name) else name


def is_reserved(name: str) -> bool:
    return name.startswith(RESERVED_PREFIX)


def server_name(rng: "Random | None", counter: int) -> str:
    """A fresh "amq.gen-..." name. Without an rng (tests, replicas that never name queues) the bytes
    are a hash of `counter`, so they are deterministic; the authoritative copy is given an rng."""
    if rng is not None:
        raw = rng.randbytes(SERVER_NAME_RANDOM_BYTES)
    else:
        raw = hashlib.blake2b(counter.to_bytes(8, "big"), digest_size=SERVER_NAME_RANDOM_BYTES).digest()
    return SERVER_NAMED_PREFIX + base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
