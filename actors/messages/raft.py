"""The Raft protocol: members' messages to each other (raft/messages.py, registered here) and a
group's client protocol.

Client -> member: `Propose` (one command) or `ProposeBatch` (a client's whole batch, proposed as
ONE batch to the core). Member -> client: `Committed` (one reply) or `CommittedBatch` (every reply
of one effect run to one client), `NotLeaderReply` (try `leader`; None while an election runs) and
`ChangeRefusedReply` (a membership change the leader refused). `corr` is the client's correlation
id; commands and replies are opaque to the protocol (the machine's bytes and values).
"""
from __future__ import annotations

from typing import Any, NamedTuple

from actors.messages import message, register
from raft import messages as peer

for _cls in (peer.PreVote, peer.PreVoteReply, peer.RequestVote, peer.RequestVoteReply, peer.AppendEntries,
             peer.AppendReply, peer.Heartbeat, peer.HeartbeatReply, peer.InstallSnapshot,
             peer.InstallSnapshotReply, peer.TimeoutNow):
    register(_cls)


class Proposal(NamedTuple):
    corr: int
    command: bytes


class Outcome(NamedTuple):
    corr: int
    reply: Any


@message
class Propose:
    corr: int
    command: bytes


@message
class ProposeBatch:
    proposals: list[Proposal]


@message
class Committed:
    corr: int
    reply: Any


@message
class CommittedBatch:
    outcomes: list[Outcome]


@message
class NotLeaderReply:
    corr: int
    leader: str | None


@message
class ChangeRefusedReply:
    corr: int
    reason: str
