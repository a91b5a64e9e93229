"""Waiting for real processes: poll a condition until it holds, with a deadline.

Tests that drive real nodes cannot be told when a restart or a deletion has landed, so they poll
the observable condition; they never sleep for a fixed time instead of checking."""
from __future__ import annotations

import time
from typing import Any, Callable

poll_s = 0.05
# The timeout of a control ask made inside a poll while a host restarts: an ask the supervisor
# forwarded to the host before it noticed the host's death is never answered, and the poll should
# ask again soon rather than wait out the 10 s default.
poll_ask_s = 2.0


def until(condition: Callable[[], Any], what: str, timeout_s: float = 30.0) -> Any:
    """The first truthy value of `condition()`; AssertionError naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(poll_s)
