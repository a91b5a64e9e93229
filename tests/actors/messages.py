"""A message for the runtime's tests: a label and any msgpack-able body."""
from __future__ import annotations

from typing import Any

from actors.messages import message


@message
class Note:
    kind: str
    body: Any
