"""The Python types of AMQP field-table values, one per type RabbitMQ 3.10 keeps apart.

Theory of operation: RabbitMQ decodes a field table into {Name, Type, Value} triples and writes
each value back with the tag of its type, so a header that arrived as a byte (`b`) leaves as a
byte after the broker rewrote the table (x-death, BCC stripping), an argument's type shows in
its error texts ("expected integer, got timestamp") and two arguments are equivalent only when
their types are of one class. warren keeps the same information in the value's Python type: a
decoded value is a plain `int` (`I`), `float` (`d`), `str`/`bytes` (`S`), `bool` (`t`), `dict`
(`F`), `list` (`A`), `None` (`V`) or `Decimal` (`D`) where that is its one natural type, and
an instance of a subclass below where it is not - `Int8(-1)` is still -1 to every comparison
and sum, but encodes as `b` again.

RabbitMQ's grammar (rabbit_binary_parser, 3.10): S T b B s u I i d f l L t D F A x V. `L` is
read as a signed 64-bit value like `l` (the errata's reading; RabbitMQ writes it back as `l`),
`D` as an unsigned scale octet and an unsigned 32-bit value. A plain Python int is written as
`I` when it fits 32 bits signed, else `l` (RabbitMQ's own values - x-death's count - are `l`:
`Int64`). Nothing here decodes; wire/codec.py does, by these tables.
"""
from __future__ import annotations

from decimal import Decimal
from typing import Any


class Int8(int):
    """A signed octet, field type `b` (RabbitMQ: byte)."""


class UInt8(int):
    """An unsigned octet, field type `B` (unsignedbyte)."""


class Int16(int):
    """A signed 16-bit integer, field type `s` (short)."""


class UInt16(int):
    """An unsigned 16-bit integer, field type `u` (unsignedshort)."""


class UInt32(int):
    """An unsigned 32-bit integer, field type `i` (unsignedint)."""


class Int64(int):
    """A signed 64-bit integer, field type `l`, also what `L` decodes to (long)."""


class Timestamp(int):
    """Seconds since the epoch, field type `T` (timestamp)."""


class Float32(float):
    """A single-precision float, field type `f` (float)."""


class ByteArray(bytes):
    """Bytes that encode as field type `x` (binary) rather than `S` (longstr)."""


INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

# RabbitMQ's type name of each Python type a decoded table holds (plain int: see `field_type`)
TYPE_NAMES: dict[type, str] = {
    bool: "bool", Int8: "byte", UInt8: "unsignedbyte", Int16: "short", UInt16: "unsignedshort",
    UInt32: "unsignedint", Int64: "long", Timestamp: "timestamp", float: "double",
    Float32: "float", str: "longstr", bytes: "longstr", ByteArray: "binary", dict: "table",
    list: "array", tuple: "array", type(None): "void", Decimal: "decimal",
}

# rabbit_misc:type_class: integers (decimal among them) are one class, floats another
TYPE_CLASSES = {"byte": "int", "short": "int", "signedint": "int", "long": "int", "decimal": "int",
                "unsignedbyte": "int", "unsignedshort": "int", "unsignedint": "int",
                "float": "float", "double": "float"}


def field_type(value: Any) -> str:
    """The AMQP type RabbitMQ gives `value` (as it would be encoded), e.g. "signedint"."""
    kind = type(value)
    if kind is int:
        return "signedint" if INT32_MIN <= value <= INT32_MAX else "long"
    name = TYPE_NAMES.get(kind)
    if name is not None:
        return name
    for base, base_name in TYPE_NAMES.items():  # a subclass of one (a datetime is below)
        if isinstance(value, base):
            return base_name
    if isinstance(value, int):
        return "signedint" if INT32_MIN <= value <= INT32_MAX else "long"
    return "timestamp" if hasattr(value, "timestamp") else kind.__name__


def type_class(name: str) -> str:
    return TYPE_CLASSES.get(name, name)


def is_integer(value: Any) -> bool:
    """Whether RabbitMQ takes `value` as an integer argument (any width; not bool, timestamp or decimal)."""
    return isinstance(value, int) and not isinstance(value, (bool, Timestamp))
