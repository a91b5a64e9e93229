"""The runtime's handlers for the effects every core returns: Send, StartTimer, CancelTimer, Log.

A shell builds its `Interpreter` (effects/interpreter.py) from `ActorEffects(...).handlers()` and
adds the effects only it carries out. Sends go through the host's Runtime (batched per destination
host, credit taken on the sender's link); timers are the event loop's, in the core's tick unit
(`tick_s` seconds each), and fire `on_timer(name)` unless cancelled or restarted; Log effects
become structlog events.
"""
from __future__ import annotations

import asyncio
from typing import Any, Callable

import structlog

from actors.runtime.address import Address
from effects import CancelTimer, Log, Send, StartTimer
from effects.interpreter import Handler

log = structlog.get_logger("warren.effects")


class ActorEffects:
    def __init__(self, runtime: Any, me: Address, *, on_timer: Callable[[str], None] | None = None,
                 tick_s: float = 0.001) -> None:
        self.runtime = runtime
        self.me = me
        self.on_timer = on_timer
        self.tick_s = tick_s
        self._timers: dict[str, asyncio.TimerHandle] = {}

    def handlers(self) -> dict[type, Handler]:
        return {Send: self.send, StartTimer: self.start_timer, CancelTimer: self.cancel_timer, Log: self.log}

    def send(self, e: Send) -> None:
        self.runtime.send(e.to, e.msg, sender=self.me, credit=e.credit)

    def start_timer(self, e: StartTimer) -> None:
        self.cancel_timer(e)
        self._timers[e.name] = asyncio.get_running_loop().call_later(max(e.ticks, 0) * self.tick_s, self._fire, e.name)

    def cancel_timer(self, e: StartTimer | CancelTimer) -> None:
        handle = self._timers.pop(e.name, None)
        if handle is not None:
            handle.cancel()

    def cancel_all(self) -> None:
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()

    def log(self, e: Log) -> None:
        getattr(log, e.level)(e.event, actor=str(self.me), **dict(e.fields))

    def _fire(self, name: str) -> None:
        self._timers.pop(name, None)
        if self.on_timer is not None:
            self.on_timer(name)
