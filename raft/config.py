"""Cluster membership and the tunables of one Raft member.

`ClusterConfig` is a value: voters elect and form quorums, learners (non-voters) only receive
the log until they are caught up and promoted. Changes go one member at a time (dissertation
§4.1), so any two consecutive configurations share a majority and no joint consensus is needed.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import msgpack


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    voters: frozenset[str]
    learners: frozenset[str] = field(default_factory=frozenset)

    def members(self) -> frozenset[str]:
        return self.voters | self.learners

    def quorum(self) -> int:
        return len(self.voters) // 2 + 1

    def encode(self) -> bytes:
        return msgpack.packb([sorted(self.voters), sorted(self.learners)])

    @staticmethod
    def decode(data: bytes) -> "ClusterConfig":
        voters, learners = msgpack.unpackb(data)
        return ClusterConfig(frozenset(voters), frozenset(learners))


@dataclass(frozen=True, slots=True)
class RaftSettings:
    election_ticks: int = 10            # election timeout is uniform in [election_ticks, 2x)
    heartbeat_ticks: int = 2
    max_inflight: int = 8               # AppendEntries in flight per follower (pipelining window)
    max_batch_entries: int = 64
    max_batch_bytes: int = 1 << 20
    snapshot_interval: int = 0          # applied entries between snapshots; 0 = never
    snapshot_chunk_bytes: int = 1 << 20
    transfer_timeout_ticks: int = 10    # give up a leadership transfer after this long
    append_per_turn: bool = False       # leader: AppendEntries wait for replicate() (shell turn)
    notify_commit: bool = False         # leader: tell followers a new commit index at once (a
                                        # heartbeat each), so every copy applies an entry promptly
    quiesce: bool = False               # an idle group goes quiet: no heartbeats, no ticks (quiescence.py)
