"""The deterministic simulator (TigerBeetle VOPR style): real RaftCores, fake everything else.

One seed drives one `random.Random`, from which come the network's delays, losses, duplicates
and partitions, the simulated WAL's flush schedule, crashes and restarts, client proposals and
every core's own election jitter. Each node has its own storage (storage.py): by default the real
WAL writer and MemberLogs over a SimDisk (`log="wal"`), or the MemoryLog model (`log="memory"`).

The WAL actor, simulated: when a batch is pending it flushes after a seeded delay (one append and
one sync; a rollover into segment files when the WAL is full), then each member gets
`written(upto)` after a further seeded mailbox delay, in order, exactly as the real shell will
deliver it. A crash (between ticks, or armed to hit the disk's next few sync points, i.e. inside a
flush, a rollover, a hard-state or snapshot write) discards the core, the writer and every
undelivered notification, and the disk loses what was not synced, sometimes keeping a torn tail.
A restart recovers the log from the disk and builds a new core over it; the checker then compares
the recovered log with what the old one had promised (DurableView). A snapshot of entries the
log holds is written only once the WAL has written them (`defer_snapshots`, see SimOptions). In
`wal` mode a PersistHardState is a WAL record, durable with the next flush, so every Send after it
is held until that flush has synced (the member shell's rule); in `memory` mode it is durable at
once. With `append_per_turn` (half the seeds) leaders send AppendEntries only from `replicate()`,
which the simulator calls after every input, as the shell does once per loop turn; client commands
arrive one at a time or as a `propose_batch`.

The safety phase runs `steps` ticks with faults; the liveness phase heals the network, restarts
every member (and any that an armed crash still stops), stops the faults and demands a leader
that commits a fresh command and every member applying it within `liveness_ticks`. Effects are
carried out in list order, as a real shell would.
"""
from __future__ import annotations

import random
import traceback
from dataclasses import dataclass, field, replace
from typing import Callable

from raft import ClusterConfig, RaftCore, RaftSettings
from raft.driver import RaftDriver
from raft.roles import LEADER
from tests.sim import kvmachine
from tests.sim.checkers import Checker
from tests.sim.network import NetFaults, SimNetwork
from tests.sim.simdisk import SimCrash, SimDisk
from tests.sim.storage import DurableView, MemoryStorage, Storage, StorageLog, WalStorage

SETTINGS = RaftSettings(election_ticks=10, heartbeat_ticks=2, max_inflight=4, max_batch_entries=8,
                        max_batch_bytes=512, snapshot_interval=25, snapshot_chunk_bytes=96,
                        transfer_timeout_ticks=10)


@dataclass
class SimOptions:
    nodes: int = 3
    steps: int = 1500
    liveness_ticks: int = 600
    propose_rate: float = 0.3
    crash_rate: float = 0.004
    restart_rate: float = 0.05
    partition_rate: float = 0.01
    heal_rate: float = 0.05
    transfer_rate: float = 0.002
    max_fsync_ticks: int = 3
    max_notify_ticks: int = 2           # WAL -> member mailbox delay of a written notification
    sync_crash_rate: float = 0.004      # arm a crash at one of the disk's next few sync points
    torn_rate: float = 0.5              # a crash keeps a torn prefix of the last unsynced append
    log: str = "wal"                    # "wal" (WalWriter over SimDisk) or "memory" (MemoryLog)
    # Write a snapshot of entries this log holds only once the WAL has written them: the member
    # shell's rule (actors/raft/member.py). `--no-defer-snapshots` breaks it on purpose, to check
    # that recovery copes when a disk loses entries under a snapshot (test_regressions.py).
    defer_snapshots: bool = True
    append_per_turn: bool | None = None  # None: seeds with seed // 2 odd
    wal_max_size_bytes: tuple[int, ...] = (600, 2000, 8000)   # each node picks one
    segment_max_entries: tuple[int, ...] = (3, 16, 64)        # each node picks one
    roll_step_bytes: tuple[int, ...] = (48, 400, 1 << 23)    # a rollover's segment bytes per flush
    faults: NetFaults = field(default_factory=NetFaults)


@dataclass
class Node:
    id: str
    storage: Storage
    log: StorageLog | None = None
    core: RaftCore | None = None
    sync_at: int | None = None
    notices: list[tuple[int, int]] = field(default_factory=list)  # (due tick, written upto)
    promised: DurableView | None = None   # what the log had promised when the node crashed
    driver: RaftDriver | None = None      # the member shell's effect driver (raft/driver.py)
    after_flush: list[Callable[[], None]] = field(default_factory=list)  # the driver's WAL hooks


class Simulation:
    base_settings = SETTINGS  # the cores' settings (append_per_turn is chosen per seed)

    def __init__(self, seed: int, options: SimOptions = SimOptions(),
                 core_class: Callable[..., RaftCore] = RaftCore,
                 disk_class: type[SimDisk] = SimDisk) -> None:
        self.seed = seed
        self.options = options
        self.core_class = core_class
        self.disk_class = disk_class
        self.rng = random.Random(seed)
        self.net = SimNetwork(self.rng, NetFaults(**vars(options.faults)))
        self.checker = Checker()
        ids = [f"n{i + 1}" for i in range(options.nodes)]
        self.config = ClusterConfig(frozenset(ids))
        per_turn = options.append_per_turn
        if per_turn is None:
            per_turn = seed // 2 % 2 == 1
        self.settings = replace(self.base_settings, append_per_turn=per_turn)
        self.nodes = {i: Node(i, self.new_storage(i)) for i in ids}
        self.crashes = 0
        self.now = 0
        self.next_op = 0
        self.leader_hint: str | None = None
        for node in self.nodes.values():
            self.start(node)

    # -- the world ----------------------------------------------------------------------------
    def new_storage(self, node_id: str) -> Storage:
        o = self.options
        if o.log == "memory":
            return MemoryStorage(node_id)
        assert o.log == "wal", f"unknown log mode {o.log!r}"
        return WalStorage(node_id, self.rng, self.rng.choice(o.wal_max_size_bytes),
                          self.rng.choice(o.segment_max_entries), self.disk_class,
                          self.rng.choice(o.roll_step_bytes))

    def start(self, node: Node) -> None:
        """Start or restart: recover the log from the disk, check it kept its promises, build the
        member on it."""
        try:
            node.log = node.storage.open()
        except SimCrash:  # an armed crash inside recovery: the node stays down
            self.crash(node)
            return
        if node.promised is not None:
            self.checker.recovered(self.now, node.id, node.promised, node.log)
            node.promised = None
        self.build(node)
        node.sync_at = None

    def build(self, node: Node) -> None:
        """The member over the recovered log: a core with the key-value machine, and its driver."""
        def on_apply(meta, cmd, state, node_id=node.id):
            self.checker.applied(self.now, node_id, meta.index, meta.term, cmd, state["digest"])
        node.core = self.core_class(node.id, self.config, node.log,
                                    kvmachine.KvMachine(on_apply),
                                    random.Random(self.rng.getrandbits(32)), self.settings)
        node.driver = RaftDriver(node.core, SimPorts(self, node), hard_state_in_wal=node.storage.hard_state_in_wal,
                                 defer_snapshots=self.options.defer_snapshots)

    def crash(self, node: Node) -> None:
        if node.log is not None and node.promised is None:
            node.promised = DurableView.of(node.log)
        self.crashes += 1
        node.core = node.log = node.driver = None
        node.sync_at = None
        node.notices = []
        node.after_flush = []
        node.storage.crash(torn=self.rng.random() < self.options.torn_rate)

    def drive(self, node: Node, call: Callable[[RaftCore], list]) -> None:
        """Give the node's core one input and carry out its effects; a SimCrash (an armed sync
        point reached anywhere in there) stops the node on the spot, as a power cut would."""
        if node.core is None:
            return
        try:
            self.run_effects(node, call(node.core))
            if node.core is not None and self.settings.append_per_turn:
                self.run_effects(node, node.core.replicate())
        except SimCrash:
            self.crash(node)
            return
        self.after_run(node)

    def flush(self, node: Node) -> None:
        """The WAL actor's batch: write and sync, then queue each member's notification."""
        node.sync_at = None
        try:
            written = node.storage.flush()
        except SimCrash:
            self.crash(node)
            return
        after, node.after_flush = node.after_flush, []
        for callback in after:  # the driver's held sends leave now, after the sync
            callback()
        upto = written.get(node.id)
        if upto is not None:
            due = self.now + self.rng.randint(0, self.options.max_notify_ticks)
            due = max([due] + [at for at, _ in node.notices])  # a mailbox keeps its order
            node.notices.append((due, upto))
        self.notify(node)

    def notify(self, node: Node) -> None:
        while node.core is not None and node.notices and node.notices[0][0] <= self.now:
            _, upto = node.notices.pop(0)
            try:
                node.driver.written(upto)  # the core's `written`, then any deferred snapshots
            except SimCrash:
                self.crash(node)
                return
            self.after_run(node)

    def run_effects(self, node: Node, effects: list) -> None:
        """Carry a core's effects out with the member shell's own driver (raft/driver.py)."""
        node.driver.run(effects)

    def after_run(self, node: Node) -> None:
        """What the simulator checks and schedules after a node handled an input."""
        core = node.core
        if core is not None:
            if core.role == LEADER:
                self.checker.leader(self.now, core.term, node.id)
            if node.storage.pending() and node.sync_at is None:
                node.sync_at = self.now + self.rng.randint(1, self.options.max_fsync_ticks)

    def live(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.core is not None]

    def tick(self, faults: bool) -> None:
        self.now += 1
        for src, dst, msg in self.net.due(self.now):
            self.drive(self.nodes[dst], lambda core: core.step(msg))
        for node in self.nodes.values():
            if node.core is not None and node.sync_at is not None and node.sync_at <= self.now:
                self.flush(node)
            self.notify(node)
        for node in self.nodes.values():
            self.drive(node, lambda core: core.tick())
        if faults:
            self.inject_faults()
        if self.rng.random() < self.options.propose_rate:
            self.propose()

    def inject_faults(self) -> None:
        o = self.options
        for node in self.nodes.values():
            if node.core is None:
                if self.rng.random() < o.restart_rate:
                    self.start(node)
            elif self.rng.random() < o.crash_rate:
                self.crash(node)
            elif self.rng.random() < o.sync_crash_rate:
                node.storage.arm_crash(self.rng.randint(0, 3))
        if not self.net.cut and self.rng.random() < o.partition_rate:
            ids = sorted(self.nodes)
            self.rng.shuffle(ids)
            cut = self.rng.randint(1, len(ids) - 1)
            self.net.partition([set(ids[:cut]), set(ids[cut:])])
        elif self.net.cut and self.rng.random() < o.heal_rate:
            self.net.heal()
        if self.rng.random() < o.transfer_rate:
            leaders = [n for n in self.live() if n.core.role == LEADER]
            if leaders:
                target = self.rng.choice(sorted(self.nodes))
                self.drive(leaders[0], lambda core: core.transfer_leadership(target))

    def proposal_target(self):
        """Where a client sends its next proposal: the node it last heard leads, else (or one time
        in five) any live node; None when none is live."""
        target = self.nodes.get(self.leader_hint) if self.leader_hint else None
        if target is None or target.core is None or self.rng.random() < 0.2:
            live = self.live()
            if not live:
                return None
            target = self.rng.choice(live)
        return target

    def propose(self) -> int | None:
        target = self.proposal_target()
        if target is None:
            return None
        self.next_op += 1
        op = "set" if self.rng.random() < 0.3 else "incr"
        cmd = kvmachine.command(op, self.rng.choice("abc"), self.rng.randint(1, 9), self.next_op)
        if self.rng.random() < 0.2:  # a client's batch: this command and a few more
            batch = [(cmd, self.next_op)]
            for _ in range(self.rng.randint(1, 3)):
                self.next_op += 1
                batch.append((kvmachine.command("incr", self.rng.choice("abc"), 1, self.next_op),
                              self.next_op))
            self.drive(target, lambda core: core.propose_batch(batch))
        else:
            self.drive(target, lambda core: core.propose(cmd, self.next_op))
        return self.next_op

    # -- phases -------------------------------------------------------------------------------
    def run(self) -> list[str]:
        try:
            for _ in range(self.options.steps):
                self.tick(faults=True)
            self.liveness()
        except Exception:  # an assertion inside a core is a finding, not a crash of the tool
            self.checker.violation(self.now, "exception:\n" + traceback.format_exc())
        return self.checker.violations

    def liveness(self) -> None:
        self.net.heal()
        self.net.faults = NetFaults(loss=0.0, duplicate=0.0,
                                    max_delay_ticks=self.options.faults.max_delay_ticks)
        for node in self.nodes.values():
            if node.core is None:
                self.start(node)
        start = self.now
        marker = None
        while self.now - start < self.options.liveness_ticks:
            for node in self.nodes.values():
                if node.core is None:  # an armed crash that struck after the faults stopped
                    self.start(node)
            self.tick(faults=False)
            if marker is None and self.now % 5 == 0:
                marker = self.propose_marker()
            if marker is not None and marker in self.checker.acked:
                index = self.checker.acked[marker][0]
                top = max([index] + [i for i, _ in self.checker.acked.values()])
                expected = self.expected_members()
                if all(n.core is not None and n.core.applied >= top for n in expected):
                    self.checker.final(self.now, {n.id: n.core.applied for n in expected})
                    self.finished()
                    return
            if marker is not None and marker not in self.checker.acked and self.now % 50 == 0:
                marker = None  # the leader it went to was deposed; propose a new one
        self.checker.violation(self.now, f"no progress within {self.options.liveness_ticks} "
                                         "ticks after healing (liveness)")

    def expected_members(self) -> list[Node]:
        """The nodes that must have applied everything by the end (all of them, unless a
        simulation changes the membership)."""
        return list(self.nodes.values())

    def finished(self) -> None:
        """The liveness phase succeeded: a subclass's last checks."""

    def propose_marker(self) -> int | None:
        leaders = [n for n in self.live() if n.core.role == LEADER]
        if not leaders:
            return None
        self.leader_hint = leaders[0].id
        return self.propose()


class SimPorts:
    """The simulated world as a member's ports: the network, the checker, the WAL's flush hooks."""

    def __init__(self, sim: Simulation, node: Node) -> None:
        self.sim = sim
        self.node = node

    def send(self, to: str, msg: object) -> None:
        self.sim.net.send(self.sim.now, self.node.id, to, msg)

    def reply(self, corr: object, reply: object) -> None:
        if isinstance(reply, tuple):
            index, term, op_id = reply
            self.sim.checker.ack(self.sim.now, op_id, index, term)

    def not_leader(self, corr: object, leader: str | None) -> None:
        self.sim.leader_hint = leader

    def change_refused(self, corr: object, reason: str) -> None:
        pass

    def leader_changed(self, leader: str | None) -> None:
        if leader is not None:
            self.sim.leader_hint = leader

    def machine_effect(self, effect: object) -> None:
        pass

    def version_switched(self, index: int, old: int, new: int) -> None:
        pass

    def machine_halted(self, index: int, reason: str) -> None:
        raise AssertionError(f"{self.node.id} halted at {index}: {reason}")  # every simulated member runs one code

    def after_flush(self, callback: Callable[[], None]) -> None:
        self.node.after_flush.append(callback)

    def kick(self) -> None:
        pass  # the simulator schedules the WAL's flush after every input (`after_run`)
