"""The reply convention of calls between actors: ("ok", value) or ("err", code, detail, connection)."""
from __future__ import annotations

from typing import Any

from wire.errors import AmqpError


def ok(value: Any = None) -> tuple:
    return ("ok", value)


def err(error: AmqpError) -> tuple:
    return ("err", error.code, error.detail, error.connection)


def is_ok(reply: Any) -> bool:
    return reply[0] == "ok"
