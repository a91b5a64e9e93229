"""What basic.publish checks in a message's properties, and the one rewrite it may do.

Theory of operation: the channel never decodes a message's properties unless one of them needs a
decision. `needs_inspection` reads the flag word and, when headers are present, looks for the bytes
"CC" in the raw header (a cheap scan that cannot miss a CC or BCC key); only then is `inspect`
called, which decodes once and applies RabbitMQ 3.10's rules in its order:

1. reply-to = "amq.rabbitmq.reply-to" is replaced by the channel's direct reply-to name
   (406 "fast reply consumer does not exist" without a reply consumer);
2. user-id must equal the authenticated user (406), unless the user had the `impersonator` tag
   when it logged in (rabbit_channel:check_user_id_header reads the tags of the connection's user);
3. expiration must parse as Erlang's string:to_integer does, within 0..315360000000 (406, with the
   Erlang term RabbitMQ prints, line-wrapped as io_lib's ~p wraps it);
4. the CC and BCC headers, arrays of longstr, add routing keys (non-string elements are skipped,
   any other type is a 406 "invalid message"); BCC is removed from the stored message.

The content header is re-encoded only when reply-to is rewritten or BCC is removed; otherwise the
original bytes travel on untouched.

Before all of these (and before permissions), the body's size: above `max_message_size` (default
128 MiB, never above RabbitMQ's 512 MiB cap) the channel is closed with 406 and RabbitMQ's text,
which says "configured" unless the limit is the cap itself.
"""
from __future__ import annotations

from typing import Callable

from wire.codec import ByteArray, Timestamp
from wire.errors import PRECONDITION_FAILED, AmqpError
from wire.properties import HEADER_PROPS_OFFSET, BasicProperties

REPLY_TO_QUEUE = "amq.rabbitmq.reply-to"
REPLY_TO_PREFIX = REPLY_TO_QUEUE + "."
expiration_max_ms = 315_360_000_000   # RabbitMQ's ceiling (ten years)
MAX_MESSAGE_SIZE_DEFAULT = 134_217_728  # 128 MiB, rabbitmq.conf's max_message_size
MAX_MESSAGE_SIZE_CAP = 536_870_912      # 512 MiB, RabbitMQ's ?MAX_MSG_SIZE: a larger setting means this
erlang_line_length = 79               # io_lib's ~p breaks a term that would reach this column

_HEADERS_FLAG = 1 << 13
_REPLY_TO_FLAG = 1 << 9
_EXPIRATION_FLAG = 1 << 8
_USER_ID_FLAG = 1 << 4
_DECIDING_FLAGS = _REPLY_TO_FLAG | _EXPIRATION_FLAG | _USER_ID_FLAG
_ROUTING_HEADERS = ("CC", "BCC")


def effective_max_message_size(configured: int) -> int:
    return min(configured, MAX_MESSAGE_SIZE_CAP)


def size_error(size: int, max_size: int) -> AmqpError | None:
    """The error for a body of `size` octets under the limit `max_size`, None when it fits."""
    if size <= max_size:
        return None
    form = "max size" if max_size == MAX_MESSAGE_SIZE_CAP else "configured max size"
    return AmqpError(PRECONDITION_FAILED, f"message size {size} is larger than {form} {max_size}")


def needs_inspection(header: bytes) -> bool:
    flags = header[HEADER_PROPS_OFFSET] << 8 | header[HEADER_PROPS_OFFSET + 1]
    return bool(flags & _DECIDING_FLAGS) or bool(flags & _HEADERS_FLAG and b"CC" in header)


def inspect(header: bytes, user: str, reply_to: Callable[[], str | None], impersonator: bool = False
            ) -> tuple[bytes, list[str]] | AmqpError:
    """(header to store, extra routing keys) or the error that closes the channel.

    `reply_to()` gives this channel's direct reply-to name, None without a reply consumer;
    `impersonator`: the user may claim another user-id."""
    props = BasicProperties.decode(header, HEADER_PROPS_OFFSET)
    rewritten = False
    if props.reply_to == REPLY_TO_QUEUE:
        name = reply_to()
        if name is None:
            return AmqpError(PRECONDITION_FAILED, "fast reply consumer does not exist")
        props.reply_to = name
        rewritten = True
    if props.user_id is not None and props.user_id != user and not impersonator:
        return AmqpError(PRECONDITION_FAILED,
                         f"user_id property set to '{props.user_id}' but authenticated user was '{user}'")
    if props.expiration is not None:
        error = expiration_error(props.expiration)
        if error is not None:
            return error
    keys: list[str] = []
    headers = props.headers
    if headers:
        for key in _ROUTING_HEADERS:
            if key not in headers:
                continue
            value = headers[key]
            if not isinstance(value, list):
                return AmqpError(PRECONDITION_FAILED, "invalid message: {unacceptable_type_in_header,"
                                                      f"\"{key}\",{_amqp_type_name(value)}}}")
            keys.extend(v if isinstance(v, str) else v.decode("utf-8", "replace")
                        for v in value if isinstance(v, str) or type(v) is bytes)
        if "BCC" in headers:
            del headers["BCC"]
            rewritten = True
    if rewritten:
        header = header[:HEADER_PROPS_OFFSET] + props.encode()
    return header, keys


def expiration_error(text: str) -> AmqpError | None:
    """RabbitMQ's parse_expiration: None when valid."""
    sign = 1
    digits = text
    if digits[:1] in ("+", "-"):
        sign = -1 if digits[0] == "-" else 1
        digits = digits[1:]
    n = 0
    while n < len(digits) and "0" <= digits[n] <= "9":
        n += 1
    if n == 0:
        reason = "no_integer"
    elif n < len(digits):
        reason = _erl_tuple(text, "leftover_string", _erl_string(digits[n:]))
    else:
        value = sign * int(digits)
        if value < 0:
            reason = _erl_tuple(text, "value_negative", str(value))
        elif value > expiration_max_ms:
            reason = _erl_tuple(text, "value_too_large", str(value))
        else:
            return None
    return AmqpError(PRECONDITION_FAILED, f"invalid expiration '{text}': {reason}")


def _erl_tuple(text: str, tag: str, value: str) -> str:
    """`{tag,value}` as ~p prints it after "invalid expiration '<text>': "."""
    column = len(f"invalid expiration '{text}': ")
    one_line = f"{{{tag},{value}}}"
    if column + len(one_line) < erlang_line_length:
        return one_line
    return f"{{{tag},\n{' ' * (column + 1)}{value}}}"


def _erl_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _amqp_type_name(value: object) -> str:
    """The field-table type name RabbitMQ reports for a header value."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, Timestamp):
        return "timestamp"
    if isinstance(value, ByteArray):
        return "binary"
    if isinstance(value, int):
        return "signedint" if -2**31 <= value < 2**31 else "long"
    if isinstance(value, (str, bytes)):
        return "longstr"
    if isinstance(value, float):
        return "double"
    if isinstance(value, dict):
        return "table"
    return "void" if value is None else "decimal"
