"""A classic queue's effective feature settings, from x-arguments at declare time or from a policy.

Theory of operation: RabbitMQ configures TTL, expiry, length limits and dead-lettering either with
queue arguments (`x-message-ttl`, ...) or with policy keys (`message-ttl`, ...). The node resolves
which one wins (issue 4, policies); the queue only ever holds ONE effective set, named by the policy
keys, and a later `apply_policy` replaces it whole. Arguments were validated at declare time
(metadata/arguments.py), so parsing here only normalises types (longstrs may arrive as bytes).
`x-max-priority` and `x-single-active-consumer` are arguments only and are read by the core directly.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

DROP_HEAD = "drop-head"
REJECT_PUBLISH = "reject-publish"
REJECT_PUBLISH_DLX = "reject-publish-dlx"

# queue argument -> policy key
ARGUMENT_KEYS = {
    "x-message-ttl": "message-ttl",
    "x-expires": "expires",
    "x-max-length": "max-length",
    "x-max-length-bytes": "max-length-bytes",
    "x-overflow": "overflow",
    "x-dead-letter-exchange": "dead-letter-exchange",
    "x-dead-letter-routing-key": "dead-letter-routing-key",
    "x-queue-mode": "queue-mode",
}
LAZY = "lazy"


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """The effective settings; None means "not set" (no TTL, no limit, no dead-letter exchange)."""

    message_ttl_ms: int | None = None
    expires_ms: int | None = None
    max_length: int | None = None
    max_length_bytes: int | None = None
    overflow: str = DROP_HEAD
    dead_letter_exchange: str | None = None
    dead_letter_routing_key: str | None = None
    queue_mode: str | None = None  # "lazy" keeps a durable queue's bodies on disk from the start

    @property
    def lazy(self) -> bool:
        return self.queue_mode == LAZY

    @property
    def limited(self) -> bool:
        return self.max_length is not None or self.max_length_bytes is not None

    @classmethod
    def from_policy(cls, settings: Mapping[str, Any]) -> "QueueSettings":
        """From policy-key names: message-ttl, expires, max-length, ..., dead-letter-routing-key."""
        return cls(
            message_ttl_ms=_int(settings.get("message-ttl")),
            expires_ms=_int(settings.get("expires")),
            max_length=_int(settings.get("max-length")),
            max_length_bytes=_int(settings.get("max-length-bytes")),
            overflow=_text(settings.get("overflow")) or DROP_HEAD,
            dead_letter_exchange=_text(settings.get("dead-letter-exchange")),
            dead_letter_routing_key=_text(settings.get("dead-letter-routing-key")),
            queue_mode=_text(settings.get("queue-mode")),
        )

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any]) -> "QueueSettings":
        """From declare-time x-arguments."""
        return cls.from_policy({key: arguments[arg] for arg, key in ARGUMENT_KEYS.items() if arg in arguments})
