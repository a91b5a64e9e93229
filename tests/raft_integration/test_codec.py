"""Every Raft message, and the client protocol's, survives the runtime's envelope (msgpack) and comes
back equal, with its records (log entries) typed."""
from __future__ import annotations

import pytest

import actors.messages.raft  # noqa: F401 - registers the Raft messages
from actors.messages.raft import Committed, CommittedBatch, NotLeaderReply, Outcome, Proposal, ProposeBatch
from actors.runtime import envelope
from raft.log import Entry
from raft.messages import (AppendEntries, AppendReply, Heartbeat, HeartbeatReply,
                                   InstallSnapshot, InstallSnapshotReply, PreVote, PreVoteReply,
                                   RequestVote, RequestVoteReply, TimeoutNow)

MESSAGES = [
    PreVote(3, "raft-n1/g0", 7, 2), PreVoteReply(3, "raft-n2/g0", True),
    RequestVote(4, "raft-n1/g0", 7, 2, transfer=True), RequestVoteReply(4, "raft-n3/g0", False),
    AppendEntries(4, "raft-n1/g0", 6, 2, (Entry(7, 4, b"u\x00data"), Entry(8, 4, b"n")), 5),
    AppendEntries(4, "raft-n1/g0", 8, 4, (), 8),
    AppendReply(4, "raft-n2/g0", False, 6, hint_index=3, hint_term=1),
    Heartbeat(4, "raft-n1/g0", 8), HeartbeatReply(4, "raft-n2/g0"),
    InstallSnapshot(4, "raft-n1/g0", 100, 3, 0, b"\x81\xa1k", True),
    InstallSnapshotReply(4, "raft-n2/g0", 100, 3, True), TimeoutNow(5, "raft-n1/g0"),
    ProposeBatch([Proposal(1, b"cmd"), Proposal(2, b"cmd2")]), Committed(3, 17),
    CommittedBatch([Outcome(1, 2), Outcome(4, None)]), NotLeaderReply(5, None),
]


@pytest.mark.parametrize("msg", MESSAGES, ids=lambda m: type(m).__name__)
def test_raft_message_round_trips_through_an_envelope(msg) -> None:
    _, [(_, _, decoded, _)] = envelope.decode(envelope.encode("h", [("a", "b", msg, 0)]))
    assert decoded == msg
    if isinstance(msg, AppendEntries):
        assert type(decoded.entries) is tuple and all(type(e) is Entry for e in decoded.entries)  # the log reads e.index
