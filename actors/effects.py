"""The effect vocabulary that pure cores return and shells carry out.

A core never performs IO. It returns a list of these frozen records; the actor shell (or the
deterministic simulator) interprets them in order. Ordering rule: effects are carried out in list
order, so a core that must persist before it replies puts the persist effect first.

Actor addresses are opaque to cores: a core receives them in messages and hands them back in
`Send`; only the runtime knows how to reach them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable


@dataclass(frozen=True, slots=True)
class Send:
    """Send `body` of kind `kind` to the actor at `to` (batched per destination by the runtime)."""

    to: Hashable
    kind: str
    body: Any


@dataclass(frozen=True, slots=True)
class StartTimer:
    """Ask the shell to call the core's `on_timer(name)` after `ticks` ticks."""

    name: str
    ticks: int


@dataclass(frozen=True, slots=True)
class CancelTimer:
    name: str


@dataclass(frozen=True, slots=True)
class Log:
    """A structured log event the shell passes to structlog (cores do not log themselves)."""

    event: str
    level: str = "info"
    fields: tuple[tuple[str, Any], ...] = ()


Effect = Send | StartTimer | CancelTimer | Log
