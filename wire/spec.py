"""The AMQP 0-9-1 protocol table, with RabbitMQ's extensions, as plain data.

Theory of operation: this module is the single statement of the protocol's facts - domains, classes,
methods (ids, argument fields in wire order, synchronous or not, which methods answer them, whether
content follows) and the basic class's content properties. Nothing here runs; `scripts/gen_wire.py`
turns it into `wire/methods.py` and `wire/properties.py` walks `BASIC_PROPERTIES`.

Field names are the attribute names the generated classes use: the spec's names with '-' turned
into '_', every no-wait spelled `nowait`, basic.qos's `global` spelled `global_`, and reserved fields named
`ticket` (the old access ticket, a short) or `reserved_1`, `reserved_2`, ... Where RabbitMQ gives
a reserved field a meaning (exchange.declare's auto-delete and internal) we use RabbitMQ's name.

`synchronous` is the spec's flag, which marks a request that expects a reply and also most replies
(start-ok, declare-ok ...); `responses` says which methods answer a request.

RabbitMQ extensions included: exchange.bind/unbind, basic.nack, confirm.select, connection.blocked/
unblocked, connection.update-secret. Left out: the 0-9-1 `access` class (RabbitMQ rejects it) and
the `file`/`stream` classes (never implemented by anyone).
"""
from __future__ import annotations

from dataclasses import dataclass

# Field types ("domains" reduced to their wire type).
BIT = "bit"
OCTET = "octet"
SHORT = "short"
LONG = "long"
LONGLONG = "longlong"
SHORTSTR = "shortstr"
LONGSTR = "longstr"
TIMESTAMP = "timestamp"
TABLE = "table"

TYPES = (BIT, OCTET, SHORT, LONG, LONGLONG, SHORTSTR, LONGSTR, TIMESTAMP, TABLE)

# Width in octets of the fixed-size types (bits are packed, see Method docs).
FIXED_SIZE = {OCTET: 1, SHORT: 2, LONG: 4, LONGLONG: 8, TIMESTAMP: 8}

# Python default of each type, used by the generated constructors.
DEFAULTS = {BIT: False, OCTET: 0, SHORT: 0, LONG: 0, LONGLONG: 0, SHORTSTR: "", LONGSTR: b"",
            TIMESTAMP: 0, TABLE: None}

FRAME_MIN_SIZE = 4096


@dataclass(frozen=True)
class Field:
    name: str
    type: str


@dataclass(frozen=True)
class MethodSpec:
    """One method: `name` is the spec's name within its class (e.g. "declare-ok")."""

    index: int
    name: str
    fields: tuple[Field, ...]
    synchronous: bool = False
    responses: tuple[str, ...] = ()  # names of methods in the same class that answer this one
    content: bool = False


@dataclass(frozen=True)
class ClassSpec:
    index: int
    name: str
    methods: tuple[MethodSpec, ...]


def _f(*pairs: str) -> tuple[Field, ...]:
    """Fields from "name:type" strings, in wire order."""
    return tuple(Field(*p.split(":")) for p in pairs)


def _m(index: int, name: str, fields: tuple[Field, ...] = (), sync: bool = False,
       responses: tuple[str, ...] = (), content: bool = False) -> MethodSpec:
    return MethodSpec(index, name, fields, sync, responses, content)


_CLOSE_FIELDS = _f("reply_code:short", "reply_text:shortstr", "class_id:short", "method_id:short")
_BIND_FIELDS = _f("ticket:short", "destination:shortstr", "source:shortstr", "routing_key:shortstr",
                  "nowait:bit", "arguments:table")

CLASSES: tuple[ClassSpec, ...] = (
    ClassSpec(10, "connection", (
        _m(10, "start", _f("version_major:octet", "version_minor:octet", "server_properties:table",
                           "mechanisms:longstr", "locales:longstr"), True, ("start-ok",)),
        _m(11, "start-ok", _f("client_properties:table", "mechanism:shortstr", "response:longstr",
                              "locale:shortstr"), True),
        _m(20, "secure", _f("challenge:longstr"), True, ("secure-ok",)),
        _m(21, "secure-ok", _f("response:longstr"), True),
        _m(30, "tune", _f("channel_max:short", "frame_max:long", "heartbeat:short"), True,
           ("tune-ok",)),
        _m(31, "tune-ok", _f("channel_max:short", "frame_max:long", "heartbeat:short"), True),
        _m(40, "open", _f("virtual_host:shortstr", "reserved_1:shortstr", "reserved_2:bit"), True,
           ("open-ok",)),
        _m(41, "open-ok", _f("reserved_1:shortstr"), True),
        _m(50, "close", _CLOSE_FIELDS, True, ("close-ok",)),
        _m(51, "close-ok", (), True),
        _m(60, "blocked", _f("reason:shortstr")),
        _m(61, "unblocked"),
        _m(70, "update-secret", _f("new_secret:longstr", "reason:shortstr"), True,
           ("update-secret-ok",)),
        _m(71, "update-secret-ok", (), True),
    )),
    ClassSpec(20, "channel", (
        _m(10, "open", _f("reserved_1:shortstr"), True, ("open-ok",)),
        _m(11, "open-ok", _f("reserved_1:longstr"), True),
        _m(20, "flow", _f("active:bit"), True, ("flow-ok",)),
        _m(21, "flow-ok", _f("active:bit")),
        _m(40, "close", _CLOSE_FIELDS, True, ("close-ok",)),
        _m(41, "close-ok", (), True),
    )),
    ClassSpec(40, "exchange", (
        _m(10, "declare", _f("ticket:short", "exchange:shortstr", "type:shortstr", "passive:bit",
                             "durable:bit", "auto_delete:bit", "internal:bit", "nowait:bit",
                             "arguments:table"), True, ("declare-ok",)),
        _m(11, "declare-ok", (), True),
        _m(20, "delete", _f("ticket:short", "exchange:shortstr", "if_unused:bit", "nowait:bit"),
           True, ("delete-ok",)),
        _m(21, "delete-ok", (), True),
        _m(30, "bind", _BIND_FIELDS, True, ("bind-ok",)),
        _m(31, "bind-ok", (), True),
        _m(40, "unbind", _BIND_FIELDS, True, ("unbind-ok",)),
        _m(51, "unbind-ok", (), True),
    )),
    ClassSpec(50, "queue", (
        _m(10, "declare", _f("ticket:short", "queue:shortstr", "passive:bit", "durable:bit",
                             "exclusive:bit", "auto_delete:bit", "nowait:bit", "arguments:table"),
           True, ("declare-ok",)),
        _m(11, "declare-ok", _f("queue:shortstr", "message_count:long", "consumer_count:long"),
           True),
        _m(20, "bind", _f("ticket:short", "queue:shortstr", "exchange:shortstr",
                          "routing_key:shortstr", "nowait:bit", "arguments:table"), True,
           ("bind-ok",)),
        _m(21, "bind-ok", (), True),
        _m(30, "purge", _f("ticket:short", "queue:shortstr", "nowait:bit"), True, ("purge-ok",)),
        _m(31, "purge-ok", _f("message_count:long"), True),
        _m(40, "delete", _f("ticket:short", "queue:shortstr", "if_unused:bit", "if_empty:bit",
                            "nowait:bit"), True, ("delete-ok",)),
        _m(41, "delete-ok", _f("message_count:long"), True),
        _m(50, "unbind", _f("ticket:short", "queue:shortstr", "exchange:shortstr",
                            "routing_key:shortstr", "arguments:table"), True, ("unbind-ok",)),
        _m(51, "unbind-ok", (), True),
    )),
    ClassSpec(60, "basic", (
        _m(10, "qos", _f("prefetch_size:long", "prefetch_count:short", "global_:bit"), True,
           ("qos-ok",)),
        _m(11, "qos-ok", (), True),
        _m(20, "consume", _f("ticket:short", "queue:shortstr", "consumer_tag:shortstr",
                             "no_local:bit", "no_ack:bit", "exclusive:bit", "nowait:bit",
                             "arguments:table"), True, ("consume-ok",)),
        _m(21, "consume-ok", _f("consumer_tag:shortstr"), True),
        _m(30, "cancel", _f("consumer_tag:shortstr", "nowait:bit"), True, ("cancel-ok",)),
        _m(31, "cancel-ok", _f("consumer_tag:shortstr"), True),
        _m(40, "publish", _f("ticket:short", "exchange:shortstr", "routing_key:shortstr",
                             "mandatory:bit", "immediate:bit"), content=True),
        _m(50, "return", _f("reply_code:short", "reply_text:shortstr", "exchange:shortstr",
                            "routing_key:shortstr"), content=True),
        _m(60, "deliver", _f("consumer_tag:shortstr", "delivery_tag:longlong", "redelivered:bit",
                             "exchange:shortstr", "routing_key:shortstr"), content=True),
        _m(70, "get", _f("ticket:short", "queue:shortstr", "no_ack:bit"), True,
           ("get-ok", "get-empty")),
        _m(71, "get-ok", _f("delivery_tag:longlong", "redelivered:bit", "exchange:shortstr",
                            "routing_key:shortstr", "message_count:long"), True, content=True),
        _m(72, "get-empty", _f("reserved_1:shortstr"), True),
        _m(80, "ack", _f("delivery_tag:longlong", "multiple:bit")),
        _m(90, "reject", _f("delivery_tag:longlong", "requeue:bit")),
        _m(100, "recover-async", _f("requeue:bit")),
        _m(110, "recover", _f("requeue:bit"), True, ("recover-ok",)),
        _m(111, "recover-ok", (), True),
        _m(120, "nack", _f("delivery_tag:longlong", "multiple:bit", "requeue:bit")),
    )),
    ClassSpec(90, "tx", (
        _m(10, "select", (), True, ("select-ok",)),
        _m(11, "select-ok", (), True),
        _m(20, "commit", (), True, ("commit-ok",)),
        _m(21, "commit-ok", (), True),
        _m(30, "rollback", (), True, ("rollback-ok",)),
        _m(31, "rollback-ok", (), True),
    )),
    ClassSpec(85, "confirm", (
        _m(10, "select", _f("nowait:bit"), True, ("select-ok",)),
        _m(11, "select-ok", (), True),
    )),
)

# The basic class's content properties in spec order; the first has flag bit 15, the last bit 2.
BASIC_PROPERTIES: tuple[Field, ...] = _f(
    "content_type:shortstr", "content_encoding:shortstr", "headers:table", "delivery_mode:octet",
    "priority:octet", "correlation_id:shortstr", "reply_to:shortstr", "expiration:shortstr",
    "message_id:shortstr", "timestamp:timestamp", "type:shortstr", "user_id:shortstr",
    "app_id:shortstr", "cluster_id:shortstr",
)


def class_name(cls: ClassSpec, method: MethodSpec) -> str:
    """The generated Python class name: "basic" + "get-ok" -> "BasicGetOk"."""
    words = [cls.name] + method.name.split("-")
    return "".join(w.capitalize() for w in words)
