"""The typed vocabulary between actors, and the one place it is encoded.

Every message between actors is a frozen dataclass registered here, one module per protocol:
runtime.py (credit, undelivered), channel_queue.py, node.py (metadata calls, replicas, queue
lifecycle, connection admin), raft.py (peers and clients of a Raft group). An actor's
`receive(sender, msg)` dispatches on `type(msg)`; between actors of one host process the runtime
hands the same object over, so nothing here costs anything unless a message crosses a process.

Encoding (used only by actors/runtime/envelope.py). A message travels as its tag (the class name,
unique across the vocabulary) and the tuple of its field values in declaration order. Values that
msgpack cannot carry natively are encoded by `pack_default`: a registered record nested anywhere
(an Address, an AmqpError, a nested message) becomes an ext value holding its own tag and fields.
On the way back `build` rebuilds the message; fields annotated with a NamedTuple record type (`X`,
`X | None`, or a sequence of `X`, e.g. the per-message records of a publish batch) are rebuilt as
that record, one tuple.__new__ each, because msgpack hands back plain tuples. Sequences arrive as
tuples, and receivers accept any sequence. A field annotated `wire.codec.FieldTable` (queue,
exchange, binding and consumer arguments) travels as its AMQP encoding, so each value keeps
its AMQP type (msgpack would make an Int8 a plain int and refuse a Decimal); a plain map in
its place (a metadata log written before) is taken as it is.

Classes from lower layers (raft messages, wire's AmqpError, metadata's change records) are
registered by the protocol module that sends them, with `register`.

Versions (a cluster in a rolling upgrade runs two versions of this code, docs/UPGRADES.md): a
message's fields are only ever appended, each with a default, never removed or reordered. So a
node reads a message from an older node (fewer values: the defaults fill in) and from a newer one
(`build` drops the trailing values it does not know). A change that cannot follow this rule is a
new message tag.
"""
from __future__ import annotations

import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, is_dataclass
from operator import attrgetter
from typing import Any, TypeVar

import msgpack

from wire.codec import FIELD_TABLE, decode_table, encode_table

T = TypeVar("T")
EXT_RECORD = 1  # msgpack ext type code of a nested registered record


class _Spec:
    __slots__ = ("cls", "tag", "get", "convert", "size")

    def __init__(self, cls: type, tag: str, names: tuple[str, ...],
                 convert: tuple[tuple[int, Callable[[Any], Any]], ...], tables: tuple[int, ...] = ()) -> None:
        self.cls = cls
        self.tag = tag
        self.size = len(names)
        if len(names) > 1:
            get = attrgetter(*names)
        elif names:
            single = attrgetter(names[0])
            get = lambda msg: (single(msg),)  # noqa: E731
        else:
            get = lambda msg: ()  # noqa: E731
        self.get = _encoding_tables(get, tables) if tables else get
        self.convert = convert


def _encoding_tables(get: Callable[[Any], tuple], tables: tuple[int, ...]) -> Callable[[Any], tuple]:
    """`get`, with the field tables at `tables` as their AMQP encoding."""
    def encoded(msg: Any) -> tuple:
        values = list(get(msg))
        for i in tables:
            values[i] = encode_table(values[i])
        return tuple(values)
    return encoded


def _table(value: Any) -> Any:
    """A field table from what msgpack returns: its encoding, or a map of an older log."""
    return decode_table(value, 0)[0] if isinstance(value, bytes) else value


def _is_table(hint: Any) -> bool:
    return FIELD_TABLE in getattr(hint, "__metadata__", ())


_BY_TAG: dict[str, _Spec] = {}
_BY_CLASS: dict[type, _Spec] = {}


def _record_type(hint: Any) -> type | None:
    return hint if isinstance(hint, type) and issubclass(hint, tuple) and hasattr(hint, "_make") else None


_new = tuple.__new__  # a NamedTuple from a tuple: cheaper than its _make, once per record


def _converter(hint: Any) -> Callable[[Any], Any] | None:
    """How to rebuild a field annotated `hint` from what msgpack returns (None: as it is)."""
    if _is_table(hint):
        return _table
    record = _record_type(hint)
    if record is not None:
        return lambda v: _new(record, v)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType) and len(args) == 2 and type(None) in args:
        inner = _converter(next(a for a in args if a is not type(None)))
        return None if inner is None else (lambda v: None if v is None else inner(v))
    if origin in (list, tuple, Sequence) and args:
        record = _record_type(args[0])
        if record is not None and origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            return lambda v: tuple([_new(record, t) for t in v])
        if record is not None and origin is not tuple:
            return lambda v: [_new(record, t) for t in v]
    return None


def register(cls: type[T], tag: str | None = None) -> type[T]:
    """Make `cls` (a dataclass) a message: sendable, and nestable inside other messages."""
    assert is_dataclass(cls), cls
    tag = tag or cls.__name__
    assert tag not in _BY_TAG or _BY_TAG[tag].cls is cls, f"message tag {tag!r} taken by {_BY_TAG[tag].cls}"
    hints = typing.get_type_hints(cls, include_extras=True)
    names = tuple(f.name for f in fields(cls))
    convert = tuple((i, c) for i, name in enumerate(names) if (c := _converter(hints[name])) is not None)
    tables = tuple(i for i, name in enumerate(names) if _is_table(hints[name]))
    spec = _Spec(cls, tag, names, convert, tables)
    _BY_TAG[tag] = spec
    _BY_CLASS[cls] = spec
    return cls


def message(cls: type[T]) -> type[T]:
    """Decorator: a frozen, slotted dataclass registered as a message."""
    return register(dataclass(frozen=True, slots=True)(cls))


def tag_of(msg: Any) -> str:
    return _BY_CLASS[type(msg)].tag


def fields_of(msg: Any) -> tuple:
    """(tag, field values) of a registered message."""
    spec = _BY_CLASS[type(msg)]
    return spec.tag, spec.get(msg)


def build(tag: str, values: Sequence[Any]) -> Any:
    """The message of this tag from its field values (raises KeyError for an unknown tag)."""
    spec = _BY_TAG[tag]
    if spec.convert:
        values = list(values)
        for i, convert in spec.convert:
            values[i] = convert(values[i])
    try:
        return spec.cls(*values)
    except TypeError:  # checked only here: a length test on every message cost 10 % of `build`
        if len(values) <= spec.size:
            raise
        return spec.cls(*values[:spec.size])  # a newer node's appended fields (the module docstring)


def pack_default(obj: Any) -> msgpack.ExtType:
    """msgpack's `default`: a registered record nested in a message becomes an ext value."""
    spec = _BY_CLASS.get(type(obj))
    if spec is None:
        raise TypeError(f"cannot send a {type(obj).__name__} between actors: register it as a message")
    return msgpack.ExtType(EXT_RECORD, msgpack.packb((spec.tag, spec.get(obj)), use_bin_type=True,
                                                     default=pack_default))


def ext_hook(code: int, data: bytes) -> Any:
    """msgpack's `ext_hook`: the inverse of `pack_default`."""
    if code != EXT_RECORD:
        return msgpack.ExtType(code, data)
    tag, values = msgpack.unpackb(data, raw=False, use_list=False, ext_hook=ext_hook)
    return build(tag, values)
