"""Peeking into a message's raw content header for the two properties the queue acts on.

Theory of operation: the queue never re-encodes a message it keeps (docs/DESIGN.md §5), and
decoding the whole property list costs more than enqueueing. Both properties the queue needs sit
behind flag bits in the first property-flag word (header payload offset 12), so the common case,
neither flag set, costs one byte test. Only `expiration` (bit 8) and `priority` (bit 11) are read:
priority with wire's fast reader, expiration by a full decode, since it comes
after four variable-length ones and is rare.
"""
from __future__ import annotations

from wire.codec import DECODE_ERRORS
from wire.properties import HEADER_PROPS_OFFSET, BasicProperties, read_priority

EXPIRATION_HIGH_BIT = 0x01  # property flag bit 8, in the high byte of the flag word
PRIORITY_HIGH_BIT = 0x08    # property flag bit 11


def has_expiration(header: bytes) -> bool:
    return bool(header[HEADER_PROPS_OFFSET] & EXPIRATION_HIGH_BIT)


def expiration_ms(header: bytes) -> int | None:
    """The per-message TTL in ms, or None when absent.

    The channel refuses a malformed expiration before it reaches a queue (as RabbitMQ does); one
    that slips through anyway is treated as absent rather than crashing the queue.
    """
    if not header[HEADER_PROPS_OFFSET] & EXPIRATION_HIGH_BIT:
        return None
    try:
        value = BasicProperties.decode(header, HEADER_PROPS_OFFSET).expiration
        ttl = int(value)
    except (*DECODE_ERRORS, TypeError, ValueError):
        return None
    return ttl if ttl >= 0 else None


def priority(header: bytes) -> int:
    """The message's priority property, 0 when absent (as RabbitMQ treats it)."""
    return read_priority(header) if header[HEADER_PROPS_OFFSET] & PRIORITY_HIGH_BIT else 0
