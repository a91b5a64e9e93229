"""Every Raft message, and the client protocol's, survives the runtime's envelope (msgpack) and comes
back equal, with its records (log entries) typed."""
from __future__ import annotations

import msgpack
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


# -- two code versions in one cluster (a rolling upgrade, docs/UPGRADES.md) ---------------------

def frame_of(kind: str, values: tuple, version: int = envelope.ENVELOPE_VERSION) -> bytes:
    """A frame as another version of this code would write it: `values` for a message of tag `kind`."""
    header = envelope.Envelope.new_message(source="h", version=version)
    (item,) = header.init("items", 1)
    item.sender, item.target, item.kind, item.credit = "a", "b", kind, 0
    return msgpack.packb((header.to_bytes(), [values]), use_bin_type=True)


def test_a_reply_from_a_node_older_than_machine_versions_reads_as_version_1() -> None:
    (_, _, msg, _), = envelope.decode(frame_of("HeartbeatReply", (4, "raft-n2/g0"), version=0))[1]
    assert msg == HeartbeatReply(4, "raft-n2/g0") and msg.machine_version == 1


def test_a_newer_nodes_appended_fields_are_dropped() -> None:
    (_, _, msg, _), = envelope.decode(frame_of("HeartbeatReply", (4, "raft-n2/g0", 2, "a field of the future")))[1]
    assert msg == HeartbeatReply(4, "raft-n2/g0", 2)


def test_a_frame_of_a_newer_layout_is_refused() -> None:
    with pytest.raises(ValueError, match="envelope version 2: this node reads versions up to 1"):
        envelope.decode(frame_of("HeartbeatReply", (4, "raft-n2/g0"), version=envelope.ENVELOPE_VERSION + 1))
