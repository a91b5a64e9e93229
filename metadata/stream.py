"""Stream queues as RabbitMQ 3.10 answers them over AMQP 0-9-1: the arguments and the consumer's offset.

Theory of operation. A stream is declared with `x-queue-type = stream` and checked by
metadata/arguments.py in rabbit_amqqueue's declare_args order like every queue type, with the two
checks of its own below (x-max-age, x-queue-leader-locator); an empty name is refused first
("Cannot declare a server-named queue for type rabbit_stream_queue"). A consumer picks where it
starts reading with the `x-stream-offset` consume argument (rabbit_stream_queue:parse_offset_arg):
absent means "next"; "first", "last", "next"; an integer (negative reads from the first offset,
past the end waits for it); an AMQP timestamp (seconds: the first chunk stamped at or after it); a
longstr interval as x-max-age takes it ("30m": the chunks of the last thirty minutes). Anything
else is refused.

Probed against Debian's RabbitMQ 3.10, including where it crashes: an x-max-age or interval whose
digits are missing ("abc", "-1s") fails inside list_to_integer, which the client sees as a bare
connection.close 541 INTERNAL_ERROR, and a boolean offset crashes likewise; warren answers the
same, so a client sees no difference. Intervals are counted with RabbitMQ's units: Y = 365 days,
M = 30 days, D, h, m, s.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from metadata import texts
from metadata.fieldvalues import as_text, type_name
from wire.field_types import Timestamp
from wire.errors import INTERNAL_ERROR, NOT_IMPLEMENTED, PRECONDITION_FAILED, AmqpError

TYPE = "stream"
TYPE_MODULE = "rabbit_stream_queue"
LEADER_LOCATORS = ("client-local", "balanced", "random", "least-leaders")
MAX_SEGMENT_SIZE_BYTES_DEFAULT = 500_000_000  # stream_max_segment_size_bytes
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "D": 86_400_000}
_UNIT_MS.update({"M": 30 * _UNIT_MS["D"], "Y": 365 * _UNIT_MS["D"]})
_INTERVAL = re.compile(r"^([0-9]*)(.*)$", re.S)


class Crash(Exception):
    """What makes RabbitMQ's channel crash (the client sees 541 INTERNAL_ERROR on the connection)."""


def crashed() -> AmqpError:
    return AmqpError(INTERNAL_ERROR, "", connection=True)


def is_stream(arguments: Mapping[str, Any]) -> bool:
    value = arguments.get("x-queue-type")
    return isinstance(value, (str, bytes)) and as_text(value) == TYPE


def interval_ms(text: str) -> int | None:
    """rabbit_amqqueue:check_max_age: milliseconds, None for invalid_max_age; Crash without digits."""
    digits, unit = _INTERVAL.match(text).groups()  # type: ignore[union-attr]  # the pattern matches anything
    if not digits:
        raise Crash(text)
    value = int(digits)
    if value <= 0 or unit not in _UNIT_MS:
        return None
    return value * _UNIT_MS[unit]


def check_max_age(value: Any, _args: dict[str, Any]) -> str | None:
    """The x-max-age declare check (an Erlang reason, as arguments.Check returns)."""
    if not isinstance(value, (str, bytes)):
        return f"{{unacceptable_type,{type_name(value)}}}"
    return "invalid_max_age" if interval_ms(as_text(value)) is None else None


def check_leader_locator(value: Any, _args: dict[str, Any]) -> str | None:
    if not isinstance(value, (str, bytes)):
        return f"{{unacceptable_type,{type_name(value)}}}"
    return None if as_text(value) in LEADER_LOCATORS else "invalid_queue_locator_arg"


# -- consuming ---------------------------------------------------------------------------------------

FIRST, LAST, NEXT = "first", "last", "next"


@dataclass(frozen=True, slots=True)
class Offset:
    """Where a consumer starts: `kind` is first / last / next / offset / timestamp; `value` the
    offset, or the timestamp in ms (an interval is turned into one against the caller's clock)."""
    kind: str
    value: int = 0


def offset_spec(arguments: Mapping[str, Any], now_ms: int, queue: str, vhost: str) -> Offset | AmqpError:
    """The consume argument x-stream-offset, or the error RabbitMQ answers with."""
    value = arguments.get("x-stream-offset")
    if value is None:
        return Offset(NEXT)
    if isinstance(value, bool):
        return crashed()
    if isinstance(value, Timestamp):  # an AMQP timestamp: seconds
        return Offset("timestamp", int(value) * 1000)
    if isinstance(value, int):
        return Offset("offset", value)
    if isinstance(value, (str, bytes)):
        text = as_text(value)
        if text in (FIRST, LAST, NEXT):
            return Offset(text)
        try:
            ms = interval_ms(text)
        except Crash:
            return crashed()
        if ms is not None:
            return Offset("timestamp", now_ms - ms)
        reason = f'{{invalid_stream_offset_arg,{{longstr,<<"{text}">>}}}}'
        return AmqpError(PRECONDITION_FAILED,
                         f"invalid arg 'x-stream-offset' for queue '{queue}' in vhost '{vhost}': {reason}")
    return crashed()


def _queue(name: str, vhost: str) -> str:
    return texts.resource("queue", name, vhost)


def no_prefetch(name: str, vhost: str) -> AmqpError:
    return AmqpError(PRECONDITION_FAILED, f"consumer prefetch count is not set for '{_queue(name, vhost)}'")


def no_ack_refused(name: str, vhost: str) -> AmqpError:
    return AmqpError(NOT_IMPLEMENTED,
                     f"automatic acknowledgement not supported by stream queues {_queue(name, vhost)}",
                     connection=True)


def get_refused(name: str, vhost: str) -> AmqpError:
    return AmqpError(NOT_IMPLEMENTED, f"basic.get not supported by stream queues {_queue(name, vhost)}",
                     connection=True)


def purge_refused(name: str, vhost: str) -> AmqpError:
    return AmqpError(NOT_IMPLEMENTED, f"queue.purge not supported by stream queues {_queue(name, vhost)}",
                     connection=True)


def nack_refused(name: str, vhost: str) -> AmqpError:
    return AmqpError(NOT_IMPLEMENTED,
                     f"basic.nack and basic.reject not supported by stream queues {_queue(name, vhost)}",
                     connection=True)


def server_named_error(arguments: Mapping[str, Any]) -> AmqpError | None:
    if is_stream(arguments):
        return AmqpError(PRECONDITION_FAILED, f"Cannot declare a server-named queue for type {TYPE_MODULE}")
    return None


@dataclass(frozen=True, slots=True)
class Retention:
    """A stream's limits: total bytes (x-max-length-bytes), age (x-max-age), segment size."""
    max_bytes: int | None = None
    max_age_ms: int | None = None
    segment_bytes: int = MAX_SEGMENT_SIZE_BYTES_DEFAULT


def retention(arguments: Mapping[str, Any], policy: Mapping[str, Any] | None = None) -> Retention:
    """A stream's limits from its x-arguments met with the merged policy (policy key names): the
    smaller of the two wins for each (rabbit_stream_queue's args_policy_lookup with min and max_age)."""
    policy = policy or {}

    def smaller(key: str, read: Any) -> Any:
        values = [v for v in (read(arguments.get("x-" + key)), read(policy.get(key))) if v is not None]
        return min(values) if values else None
    max_bytes = smaller("max-length-bytes", _size)
    age = smaller("max-age", _age_ms)
    segment = smaller("stream-max-segment-size-bytes", _size)
    return Retention(max_bytes, age, segment if segment else MAX_SEGMENT_SIZE_BYTES_DEFAULT)


def _size(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _age_ms(value: Any) -> int | None:
    if not isinstance(value, (str, bytes)):
        return None
    try:
        return interval_ms(as_text(value))
    except Crash:
        return None
