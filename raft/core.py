"""RaftCore: one member of a Raft group as a pure state machine (the shape of Ra's ra_server).

Theory of operation. The core holds the volatile Raft state (role, leader, commit and applied
indexes, votes, per-follower progress) and drives a `Log` and a `Machine`. Its inputs are
`tick()` (logical time), `step(msg)` (a peer's message), `propose(command, corr)` and
`propose_batch([(command, corr), ...])` (client commands), `replicate()` (the end of a shell
loop turn, see replication.py), `written(upto)` (the WAL made the log durable up to an index),
`snapshot_written(index, term)`, and the admin calls `add_member`, `remove_member`,
`transfer_leadership`. Each returns the list of effects (Raft's own, raft/effects.py) the shell
carries out in order. Randomness (election timeout jitter) comes only from the injected `random.Random`;
nothing here reads a clock or does IO.

The parts live in mixins named for what they hold: election.py (pre-vote, votes, check-quorum,
leadership transfer), replication.py (AppendEntries, heartbeats, acks, commit), snapshot.py
(taking, streaming and installing snapshots), membership.py (one-at-a-time changes),
quiescence.py (an idle group that sends nothing and needs no ticks) and versions.py (the switch
of the machine to a new version at one index on every member, and a member that cannot run it).

Invariants the core asserts or keeps:
- term and vote are persisted (PersistHardState) before any message that depends on them.
- a follower acks only entries that are written and verified to match the leader's log.
- a leader counts itself in a majority only up to its own written index, and commits by
  counting only entries of its current term (§5.4.2).
- the log is never truncated at or below the commit index; applied <= commit <= last index.
- configuration = the latest config entry in the log, committed or not (dissertation §4.1).

Ordering rules of the effects (etcd's `Ready` contract, written down here because this is where they live):
- `PersistHardState` must be durable before any `ToPeer` after it (in this list or a later one)
  goes out: a vote or a term must never be forgotten after someone has acted on it. With the hard
  state a WAL record (persist/wal/member_log.py) the driver holds those ToPeers until the WAL flush that
  carries it has synced.
- `VersionSwitched` and `MachineHalted` come where the entry that caused them is applied,
  after the effects of the entries before it.
- `ClientReply` for a command comes before the `MachineEffect`s its apply returned, so an answer
  (a consume-ok) reaches its client before what the command caused (the first deliveries).
- `WriteSnapshot` is written durably with `log.install_snapshot(index, term, data)`, then the
  shell calls `core.snapshot_written(index, term)`; the core compacts, or (follower) restores
  and acks the leader only then. Snapshot only what is durable: a snapshot of entries the log
  holds (`log.term_at(index) == term`) waits until `log.written_index() >= index`.
- Log appends are not effects: the core calls `log.append` directly, the WAL writes them in the
  background and the shell reports `core.written(upto)`; acks wait for that.

Deliberately left out: joint consensus, read-index/lease reads, snapshot transfer of live
entries below the snapshot index (the receiver gets the machine state only).
"""
from __future__ import annotations

from typing import Any, Hashable, Protocol

from raft.effects import ClientReply, Effect, LeaderChanged, MachineEffect, PersistHardState, ToPeer
from raft import commands
from raft.config import ClusterConfig, RaftSettings
from raft.election import ElectionMixin
from raft.log import Entry, Log
from raft.machine import ApplyMeta, Machine, replayed_effects
from raft.membership import MembershipMixin
from raft.messages import (AppendEntries, AppendReply, Heartbeat, HeartbeatReply,
                                   InstallSnapshot, InstallSnapshotReply, Message, PreVote,
                                   PreVoteReply, RequestVote, RequestVoteReply, TimeoutNow)
from raft.progress import Progress
from raft.quiescence import QuiescenceMixin
from raft.replication import ReplicationMixin
from raft.roles import CANDIDATE, FOLLOWER, LEADER, PRE_CANDIDATE
from raft.snapshot import SnapshotMixin, decode_snapshot
from raft.versions import BASE_VERSION, VersionMixin, supported_version

__all__ = ["RaftCore", "FOLLOWER", "PRE_CANDIDATE", "CANDIDATE", "LEADER"]


class Rng(Protocol):
    """What the core needs of the injected `random.Random` (cores never import random)."""

    def randrange(self, stop: int) -> int: ...


class RaftCore(ElectionMixin, ReplicationMixin, SnapshotMixin, MembershipMixin, QuiescenceMixin, VersionMixin):
    def __init__(self, id: str, config: ClusterConfig, log: Log, machine: Machine,
                 rng: Rng, settings: RaftSettings = RaftSettings()) -> None:
        self.id = id
        self.log = log
        self.machine = machine
        self.rng = rng
        self.settings = settings
        self.term, self.voted_for = log.hard_state()
        self.role = FOLLOWER
        self.leader_id: str | None = None
        self.election_elapsed = 0
        self.heartbeat_elapsed = 0
        self.quiet = False  # quiescence.py: nothing to do until something arrives
        self.timeout = 0
        self.reset_timeout()
        self.votes: set[str] = set()
        self.progress: dict[str, Progress] = {}
        self.pending: dict[int, tuple[int, Hashable]] = {}  # leader: index -> (term, corr)
        self.append_due = False  # leader, append_per_turn: followers await replicate()
        self.verified = 0      # follower: highest index known to match this term's leader
        self.acked = 0         # follower: highest index acked to this term's leader
        self.transferee: str | None = None
        self.transfer_elapsed = 0
        self.transfer_sent = False
        self.snapshot_pending: tuple[int, int, int] | None = None  # (index, term, lowest live)
        self.snap_rx: list | None = None  # follower: [index, term, bytearray, complete]
        self.configs: list[tuple[int, ClusterConfig]] = [(0, config)]
        self.supported = supported_version(machine)  # what this member's code runs (versions.py)
        self.machine_version = BASE_VERSION  # the version of the entry at `applied`
        self.versions: list[tuple[int, int]] = [(0, BASE_VERSION)]
        self.halted: int | None = None  # the index applying stopped before (versions.py)
        self.unsaid: list[Effect] = []  # what the constructor found, said at the first tick
        self.state: Any = machine.init()
        self.commit = self.applied = self.snapshot_index = 0
        meta = log.snapshot_meta()
        if meta is not None:
            data = log.snapshot_data()
            assert data is not None
            cfg, version, value = decode_snapshot(data)
            self.configs = [(meta[0], cfg)]
            self.versions = [(meta[0], version)]
            self.commit = self.applied = self.snapshot_index = meta[0]
            if version > self.supported:
                self.halt(meta[0] + 1, f"the snapshot at index {meta[0]} holds machine version {version}; "
                                       f"this member runs versions up to {self.supported}", self.unsaid)
            else:
                self.state, self.machine_version = machine.restore(value), version
        last, _ = log.last_index_term()
        # what the log held at start: applied again, a leader may have carried out its effects
        # before the restart (machine.replayed_effects); lowered where the log is cut
        self.replay_upto = last
        lo = self.snapshot_index + 1
        while lo <= last:  # in slices: a long log (a quorum queue's backlog) is not read whole
            chunk = log.entries(lo, last + 1, settings.max_batch_bytes)
            for e in chunk:
                if e.command[0] != commands.USER:
                    self.note_entry(e)
            lo = chunk[-1].index + 1

    # -- public API ---------------------------------------------------------------------------
    @property
    def config(self) -> ClusterConfig:
        return self.configs[-1][1]

    def tick(self) -> list[Effect]:
        out: list[Effect] = []
        if self.unsaid:
            out, self.unsaid = self.unsaid, []
        if self.quiet:
            return out
        if self.role == LEADER:
            self.tick_leader(out)
        else:
            self.tick_election(out)
        return out

    def written(self, upto: int) -> list[Effect]:
        """The WAL says the log is durable up to `upto` (Ra's written event)."""
        out: list[Effect] = []
        self.log.set_written(upto)
        if self.role == LEADER:
            self.maybe_commit(out)
        elif self.role == FOLLOWER:
            self.ack(out)
        return out

    # -- role changes -------------------------------------------------------------------------
    def reset_timeout(self) -> None:
        n = self.settings.election_ticks
        self.timeout = n + self.rng.randrange(n)

    def set_leader(self, leader: str | None, out: list[Effect]) -> None:
        if leader != self.leader_id:
            self.leader_id = leader
            out.append(LeaderChanged(leader))

    def become_follower(self, term: int, leader: str | None, out: list[Effect]) -> None:
        if term != self.term:
            self.term, self.voted_for = term, None
            self.verified = self.acked = 0
            self.snap_rx = None
            out.append(PersistHardState(term, None))
        self.role = FOLLOWER
        self.set_leader(leader, out)
        self.election_elapsed = 0
        self.reset_timeout()
        self.progress = {}
        self.pending = {}
        self.transferee = None

    def become_leader(self, out: list[Effect]) -> None:
        self.role = LEADER
        self.set_leader(self.id, out)
        self.election_elapsed = self.heartbeat_elapsed = 0
        last, _ = self.log.last_index_term()
        self.progress = {m: Progress(next=last + 1) for m in self.config.members() if m != self.id}
        self.pending = {}
        self.transferee = None
        self.append_local(commands.NOOP_COMMAND)
        self.broadcast_append(out)
        self.maybe_commit(out)
        self.maybe_switch_version(out)  # a group of one has nobody to wait for

    # -- log helpers --------------------------------------------------------------------------
    def append_local(self, command: bytes) -> int:
        last, _ = self.log.last_index_term()
        entry = Entry(last + 1, self.term, command)
        self.log.append([entry])
        if command[0] != commands.USER:
            self.note_entry(entry)
        return entry.index

    def note_entry(self, entry: Entry) -> None:
        """An entry that is not a user command is in the log: a configuration is in force from
        here on; a version switch is remembered (it takes effect when applied)."""
        kind = entry.command[0]
        if kind == commands.CONFIG:
            self.configs.append((entry.index, commands.config_of(entry.command)))
            self.config_changed()
        elif kind == commands.VERSION:
            self.note_version(entry)

    def truncate_from(self, index: int) -> None:
        assert index > self.commit, f"{self.id}: truncate at {index} <= commit {self.commit}"
        self.log.truncate_from(index)
        self.replay_upto = min(self.replay_upto, index - 1)
        while len(self.configs) > 1 and self.configs[-1][0] >= index:
            self.configs.pop()
        while len(self.versions) > 1 and self.versions[-1][0] >= index:
            self.versions.pop()

    def config_at(self, index: int) -> ClusterConfig:
        return [cfg for i, cfg in self.configs if i <= index][-1]

    # -- commit and apply ---------------------------------------------------------------------
    def advance_commit(self, index: int, out: list[Effect]) -> None:
        last, _ = self.log.last_index_term()
        index = min(index, last)
        if index <= self.commit:
            return
        self.commit = index
        if self.role == LEADER and self.settings.notify_commit:
            for peer in sorted(self.progress):
                self.tell_commit(peer, out)
        self.apply(out)

    def apply(self, out: list[Effect]) -> None:
        # the hot path: user commands are inlined (a leader applies tens of thousands a second)
        pop, machine_apply, user = self.pending.pop, self.machine.apply, commands.USER
        leader = self.role == LEADER
        while self.applied < self.commit and self.halted is None:
            batch = self.log.entries(self.applied + 1, self.commit + 1,
                                     self.settings.max_batch_bytes)
            version = self.machine_version
            for e in batch:
                command = e.command
                if command[0] == user:
                    waiting = pop(e.index, None)
                    self.state, reply, effects = machine_apply(ApplyMeta(e.index, e.term, version),
                                                               command[1:], self.state)
                    if waiting is not None and waiting[0] == e.term:  # same entry (§5.3)
                        out.append(ClientReply(waiting[1], reply))
                    if effects and leader:
                        if e.index <= self.replay_upto:
                            effects = replayed_effects(self.machine, effects)
                        out.extend([MachineEffect(x) for x in effects])
                else:
                    self.apply_entry(e, out)
                    if self.halted is not None:
                        break  # not applied: it stays above `applied` (versions.py)
                    version, leader = self.machine_version, self.role == LEADER
                self.applied = e.index
        assert self.applied <= self.commit
        if self.role == LEADER:
            self.after_commit_leader(out)
        self.maybe_snapshot(out)

    def apply_entry(self, e: Entry, out: list[Effect]) -> None:
        waiting = self.pending.pop(e.index, None)
        mine = waiting is not None and waiting[0] == e.term  # same index, same entry (§5.3)
        kind = commands.kind(e.command)
        if kind == commands.USER:
            self.state, reply, effects = self.machine.apply(
                ApplyMeta(e.index, e.term, self.machine_version), commands.payload(e.command), self.state)
            if mine:
                out.append(ClientReply(waiting[1], reply))
            if self.role == LEADER:
                if e.index <= self.replay_upto:
                    effects = replayed_effects(self.machine, effects)
                out.extend(MachineEffect(x) for x in effects)
        elif kind == commands.CONFIG and mine:
            out.append(ClientReply(waiting[1], "ok"))
        elif kind == commands.VERSION:
            self.apply_version(e, out)

    # -- messages -----------------------------------------------------------------------------
    def step(self, msg: Message) -> list[Effect]:
        """Handle a message from a peer (Raft §5.1: a higher term turns anyone into a follower;
        a lower-term message is answered with our term or dropped)."""
        out: list[Effect] = []
        if self.quiet:
            self.wake_up()
        if msg.term > self.term:
            if isinstance(msg, (PreVote, RequestVote)) and not getattr(msg, "transfer", False) \
                    and msg.src != self.leader_id and self.in_lease():
                # a leader is alive: do not let a partitioned member disrupt it (a request from the
                # leader itself says it no longer leads: it restarted, quiescence.py)
                return out
            if not isinstance(msg, PreVote) and not (isinstance(msg, PreVoteReply) and msg.granted):
                leader = msg.src if isinstance(msg, LEADER_MESSAGES) else None
                self.become_follower(msg.term, leader, out)
        elif msg.term < self.term:
            if isinstance(msg, LEADER_MESSAGES):
                # a stale leader learns our term from this and steps down
                out.append(ToPeer(msg.src, AppendReply(self.term, self.id, False, 0,
                                                       machine_version=self.supported)))
            elif isinstance(msg, PreVote):
                out.append(ToPeer(msg.src, PreVoteReply(self.term, self.id, False)))
            return out
        handler = self.HANDLERS.get((type(msg), self.role == LEADER))
        if handler is not None:
            handler(self, msg, out)
        return out

    HANDLERS = {
        (PreVote, False): ElectionMixin.on_prevote,
        (PreVote, True): ElectionMixin.on_prevote,
        (PreVoteReply, False): ElectionMixin.on_prevote_reply,
        (RequestVote, False): ElectionMixin.on_vote,
        (RequestVote, True): ElectionMixin.on_vote,
        (RequestVoteReply, False): ElectionMixin.on_vote_reply,
        (TimeoutNow, False): ElectionMixin.on_timeout_now,
        (AppendEntries, False): ReplicationMixin.on_append,
        (Heartbeat, False): ReplicationMixin.on_heartbeat,
        (InstallSnapshot, False): SnapshotMixin.on_install_snapshot,
        (AppendReply, True): ReplicationMixin.on_append_reply,
        (HeartbeatReply, True): ReplicationMixin.on_heartbeat_reply,
        (InstallSnapshotReply, True): SnapshotMixin.on_snapshot_reply,
    }


LEADER_MESSAGES = (AppendEntries, Heartbeat, InstallSnapshot)
