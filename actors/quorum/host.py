"""The "quorum" host entry: one process per node holding the node's WAL for quorum queues and every
quorum queue member on the node.

They share a process because a member's `MemberLog` reads the WAL writer's memtables
(persist/wal/member_log.py), and one WAL per node is what makes group commit pay: every member's
appends of a loop turn go out in one write and one fdatasync (actors/raft/wal.py).

Members come and go at run time: the manager actor (`members`, actors/quorum/names.py) takes
`StartMember` and `DeleteMember` (actors/messages/quorum.py) and answers each with a `Reply` once it
is durable; `MemberStatus` with a member's status; `KeepMembers` (from the node once it serves)
deletes the members of queues its metadata no longer has; a `ChannelsGone` sent to it reaches every member on the node (no answer). Which members exist is the host's member table (actors/quorum/member_table.py),
rewritten atomically BEFORE a member is started and BEFORE a deleted member's files go, so a crash
at any point leaves either the old or the new set, never files without a row or a row whose files
were half deleted. Start-up (also after kill -9): load the table, recover the WAL keeping only its
members (snapshot + segments + WAL replay, torn tails cut and logged; a deleted member's leftover
WAL records are skipped), then start every member from what was recovered.

A member whose `receive` raised is removed by the runtime (actors/runtime/mailbox.py), yet the
host still holds it, ticks it and hands it WAL notices: a member half there, deaf to its peers and
channels, for good. The host checks at every tick and, finding one, exits (as a host whose loop
crashed does): its supervisor starts it again and every member recovers from the WAL, the one
recovery path that kill -9 exercises.

Time: one ticker per host calls every member's `tick` each `tick_ms`. The defaults are slow on
purpose: a node holds hundreds of members and every leader heartbeats its followers; a 250 ms tick
with heartbeats every 2 ticks (500 ms) and elections after 8-16 ticks (2-4 s) keeps 1,000 idle
members cheap and still replaces a dead leader within seconds (tests use faster settings).

Config (HostSpec.config): node, data_dir, and optionally tick_ms, sync_method,
wal_max_size_bytes (512 MiB), segment_max_entries (4096), settings (RaftSettings fields), node_address
(where x-expires deletions go), gc_threshold. Control ops: "status" (args: queue or uid, optional)
-> per member role/term/leader/indexes/counts; "members"; "disk" -> per member segment files and
bytes, and the WAL files; "wal_stats"; "start_members" (a list of the StartMember fields, for tests
and tools; "leader": the node to lead first) / "delete_member" (uid); "pid"; "profile" (as the raft
host's).
"""
from __future__ import annotations

import asyncio
import gc
import os
import random
from pathlib import Path
from typing import Any, Callable

import structlog

from actors.messages.calls import Reply
from actors.messages.quorum import ChannelsGone, DeleteMember, HostChannelsGone, KeepMembers, MemberStatus, StartMember
from actors.quorum import member_table
from actors.quorum.dead_letter_shell import DEAD_LETTERS_NAME, DeadLetterActor
from actors.quorum.config import queue_config
from actors.placement import node_of
from actors.quorum.front import QueueFront, RaftView, channels
from actors.quorum.machine import QuorumMachine
from actors.quorum.flow_links import flow_links
from actors.quorum.member import QuorumMember, monotonic_ms
from actors.quorum.member_table import MemberSpec
from actors.quorum.names import MANAGER_NAME, channel_incarnation, member_id, member_name
from actors.raft.hosts import Profiler, gc_threshold
from actors.raft.wal import WalActor
from actors.runtime.address import Address
from persist.disk import Disk, RealDisk, write_atomic
from persist.wal.writer import SEGMENT_MAX_ENTRIES, WAL_MAX_SIZE_BYTES, WalWriter
from raft.config import ClusterConfig, RaftSettings
from raft.core import RaftCore

log = structlog.get_logger("warren.quorum.host")

TABLE_PATH = "members.table"
tick_ms_default = 250
settings_default = {"election_ticks": 8, "heartbeat_ticks": 2, "max_inflight": 4,
                    "max_batch_entries": 1024, "max_batch_bytes": 1 << 20, "append_per_turn": True,
                    "snapshot_interval": 0}


def load_table(disk: Disk) -> list[MemberSpec]:
    if not disk.exists(TABLE_PATH):
        return []
    return member_table.decode(disk.read_file(TABLE_PATH))


class QuorumHost:
    """The node's quorum members, their WAL, their ticker; the manager actor is this object."""

    def __init__(self, runtime: Any, disk: Disk, loop: asyncio.AbstractEventLoop, cfg: dict,
                 registry: Any = None) -> None:
        self.runtime = runtime
        self.node = cfg["node"]
        self.disk = disk
        self.settings = RaftSettings(**{**settings_default, **cfg.get("settings", {})})
        node_address = cfg.get("node_address")
        self.node_address = Address.parse(node_address) if node_address else None
        self.table = load_table(disk)
        keys = {member_name(spec.uid) for spec in self.table}
        self.writer = WalWriter(disk, cfg.get("wal_max_size_bytes", WAL_MAX_SIZE_BYTES),
                                cfg.get("segment_max_entries", SEGMENT_MAX_ENTRIES))
        self.writer.recover(keep=keys.__contains__)
        self.wal = WalActor(self.writer, loop, runtime.send_queued)
        self.members: dict[str, QuorumMember] = {}
        self.by_id: dict[str, QuorumMember] = {}  # by member id (where dead-letter settlements go)
        # without a registry (the quorum-only test launchers) dead-lettered messages are dropped
        self.dead_letters = None if registry is None else DeadLetterActor(runtime, registry, self._settled)
        if self.dead_letters is not None:
            runtime.spawn(DEAD_LETTERS_NAME, self.dead_letters)
        for spec in self.table:
            self._start(spec)
        log.info("quorum.host_started", host=runtime.host, members=len(self.members))

    # -- the manager's messages ----------------------------------------------------------------
    def receive(self, sender: Address, msg: Any) -> None:
        if type(msg) is StartMember:
            self.start_members([MemberSpec(msg.uid, msg.vhost, msg.name, tuple(msg.nodes),
                                           dict(msg.arguments), msg.created_ms)], msg.leader)
        elif type(msg) is DeleteMember:
            self.delete_member(msg.uid)
        elif type(msg) is MemberStatus:  # uid "": every member's, by uid
            member = self.members.get(msg.uid)
            status = self.status() if not msg.uid else member.status() if member is not None else None
            self.runtime.send(sender, Reply(msg.rid, status), sender=Address(self.runtime.host, MANAGER_NAME))
            return
        elif type(msg) is KeepMembers:
            self.keep_members(set(msg.uids))
            return
        elif type(msg) is ChannelsGone:  # every member here gives back what those channels held
            for member in self.members.values():
                member.channels_gone(msg.prefix)
            return
        elif type(msg) is HostChannelsGone:
            current = f"{msg.host}/ch:{msg.current}."
            self._gone(lambda ch: Address.parse(ch).host == msg.host and not ch.startswith(current))
            return
        else:
            log.warning("quorum.manager_unexpected", kind=type(msg).__name__, sender=str(sender))
            return
        self.runtime.send(sender, Reply(msg.rid), sender=Address(self.runtime.host, MANAGER_NAME))

    def start_members(self, specs: list[MemberSpec], leader: str = "") -> None:
        """Durably add the members to the table (one write), then start them (idempotent by uid);
        on the `leader` node a new member asks for votes at its first tick."""
        new = [spec for spec in specs if spec.uid not in self.members]
        if not new:
            return
        self._save(self.table + new)
        for spec in new:
            member = self._start(spec)
            if leader == self.node and member.core.log.last_index_term()[0] == 0:
                member.core.campaign_soon()

    def delete_member(self, uid: str) -> None:
        """Stop the member, durably drop it from the table, then delete its files."""
        member = self.members.pop(uid, None)
        if member is not None:
            self.by_id.pop(str(member.me), None)
            if self.dead_letters is not None:
                self.dead_letters.worker.forget(str(member.me))
            member.stop()
            self.runtime.remove(member.me.name)
        if any(spec.uid == uid for spec in self.table):
            self._save([spec for spec in self.table if spec.uid != uid])
        self.writer.forget(member_name(uid))
        log.info("quorum.member_deleted", uid=uid)

    def keep_members(self, uids: set[str]) -> None:
        """Delete every member of a queue not in `uids` (the node's metadata: a queue deleted
        while this node was down leaves its member here)."""
        for spec in list(self.table):
            if spec.uid not in uids:
                log.info("quorum.orphan_member", uid=spec.uid, vhost=spec.vhost, queue=spec.name)
                self.delete_member(spec.uid)

    def _save(self, table: list[MemberSpec]) -> None:
        write_atomic(self.disk, TABLE_PATH, member_table.encode(table))
        self.table = table

    def _start(self, spec: MemberSpec) -> QuorumMember:
        name = member_name(spec.uid)
        me = Address(self.runtime.host, name)
        config = ClusterConfig(frozenset(member_id(node, spec.uid) for node in spec.nodes))
        machine = QuorumMachine(queue_config(spec.name, spec.vhost, spec.arguments,
                                             created_ms=spec.created_ms))
        core = RaftCore(str(me), config, self.writer.member(name), machine, random.Random(), self.settings)
        front = QueueFront(RaftView(core), machine, spec.arguments, node=self.node_address)
        dead_letters = self.dead_letters
        dead_letter = None if dead_letters is None else (
            lambda e: dead_letters.from_member(str(me), spec.vhost, spec.name, e))
        member = QuorumMember(self.runtime, me, core, self.wal, front, name, dead_letter=dead_letter)
        self.members[spec.uid] = member
        self.by_id[str(me)] = member
        self.runtime.spawn(name, member)
        return member

    def nodes_down(self, nodes: set[str]) -> None:
        """The channels of nodes that went down are gone: every member gives back what they held.
        Each is named by its connection host's incarnation, so a restarted node's new channels
        are not taken for gone ones."""
        self._gone(lambda ch: node_of(Address.parse(ch).host) in nodes)

    def _gone(self, is_gone: Callable[[str], bool]) -> None:
        """Every member gives back what the channels `is_gone` says are gone held, each channel
        named by its connection host incarnation's prefix (actors/quorum/names.py)."""
        for member in list(self.members.values()):
            for prefix in sorted({channel_incarnation(ch) for ch in channels(member.core.state) if is_gone(ch)}):
                member.channels_gone(prefix)

    def _settled(self, member_id: str, msg_ids: list[int]) -> None:
        member = self.by_id.get(member_id)
        if member is not None:
            member.dead_letters_settled(msg_ids)

    def nodes_back(self, nodes: set[str]) -> None:
        """Nodes seen down are seen again: their channels are no longer suspect (a partition or a
        pause ended; the channels of a node that restarted are dead and never answer)."""
        for member in list(self.members.values()):
            for node in sorted(nodes):
                member.channels_back(f"{node}:")

    # -- time and inspection ---------------------------------------------------------------------
    def tick(self) -> None:
        actor = self.runtime.actor
        for member in list(self.members.values()):
            if actor(member.me.name) is not member:
                self._member_crashed(member)
            member.tick()
        if self.dead_letters is not None:
            self.dead_letters.tick()

    def _member_crashed(self, member: QuorumMember) -> None:
        log.error("quorum.member_crashed", member=str(member.me), queue=member.core.state.config.name,
                  action="host exits; its supervisor restarts it and every member recovers from the WAL")
        os._exit(1)

    def status(self, queue: str | None = None, uid: str | None = None) -> dict[str, dict]:
        return {u: m.status() for u, m in self.members.items()
                if (uid is None or u == uid) and (queue is None or m.core.state.config.name == queue)}

    def disk_usage(self) -> dict[str, Any]:
        out: dict[str, Any] = {"wal": {n: self.disk.size(f"wal/{n}") for n in self.disk.listdir("wal")}}
        for uid, member in self.members.items():
            segments = member.core.log.segments
            files = [name for name, _first, _last in segments.files]
            out[uid] = {"segments": len(files),
                        "segment_bytes": sum(self.disk.size(f"{segments.dir}/{n}") for n in files)}
        return out


def quorum_host(runtime: Any, spec: Any, registry: Any = None) -> QuorumHost:
    """`registry`: a registry replica's, which dead-lettered messages are routed with."""
    cfg = spec.config
    gc.set_threshold(*cfg.get("gc_threshold", gc_threshold))
    loop = asyncio.get_running_loop()
    disk = RealDisk(str(Path(cfg["data_dir"]) / "quorum"), cfg.get("sync_method", "fdatasync"))
    host = QuorumHost(runtime, disk, loop, cfg, registry)
    runtime.spawn(MANAGER_NAME, host)
    tick_s = cfg.get("tick_ms", tick_ms_default) / 1000
    profiler = Profiler()

    def tick() -> None:
        loop.call_later(tick_s, tick)  # first, so one member's crash cannot stop the clock
        host.tick()
    loop.call_later(tick_s, tick)

    async def control(op: str, args: dict) -> Any:
        if op == "status":
            return host.status(args.get("queue"), args.get("uid"))
        if op == "members":
            return [[s.uid, s.vhost, s.name, list(s.nodes)] for s in host.table]
        if op == "disk":
            return host.disk_usage()
        if op == "wal_stats":
            return host.wal.stats()
        if op == "flow_links":
            return flow_links(list(host.members.values()), host.wal, runtime.host, monotonic_ms())
        if op == "start_members":  # [{uid, name, nodes, vhost?, arguments?, created_ms?}, ...]
            host.start_members([MemberSpec(m["uid"], m.get("vhost", "/"), m["name"], tuple(m["nodes"]),
                                           dict(m.get("arguments", {})), m.get("created_ms", 0))
                                for m in args["members"]], args.get("leader", ""))
            return "ok"
        if op == "pid":
            return os.getpid()
        if op == "delete_member":
            host.delete_member(args["uid"])
            return "ok"
        if op == "profile":
            return profiler.toggle(args.get("path"))
        return {"error": f"unknown op {op!r}"}
    runtime.control = control
    return host
