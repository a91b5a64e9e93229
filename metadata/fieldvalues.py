"""Field-table values as RabbitMQ sees them: type names, equality, and how it prints them.

Theory of operation: the wire codec decodes a field table into Python values whose types keep
the AMQP type each value arrived with (wire/field_types.py), so `type_name` is RabbitMQ's name
for it ("byte", "timestamp", "binary" ...). Two arguments are equivalent, as in
rabbit_misc:assert_args_equivalence, when their type classes match (all integer widths and
decimal are one class, float and double another) and their values are equal as Erlang's ==
finds them. `plain` is that equality as a hashable value: numbers compare by value (1 == 1.0,
a timestamp equals the same integer), longstr and binary by their octets, bool apart from
integers (Python's True == 1 is not Erlang's), a decimal as its (scale, value) pair, and inside
a table or array the type of each element counts too, since Erlang compares the {Type, Value}
pairs. A binding's identity (`table_key`) is its arguments sorted by key with their exact
types, as RabbitMQ keys a binding by the sorted table: bound with a signedint 1 and unbound
with a byte 1 is another binding. `describe` prints a value as RabbitMQ's error texts do.
"""
from __future__ import annotations

from decimal import Decimal
from typing import Any

from wire.codec import decimal_parts
from wire.field_types import field_type, type_class

type_name = field_type


class _Missing:
    """An argument absent from a table (Erlang's `undefined`)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING = _Missing()


def as_text(value: str | bytes) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value


def plain(value: Any) -> Any:
    """A hashable form equal where Erlang's == finds two field values equal (see the module doc)."""
    kind = type(value)
    if kind is int or kind is str or kind is float:  # the common header values, first
        return value
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (str, bytes)):
        return as_text(value)
    if isinstance(value, dict):
        return ("table", tuple((k, type_name(v), plain(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return ("array", tuple((type_name(v), plain(v)) for v in value))
    if isinstance(value, Decimal):
        return ("decimal", decimal_parts(value))
    return value


def equivalent(current: Any, received: Any) -> bool:
    if current is MISSING or received is MISSING:
        return current is received
    return type_class(type_name(current)) == type_class(type_name(received)) and plain(current) == plain(received)


def table_key(table: dict[str, Any] | None) -> tuple:
    """A hashable identity for a binding's arguments (order-insensitive, as RabbitMQ sorts them;
    exact types, as RabbitMQ compares its binding records)."""
    if not table:
        return ()
    return tuple(sorted((k, type_name(v), plain(v)) for k, v in table.items()))


def erl(value: Any) -> str:
    """The value as Erlang prints it with ~ts (binaries) or ~tp (everything else)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, bytes)):
        return as_text(value)
    if value is None:
        return "undefined"
    if isinstance(value, Decimal):
        return "{%d,%d}" % decimal_parts(value)
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
