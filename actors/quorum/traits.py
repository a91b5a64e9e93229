"""What the quorum queue machine reads from a message's raw content header: priority and TTL.

Theory of operation: the machine keeps the header bytes in the log and never re-encodes them; at
enqueue it peeks at the two properties it acts on. Both sit behind bits of the first property-flag
word, so a message with neither costs one byte test. Priority (bit 11) is read with wire's fast
octet reader and only its class matters: above 4 is high (RabbitMQ 4.0's two priority levels).
Expiration (bit 8) is a shortstr behind four variable-length properties and rare, so it is read
with a full property decode; RabbitMQ wins the lower of it and x-message-ttl. A header the channel
should have refused (malformed, or an expiration that is not a non-negative integer) counts as
normal priority without a per-message TTL rather than failing the command on every member.
"""
from __future__ import annotations

from wire.codec import DECODE_ERRORS
from wire.properties import HEADER_PROPS_OFFSET, BasicProperties, read_priority

PRIORITY_HIGH_ABOVE = 4
_PRIORITY_BIT = 0x08    # flag bit 11, in the high byte of the flag word
_EXPIRATION_BIT = 0x01  # flag bit 8


def _expiration_ms(header: bytes) -> int | None:
    try:
        ttl = int(BasicProperties.decode(header, HEADER_PROPS_OFFSET).expiration)
    except (*DECODE_ERRORS, TypeError, ValueError):
        return None
    return ttl if ttl >= 0 else None


def traits(header: bytes, queue_ttl_ms: int | None) -> tuple[bool, int | None]:
    """(high priority?, the message's TTL in ms or None) for a content-header payload."""
    try:
        flags = header[HEADER_PROPS_OFFSET]
        high = bool(flags & _PRIORITY_BIT) and read_priority(header) > PRIORITY_HIGH_ABOVE
    except DECODE_ERRORS:
        return False, queue_ttl_ms
    if not flags & _EXPIRATION_BIT:
        return high, queue_ttl_ms
    ttl = _expiration_ms(header)
    if ttl is None or (queue_ttl_ms is not None and queue_ttl_ms < ttl):
        return high, queue_ttl_ms
    return high, ttl
