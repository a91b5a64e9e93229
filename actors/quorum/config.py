"""A quorum queue's configuration: what is fixed at declaration, and the settings policies change.

Theory of operation (rabbit_quorum_queue:gather_policy_config/2 and dead_letter_handler/2, 4.0):
the machine holds ONE effective `QueueSettings`. The node tells the queue's leader the policy that
applies to it as it is (the policy and the operator policy merged, metadata/policies.py, never
resolved against the arguments as a classic queue's are); the member computes the settings from
its x-arguments and that policy with `resolve_settings` and proposes them whole
(`commands.UpdateSettings`) whenever a policy changes. Which value wins, per key, as RabbitMQ:
- max-length, max-length-bytes, expires, message-ttl: the lower of argument and policy;
- overflow: the policy's; dead-letter-exchange, -routing-key, -strategy: the argument's;
- delivery-limit: the lower, unless either is negative (then the higher, so -1 on either side
  can lift the limit); absent on both sides means 4.0's default of 20, and a negative value means
  unlimited (None here).
The dead-letter handler follows from the settings: none without a dead-letter exchange;
at-least-once only with overflow reject-publish, otherwise it falls back to at-most-once.
`x-single-active-consumer` is an argument only, so it sits in `QueueConfig` with the queue's name
and creation time, which never change.

Values were validated at declaration (actors/metadata/arguments.py); longstrs may arrive as bytes
and are decoded here. x-overflow reject-publish-dlx, from the arguments or a policy, runs as
drop-head (RabbitMQ logs a warning and ignores it for quorum queues).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

DROP_HEAD = "drop-head"
REJECT_PUBLISH = "reject-publish"
AT_MOST_ONCE = "at-most-once"
AT_LEAST_ONCE = "at-least-once"
DELIVERY_LIMIT_DEFAULT = 20


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """The effective settings; None means not set (no limit, no TTL, no dead-letter exchange)."""

    max_length: int | None = None
    max_length_bytes: int | None = None
    overflow: str = DROP_HEAD
    message_ttl_ms: int | None = None
    expires_ms: int | None = None
    delivery_limit: int | None = DELIVERY_LIMIT_DEFAULT  # None: unlimited (-1 in arguments)
    dead_letter_exchange: str | None = None
    dead_letter_routing_key: str | None = None
    dead_letter_strategy: str = AT_MOST_ONCE

    @property
    def limited(self) -> bool:
        return self.max_length is not None or self.max_length_bytes is not None

    @property
    def dead_letter_handler(self) -> str | None:
        """None (messages are dropped), AT_MOST_ONCE or AT_LEAST_ONCE (rabbit_quorum_queue:dlh/5)."""
        if self.dead_letter_exchange is None:
            return None
        if self.dead_letter_strategy == AT_LEAST_ONCE and self.overflow == REJECT_PUBLISH:
            return AT_LEAST_ONCE
        return AT_MOST_ONCE


@dataclass(frozen=True, slots=True)
class QueueConfig:
    """Everything the machine is configured with; only `settings` ever changes."""

    name: str = ""
    vhost: str = "/"
    single_active: bool = False
    created_ms: int = 0  # the queue counts as last used at creation (x-expires)
    settings: QueueSettings = QueueSettings()

    def with_settings(self, settings: QueueSettings) -> QueueConfig:
        return replace(self, settings=settings)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _lower(policy: Any, argument: Any) -> Any:
    return min(policy, argument)


def _policy_wins(policy: Any, _argument: Any) -> Any:
    return policy


def _argument_wins(_policy: Any, argument: Any) -> Any:
    return argument


def _delivery_limit(policy: int, argument: int) -> int:
    return max(policy, argument) if policy < 0 or argument < 0 else min(policy, argument)


def _lookup(key: str, parse: Callable[[Any], Any], resolve: Callable[[Any, Any], Any],
            arguments: Mapping[str, Any], policy: Mapping[str, Any]) -> Any:
    """rabbit_queue_type_util:args_policy_lookup/3: `resolve` only when both sides are set."""
    argument, from_policy = parse(arguments.get("x-" + key)), parse(policy.get(key))
    if argument is None or from_policy is None:
        return from_policy if argument is None else argument
    return resolve(from_policy, argument)


def resolve_settings(arguments: Mapping[str, Any], policy: Mapping[str, Any] | None = None) -> QueueSettings:
    """The effective settings from x-arguments (`x-max-length`, ...) and a policy's definition
    (`max-length`, ...), resolved per key as RabbitMQ 4.0 resolves them."""
    policy = policy or {}

    def lookup(key: str, parse: Callable[[Any], Any], resolve: Callable[[Any, Any], Any]) -> Any:
        return _lookup(key, parse, resolve, arguments, policy)

    overflow = lookup("overflow", _text, _policy_wins)
    limit = lookup("delivery-limit", _int, _delivery_limit)
    if limit is None:
        limit = DELIVERY_LIMIT_DEFAULT
    return QueueSettings(
        max_length=lookup("max-length", _int, _lower),
        max_length_bytes=lookup("max-length-bytes", _int, _lower),
        overflow=overflow if overflow in (DROP_HEAD, REJECT_PUBLISH) else DROP_HEAD,
        message_ttl_ms=lookup("message-ttl", _int, _lower),
        expires_ms=lookup("expires", _int, _lower),
        delivery_limit=None if limit < 0 else limit,
        dead_letter_exchange=lookup("dead-letter-exchange", _text, _argument_wins),
        dead_letter_routing_key=lookup("dead-letter-routing-key", _text, _argument_wins),
        dead_letter_strategy=lookup("dead-letter-strategy", _text, _argument_wins) or AT_MOST_ONCE,
    )


def queue_config(name: str, vhost: str, arguments: Mapping[str, Any], *, created_ms: int,
                 policy: Mapping[str, Any] | None = None) -> QueueConfig:
    """The configuration a new quorum queue's members start with."""
    return QueueConfig(name=name, vhost=vhost,
                       single_active=arguments.get("x-single-active-consumer") is True,
                       created_ms=created_ms, settings=resolve_settings(arguments, policy))
