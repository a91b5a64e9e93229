"""The publishers' credit of a `manual_credit` actor that paces them (flow/intake.py decides when):
let go at once (`release`: everything the actor received so far, the runtime's `processed_all`), or
held (`hold`) until released or for at most `max_ms`, when `expired` is called to decide again.
Classic queues (actors/queue/shell.py) and quorum queue leaders (actors/quorum/member.py) use it."""
from __future__ import annotations

import asyncio
from typing import Any, Callable

from actors.runtime.address import Address


class HeldCredit:
    def __init__(self, runtime: Any, address: Address, expired: Callable[[], None]) -> None:
        self._runtime = runtime
        self._address = address
        self._expired = expired
        self._timer: asyncio.TimerHandle | None = None

    def release(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._runtime.processed_all(self._address)

    def hold(self, max_ms: int) -> None:
        """Keep holding; `expired` is called `max_ms` after the hold began unless released first."""
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(max_ms / 1000, self._ended)

    def _ended(self) -> None:
        self._timer = None
        self._expired()
