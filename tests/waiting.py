"""Waiting for real processes: poll a condition until it holds, with a deadline.

Tests that drive real nodes (or a host's event loop) cannot be told when a restart, a deletion or a
timer has landed, so they poll the observable condition; they never sleep for a fixed time instead
of checking. `until` polls from a thread that may block between polls; `async_until` from a
coroutine, sleeping on the event loop so that what it waits for can run meanwhile, and its
condition may be a coroutine function. Both return the condition's first truthy value; after
`timeout_s` they raise AssertionError("timed out waiting for <what>"), or with `raises=False`
return the last falsy value, for a caller that reports the failure its own way. `what` may be a
function, called only on a time-out (the tail of a log read then, say)."""
from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable
from typing import Any, Callable

poll_s = 0.05
# The timeout of a control ask made inside a poll while a host restarts: an ask the supervisor
# forwarded to the host before it noticed the host's death is never answered, and the poll should
# ask again soon rather than wait out the 10 s default.
poll_ask_s = 2.0

What = str | Callable[[], str]


class _Deadline:
    """What both loops decide after a poll: stop with a truthy value, or, once `timeout_s` is
    past, raise (or stop with the falsy value, with raises=False); else poll again."""

    def __init__(self, what: What, timeout_s: float, raises: bool) -> None:
        self.what, self.raises = what, raises
        self.at = time.monotonic() + timeout_s

    def done(self, value: Any) -> bool:
        if value:
            return True
        if time.monotonic() > self.at:
            if self.raises:
                raise AssertionError(f"timed out waiting for {self.what() if callable(self.what) else self.what}")
            return True
        return False


def until(condition: Callable[[], Any], what: What, timeout_s: float = 30.0, *, every_s: float = poll_s,
          raises: bool = True) -> Any:
    """The first truthy value of `condition()`, polled every `every_s` (0: a condition that
    waits by itself, e.g. pumping a client's events for a while)."""
    deadline = _Deadline(what, timeout_s, raises)
    while True:
        value = condition()
        if deadline.done(value):
            return value
        if every_s:
            time.sleep(every_s)


async def async_until(condition: Callable[[], Any | Awaitable[Any]], what: What, timeout_s: float = 30.0, *,
                      every_s: float = poll_s, raises: bool = True) -> Any:
    """`until` inside an event loop: the loop runs between polls (every_s 0: one turn of it)."""
    deadline = _Deadline(what, timeout_s, raises)
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if deadline.done(value):
            return value
        await asyncio.sleep(every_s)
