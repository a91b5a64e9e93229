"""Queue and exchange arguments: RabbitMQ 3.10's typed validation and its equivalence keys.

Theory of operation: a new queue's arguments are checked in RabbitMQ's order (the oracle answers
with the first failure only, so order is observable): the x-dead-letter-exchange type (a channel
check), then x-queue-type, then each argument the queue type supports in `DECLARE_ORDER` with its
typed check, then any known argument the type does not support ("... of queue type
rabbit_quorum_queue"), then the type's properties (quorum/stream refuse auto-delete, exclusive,
non-durable, in that order). Unknown arguments (x-foo, foo) are kept and ignored. On redeclare only
equivalence is checked, over the existing queue type's `EQUIVALENCE_KEYS`; an absent x-queue-type
equals "classic". A stream's own checks (x-max-age, its leader locators) live in metadata/stream.py;
an x-max-age RabbitMQ's check crashes on is answered with its 541.
"""
from __future__ import annotations

from typing import Any, Callable

from metadata import stream, texts
from metadata.fieldvalues import MISSING, as_text, inequivalence, type_name
from wire.errors import AmqpError
from wire.field_types import is_integer

MAX_EXPIRY_TIMER = 10 * 365 * 24 * 3600 * 1000  # ten years in ms: 3.10's largest TTL and x-expires, probed
MAX_SUPPORTED_PRIORITY = 255
OVERFLOW_VALUES = ("drop-head", "reject-publish", "reject-publish-dlx")
QUEUE_MODES = ("default", "lazy")
QUEUE_VERSIONS = (1, 2)
QUEUE_TYPES_KNOWN = ("classic", "quorum", "stream")
DEAD_LETTER_STRATEGIES = ("at-most-once", "at-least-once")
TYPE_MODULES = {"classic": "rabbit_classic_queue", "quorum": "rabbit_quorum_queue", "stream": "rabbit_stream_queue"}

# rabbit_queue_type:arguments(queue_arguments, Type) in 3.10: what each type accepts and compares.
TYPE_ARGUMENTS: dict[str, tuple[str, ...]] = {
    "classic": ("x-expires", "x-message-ttl", "x-dead-letter-exchange", "x-dead-letter-routing-key",
                "x-max-length", "x-max-length-bytes", "x-max-priority", "x-overflow", "x-queue-mode",
                "x-single-active-consumer", "x-queue-type", "x-queue-version", "x-queue-master-locator"),
    "quorum": ("x-dead-letter-exchange", "x-dead-letter-routing-key", "x-dead-letter-strategy",
               "x-expires", "x-max-length", "x-max-length-bytes", "x-max-in-memory-length",
               "x-max-in-memory-bytes", "x-overflow", "x-single-active-consumer", "x-queue-type",
               "x-quorum-initial-group-size", "x-delivery-limit", "x-message-ttl",
               "x-queue-leader-locator"),
    "stream": ("x-max-length-bytes", "x-queue-type", "x-max-age", "x-stream-max-segment-size-bytes",
               "x-initial-cluster-size", "x-queue-leader-locator"),
}
EXCHANGE_EQUIVALENCE_KEYS = ("alternate-exchange",)

Check = Callable[[Any, dict[str, Any]], str | None]  # (value, all args) -> Erlang reason or None


def _integer(value: Any) -> str | None:
    if not is_integer(value):
        return f'"expected integer, got {type_name(value)}"'
    return None


def _non_neg_int(value: Any, _args: dict[str, Any]) -> str | None:
    bad = _integer(value)
    if bad is None and value < 0:
        return f"{{value_negative,{value}}}"
    return bad


def _positive_int(value: Any, args: dict[str, Any]) -> str | None:
    bad = _non_neg_int(value, args)
    if bad is None and value == 0:
        return f"{{value_zero,{value}}}"
    return bad


def _message_ttl(value: Any, args: dict[str, Any]) -> str | None:
    bad = _non_neg_int(value, args)
    if bad is None and value > MAX_EXPIRY_TIMER:
        return f"{{value_too_large,{value}}}"
    return bad


def _expires(value: Any, args: dict[str, Any]) -> str | None:
    bad = _positive_int(value, args)
    if bad is None and value > MAX_EXPIRY_TIMER:
        return f"{{value_too_large,{value}}}"
    return bad


def _max_priority(value: Any, args: dict[str, Any]) -> str | None:
    bad = _non_neg_int(value, args)
    if bad is None and value > MAX_SUPPORTED_PRIORITY:
        return f"{{max_value_exceeded,{value}}}"
    return bad


def _longstr(check: Callable[[str], str | None]) -> Check:
    def run(value: Any, _args: dict[str, Any]) -> str | None:
        if not isinstance(value, (str, bytes)):
            return f"{{unacceptable_type,{type_name(value)}}}"
        return check(as_text(value))
    return run


def _dead_letter_routing_key(value: Any, args: dict[str, Any]) -> str | None:
    if not isinstance(value, (str, bytes)):
        return f"{{unacceptable_type,{type_name(value)}}}"
    return None if "x-dead-letter-exchange" in args else "routing_key_but_no_dlx_defined"


def _boolean(value: Any, _args: dict[str, Any]) -> str | None:
    return None if isinstance(value, bool) else f"{{unacceptable_type,{type_name(value)}}}"


def _queue_version(value: Any, _args: dict[str, Any]) -> str | None:
    bad = _integer(value)
    if bad is None and value not in QUEUE_VERSIONS:
        return f"\"unsupported queue version '{value}'\""
    return bad


def _any(_value: Any, _args: dict[str, Any]) -> str | None:
    return None


# rabbit_amqqueue:declare_args() order (the first failing argument is the one reported).
DECLARE_ORDER: tuple[tuple[str, Check], ...] = (
    ("x-expires", _expires),
    ("x-message-ttl", _message_ttl),
    ("x-dead-letter-exchange", _any),  # its type is a channel-level check, done first
    ("x-dead-letter-routing-key", _dead_letter_routing_key),
    ("x-dead-letter-strategy", _longstr(lambda v: None if v in DEAD_LETTER_STRATEGIES else "invalid_dead_letter_strategy")),
    ("x-max-length", _non_neg_int),
    ("x-max-length-bytes", _non_neg_int),
    ("x-max-in-memory-length", _non_neg_int),
    ("x-max-in-memory-bytes", _non_neg_int),
    ("x-max-priority", _max_priority),
    ("x-overflow", _longstr(lambda v: None if v in OVERFLOW_VALUES else "invalid_overflow")),
    ("x-queue-mode", _longstr(lambda v: None if v in QUEUE_MODES else f"\"unsupported queue mode '{v}'\"")),
    ("x-queue-version", _queue_version),
    ("x-single-active-consumer", _boolean),
    ("x-quorum-initial-group-size", _positive_int),
    ("x-delivery-limit", _non_neg_int),
    ("x-max-age", stream.check_max_age),
    ("x-stream-max-segment-size-bytes", _non_neg_int),
    ("x-initial-cluster-size", _positive_int),
    ("x-queue-leader-locator", stream.check_leader_locator),  # quorum queues check it their way
    ("x-queue-master-locator", _any),
)
KNOWN_QUEUE_ARGUMENTS = frozenset(k for k, _ in DECLARE_ORDER) | {"x-queue-type"}


def queue_type(args: dict[str, Any]) -> str:
    value = args.get("x-queue-type")
    return "classic" if value is None else as_text(value)


def validate_new_queue(name: str, vhost: str, args: dict[str, Any], *, durable: bool,
                       exclusive: bool, auto_delete: bool) -> AmqpError | None:
    """RabbitMQ's checks for a queue about to be created, first failure wins."""
    dlx = args.get("x-dead-letter-exchange", MISSING)
    if dlx is not MISSING and not isinstance(dlx, (str, bytes)):
        return texts.invalid_arg_type("queue", name, vhost, "x-dead-letter-exchange", type_name(dlx))
    if "x-queue-type" in args:
        value = args["x-queue-type"]
        if not isinstance(value, (str, bytes)):
            return texts.invalid_arg(name, vhost, "x-queue-type", f"{{unacceptable_type,{type_name(value)}}}")
        if as_text(value) not in QUEUE_TYPES_KNOWN:
            return texts.invalid_arg(name, vhost, "x-queue-type", f"\"unsupported queue type '{as_text(value)}'\"")
    qtype = queue_type(args)
    supported = TYPE_ARGUMENTS[qtype]
    for key, check in DECLARE_ORDER:
        if key in args and key in supported:
            try:
                reason = check(args[key], args)
            except stream.Crash:
                return stream.crashed()
            if reason is not None:
                return texts.invalid_arg(name, vhost, key, reason)
    for key in args:
        if key in KNOWN_QUEUE_ARGUMENTS and key not in supported:
            return texts.invalid_arg_for_queue_type(name, vhost, key, TYPE_MODULES[qtype])
    if qtype != "classic":
        for refused, prop in ((auto_delete, "auto-delete"), (exclusive, "exclusive-owner"), (not durable, "non-durable")):
            if refused:
                return texts.invalid_property(name, vhost, prop)
    return None


def queue_inequivalence(name: str, vhost: str, current: dict[str, Any], received: dict[str, Any]) -> AmqpError | None:
    """rabbit_amqqueue:assert_args_equivalence over the existing queue type's arguments."""
    for key in TYPE_ARGUMENTS[queue_type(current)]:
        have, got = current.get(key, MISSING), received.get(key, MISSING)
        if key == "x-queue-type":  # absent and "classic" are the same declaration
            have = MISSING if have is not MISSING and as_text(have) == "classic" else have
            got = MISSING if got is not MISSING and isinstance(got, (str, bytes)) and as_text(got) == "classic" else got
        texts_pair = inequivalence(have, got)
        if texts_pair is not None:
            return texts.inequivalent("queue", name, vhost, key, *texts_pair)
    return None


def exchange_args_inequivalence(name: str, vhost: str, current: dict[str, Any], received: dict[str, Any]) -> AmqpError | None:
    for key in EXCHANGE_EQUIVALENCE_KEYS:
        texts_pair = inequivalence(current.get(key, MISSING), received.get(key, MISSING))
        if texts_pair is not None:
            return texts.inequivalent("exchange", name, vhost, key, *texts_pair)
    return None
