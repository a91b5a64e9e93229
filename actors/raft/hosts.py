"""The "raft" host entry: one process per node holding the WalActor and every Raft member.

They share a process because `MemberLog` reads the WAL writer's memtables (persist/wal/member_log.py).
Start-up recovers the WAL (segments, snapshots, WAL replay) and then creates the members of the
configured groups from what was recovered, so a restarted node resumes with its log and vote.

Naming: the host of node N is `raft-N`; group g's member there is the actor "g", and the Raft id
of a member is its address as text ("raft-N/g"), so a core's `Send.to` is directly an address.

Time: one ticker per host calls every member's `tick` each `tick_ms` (default 10 ms). Defaults
for the cores: election timeout 15-30 ticks (150-300 ms), heartbeat every 3 ticks (30 ms) -
short enough that a killed leader is replaced in well under a second, long enough that 100
groups' heartbeats and a 0.2 ms fsync do not trigger elections.

Config (HostSpec.config): node, nodes, groups (int or list of names), data_dir, and optionally
tick_ms, sync_method, wal_max_size_bytes, segment_max_entries, gc_threshold, settings
(RaftSettings fields; defaults below: a few large AppendEntries in flight rather than many, and
one AppendEntries per follower per loop turn).
Control ops: "status" (args: groups) -> per group role/term/leader/commit/applied/state;
"wal_stats" -> flushes, entries, syncs, rollovers; "profile" (args: path) starts cProfile, and
with path None writes it (for bench/raft_bench.py --profile).
"""
from __future__ import annotations

import asyncio
import cProfile
import gc
import random
from pathlib import Path
from typing import Any

import structlog

from actors.raft.machine import KvMachine
from actors.raft.member import MemberActor
from actors.raft.wal import WalActor
from actors.runtime.address import Address
from persist.disk import RealDisk
from raft.config import ClusterConfig, RaftSettings
from raft.core import RaftCore
from persist.wal.writer import SEGMENT_MAX_ENTRIES, WAL_MAX_SIZE_BYTES, WalWriter

log = structlog.get_logger("warren.raft.host")

tick_ms_default = 10
# The memtables hold every entry since the last WAL rollover (up to wal_max_size_bytes) as
# tuples the cyclic collector must scan; at the default gen-0 threshold (700) it rescans them
# all the time (measured: follower CPU per commit halves with this).
gc_threshold = (50_000, 50, 100)
settings_default = {"election_ticks": 15, "heartbeat_ticks": 3, "max_inflight": 4,
                    "max_batch_entries": 1024, "max_batch_bytes": 1 << 20,
                    "append_per_turn": True}


def host_name(node: str) -> str:
    return f"raft-{node}"


def member_id(node: str, group: str) -> str:
    return str(Address(host_name(node), group))


def group_names(groups: int | list[str]) -> list[str]:
    return [f"g{i}" for i in range(groups)] if isinstance(groups, int) else list(groups)


def raft_host(runtime: Any, spec: Any) -> None:
    cfg = spec.config
    gc.set_threshold(*cfg.get("gc_threshold", gc_threshold))
    loop = asyncio.get_running_loop()
    disk = RealDisk(str(Path(cfg["data_dir"]) / "raft"), cfg.get("sync_method", "fdatasync"))
    writer = WalWriter(disk, cfg.get("wal_max_size_bytes", WAL_MAX_SIZE_BYTES),
                       cfg.get("segment_max_entries", SEGMENT_MAX_ENTRIES))
    writer.recover()
    wal = WalActor(writer, loop, runtime.send_queued)
    settings = RaftSettings(**{**settings_default, **cfg.get("settings", {})})
    members: dict[str, MemberActor] = {}
    for group in group_names(cfg["groups"]):
        me = Address(runtime.host, group)
        config = ClusterConfig(frozenset(member_id(n, group) for n in cfg["nodes"]))
        core = RaftCore(str(me), config, writer.member(str(me)), KvMachine(), random.Random(),
                        settings)
        members[group] = MemberActor(runtime, me, core, wal)
        runtime.spawn(group, members[group])
    log.info("raft.host_started", host=runtime.host, groups=len(members))
    tick_s = cfg.get("tick_ms", tick_ms_default) / 1000
    ticking = list(members.values())

    def tick() -> None:
        loop.call_later(tick_s, tick)  # first, so one member's crash cannot stop the clock
        for member in ticking:
            member.tick()
    loop.call_later(tick_s, tick)

    async def control(op: str, args: dict) -> Any:
        if op == "status":
            wanted = args.get("groups") or list(members)
            return {g: members[g].status() for g in wanted if g in members}
        if op == "wal_stats":
            return wal.stats()
        if op == "profile":  # benchmarks: {"path": P} starts cProfile, {"path": None} dumps to P
            return profiler.toggle(args.get("path"))
        return {"error": f"unknown op {op!r}"}
    runtime.control = control
    profiler = Profiler()


class Profiler:
    """cProfile of this host process, switched on and off by the "profile" control op."""

    def __init__(self) -> None:
        self._profile: cProfile.Profile | None = None
        self._path: str | None = None

    def toggle(self, path: str | None) -> str:
        if path is not None and self._profile is None:
            self._profile, self._path = cProfile.Profile(), path
            self._profile.enable()
            return "started"
        if path is None and self._profile is not None:
            self._profile.disable()
            self._profile.dump_stats(self._path)
            self._profile = None
            return f"written {self._path}"
        return "unchanged"
