"""Drive a QuorumMachine the way a Raft member does: encoded commands at increasing indexes."""
from __future__ import annotations

from typing import Any, NamedTuple

from actors.quorum import commands as c
from actors.quorum.config import queue_config
from actors.quorum.machine import QuorumMachine, stats
from wire.properties import BasicProperties, encode_content_header


class Meta(NamedTuple):  # the machine duck-types the Raft member's ApplyMeta
    index: int
    term: int


def header(priority: int | None = None, expiration: str | None = None, body_size: int = 1) -> bytes:
    return encode_content_header(60, body_size, BasicProperties(priority=priority, expiration=expiration))


H = header()


class Run:
    """One queue machine and the log it has applied; `run(cmd)` -> (reply, effects)."""

    def __init__(self, arguments: dict[str, Any] | None = None, *, name: str = "q",
                 created_ms: int = 0) -> None:
        self.machine = QuorumMachine(queue_config(name, "/", arguments or {}, created_ms=created_ms))
        self.state = self.machine.init()
        self.index = 0
        self.log: list[bytes] = []

    def __call__(self, command: c.Command) -> tuple[Any, list]:
        self.index += 1
        data = c.encode(command)
        self.log.append(data)
        self.state, reply, effects = self.machine.apply(Meta(self.index, 1), data, self.state)
        return reply, effects

    def publish(self, *bodies: bytes, now_ms: int = 0, hdr: bytes = H, publisher: str = "p") -> list:
        """Enqueue each body (tracked publisher `publisher`); all their effects."""
        out: list = []
        for body in bodies:
            seq = self.state.enqueuers.get(publisher, 1)
            _reply, effects = self(c.Enqueue(now_ms, publisher, seq, "x", "rk", hdr, body))
            out += effects
        return out

    def body(self, index: int) -> bytes:
        """The body a shell would read back from the log entry at `index`."""
        return c.published(self.log[index - 1])[3]

    @property
    def stats(self) -> dict[str, int]:
        return stats(self.state)

    def live(self) -> list[int]:
        return sorted(self.machine.live_indexes(self.state))
