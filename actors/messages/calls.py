"""The answer to every request between actors: `Reply(rid, value, error)`.

A request carries a request id (`rid`) chosen by the asker; the answer echoes it, with either a
value (a plain value or a registered record) or an `AmqpError` (wire/errors.py) that the asker turns
into a channel or connection close. Errors are data: nothing raises across an actor boundary.
"""
from __future__ import annotations

from typing import Any

from actors.messages import message, register
from wire.errors import AmqpError

register(AmqpError)


@message
class Reply:
    rid: int
    value: Any = None
    error: AmqpError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None
