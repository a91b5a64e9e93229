"""Field-table values as RabbitMQ sees them: type names, equality, and how it prints them.

Theory of operation: the wire codec decodes a field table into plain Python values and drops the
exact integer width, so the AMQP type is inferred here the way the codec (and pika) would encode
the value back: bool -> bool, int -> signedint if it fits 32 bits else long, float -> double,
str/bytes -> longstr, dict -> table, list -> array, None -> void. Two values are equivalent, as in
rabbit_misc:assert_args_equivalence, when their type classes match (all integer widths are one
class) and their values are equal; Python's True == 1 is not an equality RabbitMQ knows, so bool
is its own class. `describe` prints a value as RabbitMQ's error texts do.
"""
from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


class _Missing:
    """An argument absent from a table (Erlang's `undefined`)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING = _Missing()


def type_name(value: Any) -> str:
    """The AMQP field type RabbitMQ would report for `value`."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "signedint" if INT32_MIN <= value <= INT32_MAX else "long"
    if isinstance(value, float):
        return "double"
    if isinstance(value, (str, bytes)):
        return "longstr"
    if isinstance(value, dict):
        return "table"
    if isinstance(value, (list, tuple)):
        return "array"
    if value is None:
        return "void"
    if isinstance(value, Decimal):
        return "decimal"
    if isinstance(value, datetime):
        return "timestamp"
    return type(value).__name__


def type_class(name: str) -> str:
    return "int" if name in ("byte", "short", "signedint", "long") else name


def as_text(value: str | bytes) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value


def plain(value: Any) -> Any:
    """A comparable, hashable form that keeps bool apart from int and str equal to bytes."""
    kind = type(value)
    if kind is int or kind is str or kind is float:  # the common header values, first
        return value
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (str, bytes)):
        return as_text(value)
    if isinstance(value, dict):
        return ("table", tuple(sorted((k, plain(v)) for k, v in value.items())))
    if isinstance(value, (list, tuple)):
        return ("array", tuple(plain(v) for v in value))
    return value


def equivalent(current: Any, received: Any) -> bool:
    if current is MISSING or received is MISSING:
        return current is received
    return type_class(type_name(current)) == type_class(type_name(received)) and plain(current) == plain(received)


def table_key(table: dict[str, Any] | None) -> tuple:
    """A hashable identity for a binding's arguments (order-insensitive, as RabbitMQ sorts them)."""
    if not table:
        return ()
    return tuple(sorted((k, type_class(type_name(v)), plain(v)) for k, v in table.items()))


def erl(value: Any) -> str:
    """The value as Erlang prints it with ~ts (binaries) or ~tp (everything else)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, bytes)):
        return as_text(value)
    if value is None:
        return "undefined"
    if isinstance(value, dict):
        return "[" + ",".join(f'{{<<"{k}">>,{type_name(v)},{erl(v)}}}' for k, v in value.items()) + "]"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(f"{{{type_name(v)},{erl(v)}}}" for v in value) + "]"
    return str(value)


def describe(value: Any, *, with_type: bool) -> str:
    """rabbit_misc's val/1: "none", "'v'", or "the value 'v' of type 't'"."""
    if value is MISSING:
        return "none"
    if with_type:
        return f"the value '{erl(value)}' of type '{type_name(value)}'"
    return f"'{erl(value)}'"


def inequivalence(current: Any, received: Any) -> tuple[str, str] | None:
    """None when equivalent, else the (received, current) texts RabbitMQ prints. Typed forms
    appear only when one side is missing: the oracle prints "received '1' but current is '1'"
    for a longstr against a signedint."""
    if equivalent(current, received):
        return None
    typed = current is MISSING or received is MISSING
    return describe(received, with_type=typed), describe(current, with_type=typed)
