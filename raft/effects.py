"""Effects the Raft core returns; the shell (or the simulator) carries them out in list order.

Ordering rules (etcd's `Ready` contract, written down here because this is where they live):
- `PersistHardState` must be durable before any `Send` after it (in this list or a later one)
  goes out: a vote or a term must never be forgotten after someone has acted on it. With the hard
  state a WAL record (persist/wal/member_log.py) the shell holds those Sends until the WAL flush that
  carries it has synced.
- `WriteSnapshot` is written durably with `log.install_snapshot(index, term, data)`, then the
  shell calls `core.snapshot_written(index, term)`; the core compacts, or (follower) restores
  and acks the leader only then. Snapshot only what is durable: a snapshot of entries the log
  holds (`log.term_at(index) == term`) waits until `log.written_index() >= index`.
- Log appends are not effects: the core calls `log.append` directly, the WAL writes them in the
  background and the shell reports `core.written(upto)`; acks wait for that.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable

from raft.messages import Message


@dataclass(frozen=True, slots=True)
class Send:
    to: str
    msg: Message


@dataclass(frozen=True, slots=True)
class PersistHardState:
    term: int
    voted_for: str | None


@dataclass(frozen=True, slots=True)
class ClientReply:
    """The command proposed with `corr` is committed and applied; `reply` is the machine's."""
    corr: Hashable
    reply: Any


@dataclass(frozen=True, slots=True)
class NotLeader:
    """This member cannot take the command; try `leader` (None: unknown)."""
    corr: Hashable
    leader: str | None


@dataclass(frozen=True, slots=True)
class Rejected:
    """A membership change the leader refused; `reason` is a short stable token."""
    corr: Hashable
    reason: str


@dataclass(frozen=True, slots=True)
class MachineEffect:
    """An effect the state machine returned from apply (leader only, as Ra's default)."""
    effect: Any


@dataclass(frozen=True, slots=True)
class WriteSnapshot:
    index: int
    term: int
    data: bytes


@dataclass(frozen=True, slots=True)
class LeaderChanged:
    leader: str | None


Effect = (Send | PersistHardState | ClientReply | NotLeader | Rejected | MachineEffect
          | WriteSnapshot | LeaderChanged)
