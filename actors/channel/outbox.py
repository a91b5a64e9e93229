"""What a channel has to say, in the order it said it.

Theory of operation: the channel core produces effects while it handles a burst of commands and
messages; the shell takes them all with `take()` once per socket read or mailbox batch. Three kinds
are gathered rather than appended one by one, because a burst repeats them: frames for the client
(one `Write` per run of frames), publishes per destination queue (one `Send(Publish)` per queue)
and settlements per queue (one `Send(Settle)` per queue).

Ordering rule: effects leave in the order they were produced. Anything gathered so far is emitted
before the next effect appended with `emit`, so a queue sees publishes, settlements and calls in
channel order, and the client sees frames in the order the channel wrote them.
"""
from __future__ import annotations

from typing import Any, Hashable

from actors.messages.channel_queue import Publish, Settle
from effects import Send, Write


class Outbox:
    __slots__ = ("_out", "frames", "publishes", "_settlements")

    def __init__(self) -> None:
        self._out: list = []                          # effects, in order
        self.frames: list[bytes] = []                 # frames not yet wrapped in a Write
        self.publishes: dict[Hashable, list] = {}     # queue -> Published records of this burst
        self._settlements: dict[Hashable, tuple[list, list, list]] = {}

    def write(self, *frames: bytes) -> None:
        self.frames.extend(frames)

    def emit(self, effect: Any) -> None:
        """Append an effect after everything gathered so far."""
        self.emit_gathered()
        self._out.append(effect)

    def settle(self, queue: Hashable, *, acked=(), requeued=(), discarded=()) -> None:
        """Gather settlements of `queue`'s messages (by the queue's message ids)."""
        a, r, d = self._settlements.get(queue) or self._settlements.setdefault(queue, ([], [], []))
        a.extend(acked)
        r.extend(requeued)
        d.extend(discarded)

    def emit_gathered(self) -> None:
        if self.frames:
            self._out.append(Write(self.frames))
            self.frames = []
        if self.publishes:
            for queue, batch in self.publishes.items():
                self._out.append(Send(queue, Publish(batch), len(batch)))
            self.publishes = {}
        if self._settlements:
            for queue, (acked, requeued, discarded) in self._settlements.items():
                self._out.append(Send(queue, Settle(acked, requeued, discarded)))
            self._settlements = {}

    def empty(self) -> bool:
        """Whether nothing was produced since the last take."""
        return not (self._out or self.frames or self.publishes or self._settlements)

    def take(self) -> list:
        """Every effect produced since the last take, gathered ones included."""
        self.emit_gathered()
        out, self._out = self._out, []
        return out
