"""The "quorum" host entry: the processes of a node that hold its quorum queue members.

With `quorum_hosts = 1` (the default) one process, "quorum", holds every member of the node and
the node's WAL: every member's appends of a loop turn go out in one write and one fdatasync
(actors/raft/wal.py). With `quorum_hosts = N > 1` the members are spread over N processes,
"quorum", "quorum1", ... "quorum{N-1}", each member on the host its queue's hash slot names
(actors/placement.py's `quorum_kind`), and the node's one WAL runs in a process of its own, "wal"
(actors/raft/wal_host.py): each host's members append as ever, and the host's `WalClient`
(actors/raft/wal_client.py) sends each loop turn's records to it as one batch and tells the members
what the WAL acknowledged (the protocol: actors/raft/wal_link.py). A host keeps its own members'
files (`members/` for host 0, `membersK/` for host K) and member table (`members.table`,
`membersK.table`). Before anything of such a host runs, it fences the WAL for its incarnation,
then recovers its members from the WAL files (read, never cut: their process owns them) and its
segments. The number of quorum hosts is written in the data dir (`quorum/layout`): members are
found by it, so a node refuses to start with another.

Members come and go at run time: the manager actor (`members`, actors/quorum/names.py) takes
`StartMember` and `DeleteMember` (actors/messages/quorum.py) and answers each with a `Reply` once it
is durable; `MemberStatus` with a member's status; `KeepMembers` (from the node once it serves)
deletes the members of queues its metadata no longer has; a `ChannelsGone` sent to it reaches every member on the node (no answer). Which members exist is the host's member table (actors/quorum/member_table.py),
made durable BEFORE a member is started and BEFORE a deleted member's files go, so a crash
at any point leaves either the old or the new set, never files without a row or a row whose files
were half deleted. The starts and deletes of one loop turn are one batch: one append to the table
and one sync, then the members start (or go) and each request is answered. Start-up (also after
kill -9): load the table, recover the WAL keeping only its
members (snapshot + segments + WAL replay, torn tails cut and logged; a deleted member's leftover
WAL records are skipped), then start every member from what was recovered.

A new queue's first leader. The member on the node the leader locator chose (`StartMember.leader`)
stands for election as soon as it starts (as RabbitMQ triggers an election on a new quorum queue's
first member), not at an election timeout: the node that declares the queue starts it after the
others, so they are there to vote. Its `StartMember` is answered once a leader serves (this member,
once it has applied an entry of its term, or another that won), or after the longest election
timeout, so the declaring node asks a leader for the queue's declare-ok without polling an
election.

A member whose `receive` raised is removed by the runtime (actors/runtime/mailbox.py), yet the
host still holds it, ticks it and hands it WAL notices: a member half there, deaf to its peers and
channels, for good. The host checks the members it ticks (a member that received anything is
awake) and, finding one, exits (as a host whose loop crashed does): its supervisor starts it again
and every member recovers from the WAL, the one recovery path that kill -9 exercises.

Time: one ticker per host calls the `tick` of every member that is awake each `tick_ms`: a
member whose group is quiet (raft/quiescence.py) and which waits for nothing sleeps, and its next
input wakes it (actors/quorum/member.py), so idle queues cost no CPU however many there are. A
node that goes down wakes the members with a peer on it, and those it led stand for election
(liveness instead of the heartbeats a quiet group does not send). A 250 ms tick with heartbeats
every 2 ticks (500 ms) and elections after 8-16 ticks (2-4 s) for the groups that are busy, and
a dead leader replaced within seconds (tests use faster settings).

Config (HostSpec.config): node, data_dir, and optionally quorum_hosts (1) and quorum_index (0:
which of them this is), tick_ms, sync_method,
wal_max_size_bytes (512 MiB), segment_max_entries (4096), settings (RaftSettings fields), node_address
(where x-expires deletions go), gc_threshold, machine_version (the newest quorum queue machine
version its members run, 1 unless set: actors/quorum/machine.py). Control ops: "status" (args:
queue or uid, optional) -> per member role/term/leader/indexes/counts/machine version; "members"; "disk" -> per member segment files and
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
from actors.stats.deltas import Changes
from actors.quorum.dead_letter_shell import DeadLetterActor
from actors.quorum.config import queue_config
from actors.placement import WAL_KIND, host_of, node_of
from actors.quorum.front import QueueFront, RaftView, channels
from actors.quorum.machine import QuorumMachine
from actors.quorum.flow_links import flow_links
from actors.quorum.member import QuorumMember, monotonic_ms
from actors.quorum.member_table import MemberSpec, MemberTable
from actors.quorum.names import MANAGER_NAME, channel_incarnation, member_id, member_name
from actors.raft.hosts import Profiler, gc_threshold
from actors.quorum import names
from actors.raft.wal import WalActor
from actors.raft.wal_client import WalClient, fence
from actors.raft.wal_host import WAL_NAME, fence_endpoint
from actors.raft.wal_link import LinkCore
from actors.runtime.address import Address
from persist.disk import Disk, RealDisk, write_atomic
from persist.wal.writer import SEGMENT_MAX_ENTRIES, WAL_MAX_SIZE_BYTES, WalWriter
from raft.config import ClusterConfig, RaftSettings
from raft.core import RaftCore

log = structlog.get_logger("warren.quorum.host")

LAYOUT_PATH = "layout"
tick_ms_default = 250
settings_default = {"election_ticks": 8, "heartbeat_ticks": 2, "max_inflight": 4,
                    "max_batch_entries": 1024, "max_batch_bytes": 1 << 20, "append_per_turn": True,
                    "snapshot_interval": 0, "quiesce": True}


class QuorumHost:
    """The node's quorum members, their WAL, their ticker; the manager actor is this object."""

    def __init__(self, runtime: Any, disk: Disk, loop: asyncio.AbstractEventLoop, cfg: dict,
                 registry: Any = None, incarnation: int = 0, link: LinkCore | None = None,
                 roll: int = 0) -> None:
        """`link`: this host's side of the link to the node's WAL process (None: the WAL is this
        process's own); `roll`: a rollover of that WAL to do once recovered (its first file)."""
        self.runtime = runtime
        self.node = cfg["node"]
        self.disk = disk
        self.settings = RaftSettings(**{**settings_default, **cfg.get("settings", {})})
        self.machine_version = cfg.get("machine_version", 1)
        node_address = cfg.get("node_address")
        self.node_address = Address.parse(node_address) if node_address else None
        self._loop = loop
        index = cfg.get("quorum_index", 0)
        suffix = str(index) if index else ""
        self.table = MemberTable(disk, f"members{suffix}.table")
        specs = self.table.load()
        keys = {member_name(spec.uid) for spec in specs}
        self.writer = WalWriter(disk, cfg.get("wal_max_size_bytes", WAL_MAX_SIZE_BYTES),
                                cfg.get("segment_max_entries", SEGMENT_MAX_ENTRIES),
                                members_dir=f"members{suffix}", own_files=link is None)
        self.writer.recover(keep=keys.__contains__)
        if link is None:
            self.wal: WalActor = WalActor(self.writer, loop, runtime.send_queued)
        else:
            me = Address(runtime.host, names.WAL_CLIENT_NAME)
            wal_host = host_of(node_of(runtime.host), WAL_KIND)
            self.wal = WalClient(self.writer, loop, runtime, me, Address(wal_host, WAL_NAME), link)
            runtime.spawn(me.name, self.wal)
        self.members: dict[str, QuorumMember] = {}
        self.by_id: dict[str, QuorumMember] = {}  # by member id (where dead-letter settlements go)
        self.awake: dict[str, QuorumMember] = {}  # by actor name: the members the ticker ticks
        self.by_queue: dict[tuple[str, str], QuorumMember] = {}  # by (vhost, name)
        self.changes = Changes(os.urandom(6).hex())  # the members that had inputs (actors/stats/deltas.py)
        # without a registry (the quorum-only test launchers) dead-lettered messages are dropped
        self.dead_letters = None if registry is None else DeadLetterActor(runtime, registry, self._settled, incarnation)
        if self.dead_letters is not None:
            runtime.spawn(self.dead_letters.name, self.dead_letters)
        self._batch: list[tuple[Address, Any]] = []  # StartMember and DeleteMember taken this turn
        self._until_led: dict[str, tuple[int, list[tuple[Address, int]]]] = {}  # uid -> (deadline tick, waiting)
        self._ticks = 0
        for spec in specs:
            self._start(spec)
        if roll and isinstance(self.wal, WalClient):
            self.wal.roll(link.wal_epoch, roll)
        log.info("quorum.host_started", host=runtime.host, members=len(self.members),
                 wal="own" if link is None else "wal process")

    # -- the manager's messages ----------------------------------------------------------------
    def receive(self, sender: Address, msg: Any) -> None:
        kind = type(msg)
        if kind is StartMember or kind is DeleteMember:
            if not self._batch:
                self._loop.call_soon(self._run_batch)
            self._batch.append((sender, msg))
        elif kind is MemberStatus:  # uid "": every member's, by uid
            member = self.members.get(msg.uid)
            status = self.status() if not msg.uid else member.status() if member is not None else None
            self._reply(sender, msg.rid, status)
        elif kind is KeepMembers:
            self.keep_members(set(msg.uids))
        elif kind is ChannelsGone:  # every member here gives back what those channels held
            for member in self.members.values():
                member.channels_gone(msg.prefix)
        elif kind is HostChannelsGone:
            current = f"{msg.host}/ch:{msg.current}."
            self._gone(lambda ch: Address.parse(ch).host == msg.host and not ch.startswith(current), dead=True)
        else:
            log.warning("quorum.manager_unexpected", kind=kind.__name__, sender=str(sender))

    def _reply(self, to: Address, rid: int, value: Any = None) -> None:
        self.runtime.send(to, Reply(rid, value), sender=Address(self.runtime.host, MANAGER_NAME))

    def _run_batch(self) -> None:
        """This turn's starts and deletes, in arrival order, each run of one kind as one table
        write (see the module docstring), then their answers."""
        batch, self._batch = self._batch, []
        i = 0
        while i < len(batch):
            kind, j = type(batch[i][1]), i + 1
            while j < len(batch) and type(batch[j][1]) is kind:
                j += 1
            if kind is StartMember:
                self._start_batch(batch[i:j])
            else:
                self.delete_members([msg.uid for _, msg in batch[i:j]])
                for sender, msg in batch[i:j]:
                    self._reply(sender, msg.rid)
            i = j

    def _start_batch(self, requests: list[tuple[Address, StartMember]]) -> None:
        specs = [MemberSpec(m.uid, m.vhost, m.name, tuple(m.nodes), dict(m.arguments), m.created_ms)
                 for _, m in requests]
        leading = {m.uid for _, m in requests if m.leader == self.node}
        campaigning = set(self.start_members(specs, leading))
        for sender, msg in requests:
            member = self.members.get(msg.uid)
            if msg.uid in campaigning and msg.rid and member is not None and member.core.leader_id is None:
                deadline = self._ticks + 2 * self.settings.election_ticks  # the longest election timeout
                self._until_led.setdefault(msg.uid, (deadline, []))[1].append((sender, msg.rid))
            else:
                self._reply(sender, msg.rid)

    def start_members(self, specs: list[MemberSpec], leading: set[str] = frozenset()) -> list[str]:
        """Durably add the members to the table (one write), then start them (idempotent by uid);
        a new member of a queue in `leading` stands for election at once. The uids that did."""
        new = list({spec.uid: spec for spec in specs if spec.uid not in self.members}.values())
        if not new:
            return []
        self.table.add(new)
        campaigning = []
        for spec in new:
            member = self._start(spec)
            if spec.uid in leading and member.core.log.last_index_term()[0] == 0:
                member.campaign_now()
                campaigning.append(spec.uid)
        return campaigning

    def _led(self, uid: str, leader: str) -> None:
        """A member's group has a leader that serves: a declare waiting for it goes on."""
        self._release(uid)

    def _release(self, uid: str) -> None:
        for to, rid in self._until_led.pop(uid, (0, []))[1]:
            self._reply(to, rid)

    def delete_member(self, uid: str) -> None:
        self.delete_members([uid])

    def delete_members(self, uids: list[str]) -> None:
        """Stop the members, durably drop them from the table (one write), then delete their files.
        A uid held by no member is no error: every member node deletes its own member as it applies
        the queue's deletion, besides the deleting node's call (actors/node/quorum_queues.py)."""
        held = {uid for uid in uids if uid in self.members or uid in self.table.rows}
        for uid in uids:
            member = self.members.pop(uid, None)
            if member is not None:
                self.by_id.pop(str(member.me), None)
                if self.dead_letters is not None:
                    self.dead_letters.worker.forget(str(member.me))
                member.stop()
                self.awake.pop(member.me.name, None)
                key = (member.core.state.config.vhost, member.core.state.config.name)
                if self.by_queue.get(key) is member:
                    del self.by_queue[key]
                    self.changes.drop(key, monotonic_ms())
                self.runtime.remove(member.me.name)
            self._release(uid)  # a declare still waiting for it is answered (its queue is gone)
        listed = list(dict.fromkeys(uid for uid in uids if uid in self.table.rows))
        if listed:
            self.table.remove(listed)
        for uid in uids:
            self.writer.forget(member_name(uid))
            if uid in held:
                log.info("quorum.member_deleted", uid=uid)

    def keep_members(self, uids: set[str]) -> None:
        """Delete every member of a queue not in `uids` (the node's metadata: a queue deleted
        while this node was down leaves its member here)."""
        orphans = [spec for spec in self.table.rows.values() if spec.uid not in uids]
        for spec in orphans:
            log.info("quorum.orphan_member", uid=spec.uid, vhost=spec.vhost, queue=spec.name)
        if orphans:
            self.delete_members([spec.uid for spec in orphans])

    def _start(self, spec: MemberSpec) -> QuorumMember:
        name = member_name(spec.uid)
        me = Address(self.runtime.host, name)
        config = ClusterConfig(frozenset(member_id(node, spec.uid) for node in spec.nodes))
        machine = QuorumMachine(queue_config(spec.name, spec.vhost, spec.arguments,
                                             created_ms=spec.created_ms), self.machine_version)
        core = RaftCore(str(me), config, self.writer.member(name), machine, random.Random(), self.settings)
        front = QueueFront(RaftView(core), machine, spec.arguments, node=self.node_address)
        dead_letters = self.dead_letters
        dead_letter = None if dead_letters is None else (
            lambda e: dead_letters.from_member(str(me), spec.vhost, spec.name, e))
        member = QuorumMember(self.runtime, me, core, self.wal, front, name, dead_letter=dead_letter,
                              on_leader=lambda leader: self._led(spec.uid, leader))
        member.on_wake = self._wake
        key, changes = (spec.vhost, spec.name), self.changes
        member.on_input = lambda: changes.touch(key, monotonic_ms())
        member.on_input()
        self.by_queue[key] = member
        self.members[spec.uid] = member
        self.by_id[str(me)] = member
        self.awake[name] = member
        self.runtime.spawn(name, member)
        return member

    def _wake(self, member: QuorumMember) -> None:
        self.awake[member.me.name] = member

    def nodes_down(self, nodes: set[str]) -> None:
        """The channels of nodes that went down are gone: every member gives back what they held.
        Each is named by its connection host's incarnation, so a restarted node's new channels
        are not taken for gone ones. Every member with a peer on those nodes wakes, and one whose
        leader was there stands for election (the module docstring)."""
        self._gone(lambda ch: node_of(Address.parse(ch).host) in nodes)
        for member in list(self.members.values()):
            core = member.core
            if any(node_of(Address.parse(m).host) in nodes for m in core.config.members() if m != core.id):
                member.peers_down(core.leader_id is not None and node_of(Address.parse(core.leader_id).host) in nodes)

    def _gone(self, is_gone: Callable[[str], bool], dead: bool = False) -> None:
        """Every member gives back what the channels `is_gone` says are gone held, each channel
        named by its connection host incarnation's prefix (actors/quorum/names.py). `dead`: they
        are gone for good (their host restarted), publishers' sequences too; else only out of
        reach, maybe (their node was seen down)."""
        for member in list(self.members.values()):
            for prefix in sorted({channel_incarnation(ch) for ch in channels(member.core.state) if is_gone(ch)}):
                member.channels_gone(prefix, dead)

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
        self._ticks += 1
        for name, member in list(self.awake.items()):
            if actor(name) is not member:
                self._member_crashed(member)
            member.tick()
            if member.sleepy():
                member.asleep = True
                del self.awake[name]
        if self.dead_letters is not None:
            self.dead_letters.tick()
        for uid in [uid for uid, (deadline, _) in self._until_led.items() if deadline <= self._ticks]:
            self._release(uid)  # no leader yet: the declaring node polls for one (quorum_queues.py)

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


def check_layout(disk: Disk, quorum_hosts: int, index: int) -> None:
    """The data dir's quorum members were placed over this many quorum hosts (written by host 0
    the first time): with another number they would not be found, so the host refuses to start."""
    if disk.exists(LAYOUT_PATH):
        written = int(disk.read(LAYOUT_PATH).decode().split("=")[1])
        if written != quorum_hosts:
            raise RuntimeError(f"this data dir's quorum queue members are placed over {written} quorum hosts; "
                               f"quorum_hosts = {quorum_hosts} would not find them")
        return
    if index == 0:
        write_atomic(disk, LAYOUT_PATH, f"quorum_hosts={quorum_hosts}\n".encode())


def quorum_host(runtime: Any, spec: Any, registry: Any = None, incarnation: int = 0) -> QuorumHost:
    """`registry`: a registry replica's, which dead-lettered messages are routed with; `incarnation`:
    that replica's (this process's), which names the dead-letter worker."""
    cfg = spec.config
    gc.set_threshold(*cfg.get("gc_threshold", gc_threshold))
    loop = asyncio.get_running_loop()
    quorum_hosts = cfg.get("quorum_hosts", 1)
    names.configure(quorum_hosts)
    disk = RealDisk(str(Path(cfg["data_dir"]) / "quorum"), cfg.get("sync_method", "fdatasync"))
    check_layout(disk, quorum_hosts, cfg.get("quorum_index", 0))
    link, roll = None, 0
    if quorum_hosts > 1:
        host_epoch = int.from_bytes(os.urandom(7), "big")
        wal_host = host_of(cfg["node"], WAL_KIND)
        wal_epoch, roll = fence(fence_endpoint(runtime.directory[wal_host]), runtime.host, host_epoch)
        link = LinkCore(runtime.host, host_epoch, wal_epoch)
    host = QuorumHost(runtime, disk, loop, cfg, registry, incarnation, link, roll)
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
            return [[s.uid, s.vhost, s.name, list(s.nodes)] for s in host.table.rows.values()]
        if op == "disk":
            return host.disk_usage()
        if op == "wal_stats":
            return host.wal.stats()
        if op == "flow_links":
            if link is None:
                return flow_links(list(host.members.values()), host.wal, runtime.host, monotonic_ms())
            return flow_links(list(host.members.values()), host.wal, runtime.host, monotonic_ms(),
                              "batches in flight to the node's WAL", (str(host.wal.wal_address),))
        if op == "start_members":  # [{uid, name, nodes, vhost?, arguments?, created_ms?}, ...]
            host.start_members([MemberSpec(m["uid"], m.get("vhost", "/"), m["name"], tuple(m["nodes"]),
                                           dict(m.get("arguments", {})), m.get("created_ms", 0))
                                for m in args["members"]],
                               {m["uid"] for m in args["members"]} if args.get("leader") == host.node else set())
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
