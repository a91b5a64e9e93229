"""The node's member of the metadata Raft group: its WAL, its Raft core and its clock (a shell).

The metadata group is one Raft group over every node (its member id on node N is
`N:node/metadata`, cluster/shell.py `member_id`). Its log lives in its own WAL under
`<data_dir>/coordination/` (RabbitMQ keeps Khepri in its own Ra system, `coordination`, apart from
the quorum queues' WAL), written through a WalActor in the node host, with the registry as its
machine (metadata_machine.py). A node that starts a new cluster is the group's only voter; a node
that joins starts with no voters, so it never stands for election, and learns the group's
configuration from the leader that adds it; a restarted node takes the configuration from its log
(configuration entries or a snapshot), and one whose log holds none has never had a peer: it is
still the only voter (`alone`).

Timing: a tick every `tick_ms` (50 ms); elections after 10-20 ticks (0.5-1 s) of silence,
heartbeats every 2 ticks (100 ms). The metadata changes rarely and its node host is lightly
loaded, so these fail over within a second without standing for election on a busy machine's
hiccup (five heartbeats in the shortest timeout, as before). The clock is most of what an idle
node host does: at 20 ms ticks it woke ~210 times a second and used ~3.5 % of a CPU, at 50 ms
~120 times and ~2.5 % (three nodes on one machine share its CPUs with the load they carry).
A snapshot every `snapshot_interval` applied entries lets the log be truncated.
"""
from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

from actors.cluster.shell import member_id
from actors.node.metadata_machine import MetadataMachine
from actors.raft.member import MemberActor
from actors.raft.wal import WalActor
from actors.runtime.address import Address
from persist.disk import RealDisk
from persist.wal.writer import WalWriter
from raft.config import ClusterConfig, RaftSettings
from raft.core import RaftCore

MEMBER_NAME = "metadata"
WAL_DIR = "coordination"
tick_ms = 50
wal_max_size_bytes = 64 * 1024 * 1024
segment_max_entries = 4096
settings = RaftSettings(election_ticks=10, heartbeat_ticks=2, max_inflight=4, max_batch_entries=256,
                        snapshot_interval=4096, append_per_turn=True, notify_commit=True)


def start_member(runtime: Any, data_dir: str, node: str, machine: MetadataMachine, *, alone: bool) -> MemberActor:
    loop = asyncio.get_running_loop()
    writer = WalWriter(RealDisk(str(Path(data_dir) / WAL_DIR)), wal_max_size_bytes, segment_max_entries)
    writer.recover()
    me = member_id(node)
    voters = frozenset({me}) if alone else frozenset()
    core = RaftCore(me, ClusterConfig(voters), writer.member(me), machine, random.Random(), settings)
    member = MemberActor(runtime, Address(runtime.host, MEMBER_NAME), core, WalActor(writer, loop, runtime.send_queued))
    runtime.spawn(MEMBER_NAME, member)

    def tick() -> None:
        loop.call_later(tick_ms / 1000, tick)  # first, so a crash in one tick cannot stop the clock
        member.tick()
    loop.call_later(tick_ms / 1000, tick)
    return member
