"""Raft's own effects: what `RaftCore` returns and `RaftDriver` (driver.py) carries out.

As Ra's ra_server returns its own effects ({send_msg, ...}, {reply, ...}) and leaves their meaning
to ra_server_proc, this package declares its vocabulary here and imports nothing of the broker's
(effects/): the shells that run a Raft group (actors/quorum/member.py for a quorum queue,
actors/raft/member.py for the metadata group and the test machine, tests/sim) are the driver's
ports and translate each of these into what it means where they run (a runtime send, a Committed
reply to a channel, a log line). Their ordering rules are raft/core.py's.

- `ToPeer`: a message (raft/messages.py) for another member of the group, by member id;
- `PersistHardState`: the term and vote, durable before any `ToPeer` after it;
- `ClientReply`, `NotLeader`, `ChangeRefused`: the answers to a proposal or a membership change;
- `MachineEffect`: an effect of the replicated machine itself, in that machine's vocabulary (for
  quorum queues actors/quorum/effects.py), returned on the leader only, as Ra's default;
- `WriteSnapshot`: a snapshot to make durable before `core.snapshot_written`;
- `LeaderChanged`: this member's idea of the leader changed;
- `VersionSwitched`: this member's machine runs a new version from this entry on (raft/versions.py);
- `MachineHalted`: this member stopped applying: the log holds an entry its machine cannot run (a
  machine version it does not know, raft/versions.py); the shell logs `reason` and the member
  applies nothing more until it is upgraded.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable


@dataclass(frozen=True, slots=True)
class ToPeer:
    """Send `msg` to the member `to` (its id; the shell knows the address)."""

    to: str
    msg: Any


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
class ChangeRefused:
    """A membership change the leader refused; `reason` is a short stable token."""

    corr: Hashable
    reason: str


@dataclass(frozen=True, slots=True)
class MachineEffect:
    """An effect the replicated state machine returned from apply (leader only, as Ra's default)."""

    effect: Any


@dataclass(frozen=True, slots=True)
class WriteSnapshot:
    index: int
    term: int
    data: bytes


@dataclass(frozen=True, slots=True)
class LeaderChanged:
    leader: str | None


@dataclass(frozen=True, slots=True)
class VersionSwitched:
    """The entry at `index` switched the machine from version `old` to `new` (on every member)."""

    index: int
    old: int
    new: int


@dataclass(frozen=True, slots=True)
class MachineHalted:
    """Applying stopped before entry `index`: `reason` says why (said once per halt)."""

    index: int
    reason: str


Effect = (ToPeer | PersistHardState | ClientReply | NotLeader | ChangeRefused | MachineEffect | WriteSnapshot
          | LeaderChanged | VersionSwitched | MachineHalted)
