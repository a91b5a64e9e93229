"""Headers-exchange matching and binding validation, as rabbit_exchange_type_headers (3.10).

Theory of operation: a binding's arguments are a pattern. `x-match` picks the rule: "all" (the
default) needs every pattern key present in the message headers with an equal value, "any" needs
one. Pattern keys starting "x-" are ignored by all/any and compared by "all-with-x"/"any-with-x"
(x-match itself is never compared). A pattern value of void (None) matches on the key's presence
alone. Values compare as Erlang's == does: 1 equals 1.0, true is not 1. A binding is parsed once
(`HeadersPattern`), so matching a message is one pass over the pattern.
"""
from __future__ import annotations

from typing import Any

from metadata import texts
from metadata.fieldvalues import as_text, erl, plain, type_name
from wire.errors import AmqpError

X_MATCH = "x-match"
X_MATCH_KINDS = ("all", "any", "all-with-x", "any-with-x")
_PRESENT = object()  # the pattern wants the key present, whatever its value
_ABSENT = object()


def validate_binding(args: dict[str, Any] | None) -> AmqpError | None:
    if not args or X_MATCH not in args:
        return None
    value = args[X_MATCH]
    if not isinstance(value, (str, bytes)):
        return texts.invalid_x_match_type(type_name(value), erl(value))
    if as_text(value) not in X_MATCH_KINDS:
        return texts.invalid_x_match_value(as_text(value))
    return None


class HeadersPattern:
    __slots__ = ("any", "items")

    def __init__(self, args: dict[str, Any] | None) -> None:
        args = args or {}
        kind = as_text(args.get(X_MATCH, "all"))
        assert kind in X_MATCH_KINDS, "bindings are validated before they are parsed"
        with_x = kind.endswith("-with-x")
        self.any = kind.startswith("any")
        self.items: tuple[tuple[str, Any], ...] = tuple(
            (key, _PRESENT if value is None else plain(value))
            for key, value in args.items()
            if key != X_MATCH and (with_x or not key.startswith("x-"))
        )

    def matches(self, headers: dict[str, Any] | None) -> bool:
        headers = headers or {}
        for key, want in self.items:
            have = headers.get(key, _ABSENT)
            ok = have is not _ABSENT and (want is _PRESENT or want == plain(have))
            if ok and self.any:
                return True
            if not ok and not self.any:
                return False
        return not self.any
