"""Drive a QuorumMachine the way a Raft member does: encoded commands at increasing indexes."""
from __future__ import annotations

from typing import Any, NamedTuple

from actors.quorum import commands as c
from actors.quorum.config import queue_config
from actors.quorum.machine import QuorumMachine
from actors.quorum.queries import stats
from actors.quorum.ready import NO_EXPIRY
from actors.quorum.state import QueueState
from wire.properties import BasicProperties, encode_content_header


class Meta(NamedTuple):  # the machine duck-types the Raft member's ApplyMeta
    index: int
    term: int
    machine_version: int = 1


def header(priority: int | None = None, expiration: str | None = None, body_size: int = 1) -> bytes:
    return encode_content_header(60, body_size, BasicProperties(priority=priority, expiration=expiration))


H = header()


class Run:
    """One queue machine and the log it has applied; `run(cmd)` -> (reply, effects)."""

    def __init__(self, arguments: dict[str, Any] | None = None, *, name: str = "q",
                 created_ms: int = 0, version: int = 1) -> None:
        self.version = version  # the machine version the log runs
        self.machine = QuorumMachine(queue_config(name, "/", arguments or {}, created_ms=created_ms), version)
        self.state = self.machine.init()
        self.index = 0
        self.log: list[bytes] = []

    def __call__(self, command: c.Command) -> tuple[Any, list]:
        self.index += 1
        data = c.encode(command)
        self.log.append(data)
        self.state, reply, effects = self.machine.apply(Meta(self.index, 1, self.version), data, self.state)
        check_invariants(self.state)
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


def check_invariants(state: QueueState) -> None:
    """state.py's invariants, by walking everything (tests only: it is O(messages))."""
    ready = state.ready
    columns = list(ready.high.indexes()) + list(ready.normal.indexes())
    returned = [e[0] for e in ready.returns]
    unacked = [e for con in state.consumers.values() for e in con.checked.values()]
    held = list(state.dlx.indexes())
    outside = returned + [e[0] for e in unacked] + held
    assert len(set(outside)) == len(outside) and set(outside) == state.tracked, "tracked"
    assert not set(columns) & state.tracked, "a column index is tracked"
    assert ready.count == len(columns) + len(returned)
    expiring = sum(1 for e in ready.returns if e[2] != NO_EXPIRY)
    expiring += ready.high.expiring() + ready.normal.expiring()
    assert ready.expiring == expiring, (ready.expiring, expiring)
    assert state.unacked == len(unacked) and state.unacked_bytes == sum(e[1] for e in unacked)
    for con in list(state.consumers.values()) + [c for _, c in state.waiting]:
        assert con.credit >= 0
    if state.config.single_active:  # one active consumer; the waiting ones wait behind it
        active = [k for k, con in state.consumers.items() if con.status in ("up", "quiescing") and not con.once]
        assert len(active) <= 1, active
        assert not state.waiting or active, "consumers wait while none is active"
        assert all(con.status == "up" and not con.checked for _, con in state.waiting)
        assert all(state.consumers[k].status == "cancelled" for k, _ in state.waiting if k in state.consumers)
    else:
        assert not state.waiting
