"""Messages Raft members exchange (Raft §5, dissertation §4, §9.6 pre-vote, §3.10 transfer).

Every message carries the sender's `term` and its id `src`. They are plain frozen records so
the shell can encode them however it likes and the simulator can pass them as they are. Fields
are only ever appended, with a default, so members of two code versions understand each other
(actors/messages drops the fields it does not know and defaults those it was not sent).
"""
from __future__ import annotations

from dataclasses import dataclass

from raft.log import Entry


@dataclass(frozen=True, slots=True)
class PreVote:
    """'Would you vote for me in `term`?' - asked without bumping the real term (§9.6)."""
    term: int
    src: str
    last_index: int
    last_term: int


@dataclass(frozen=True, slots=True)
class PreVoteReply:
    term: int
    src: str
    granted: bool


@dataclass(frozen=True, slots=True)
class RequestVote:
    term: int
    src: str
    last_index: int
    last_term: int
    transfer: bool = False  # sent after TimeoutNow: voters in a leader lease must not ignore it


@dataclass(frozen=True, slots=True)
class RequestVoteReply:
    term: int
    src: str
    granted: bool


@dataclass(frozen=True, slots=True)
class AppendEntries:
    term: int
    src: str
    prev_index: int
    prev_term: int
    entries: tuple[Entry, ...]
    commit: int


@dataclass(frozen=True, slots=True)
class AppendReply:
    """success: `index` is the follower's written index known to match the leader.
    reject: `index` echoes the rejected prev_index; `hint_index`/`hint_term` give the
    follower's last entry that could match (etcd's findConflictByTerm) for fast back-off.
    `machine_version`: the highest machine version the follower runs (versions.py; a member
    whose code predates the field sends none and is read as 1)."""
    term: int
    src: str
    success: bool
    index: int
    hint_index: int = 0
    hint_term: int = 0
    machine_version: int = 1


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Leader liveness; `commit` is min(follower match, leader commit), safe to apply. `quiet`:
    the leader goes quiet (quiescence.py); a follower whose log ends at `commit` goes quiet too."""
    term: int
    src: str
    commit: int
    quiet: bool = False


@dataclass(frozen=True, slots=True)
class HeartbeatReply:
    term: int
    src: str
    machine_version: int = 1  # as AppendReply's


@dataclass(frozen=True, slots=True)
class InstallSnapshot:
    term: int
    src: str
    index: int
    snap_term: int
    offset: int
    data: bytes
    done: bool


@dataclass(frozen=True, slots=True)
class InstallSnapshotReply:
    """`offset`: the next byte the follower expects; `done` once the snapshot is durable."""
    term: int
    src: str
    index: int
    offset: int
    done: bool


@dataclass(frozen=True, slots=True)
class TimeoutNow:
    """Leadership transfer: start an election now, skipping pre-vote (§3.10)."""
    term: int
    src: str


Message = (PreVote | PreVoteReply | RequestVote | RequestVoteReply | AppendEntries | AppendReply
           | Heartbeat | HeartbeatReply | InstallSnapshot | InstallSnapshotReply | TimeoutNow)
