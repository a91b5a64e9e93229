"""The deterministic simulator (TigerBeetle VOPR style): real RaftCores, fake everything else.

One seed drives one `random.Random`, from which come the network's delays, losses, duplicates
and partitions, the simulated WAL's fsync delays, crashes and restarts, client proposals and
every core's own election jitter. A crash loses whatever the member's MemoryLog had not synced;
the restarted core rebuilds from the durable log, hard state and snapshot. The safety phase
runs `steps` ticks with faults; the liveness phase heals the network, restarts every member,
stops the faults and demands a leader that commits a fresh command and every member applying
it within `liveness_ticks`. Effects are carried out in list order, as a real shell would.
"""
from __future__ import annotations

import random
import traceback
from dataclasses import dataclass, field
from typing import Callable

from persist.raft import ClusterConfig, MemoryLog, RaftCore, RaftSettings
from persist.raft.effects import (ClientReply, LeaderChanged, NotLeader, PersistHardState, Send,
                                  WriteSnapshot)
from persist.raft.roles import LEADER
from tests.sim import kvmachine
from tests.sim.checkers import Checker
from tests.sim.network import NetFaults, SimNetwork

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
    faults: NetFaults = field(default_factory=NetFaults)


@dataclass
class Node:
    id: str
    log: MemoryLog
    core: RaftCore | None = None
    sync_at: int | None = None


class Simulation:
    def __init__(self, seed: int, options: SimOptions = SimOptions(),
                 core_class: Callable[..., RaftCore] = RaftCore) -> None:
        self.seed = seed
        self.options = options
        self.core_class = core_class
        self.rng = random.Random(seed)
        self.net = SimNetwork(self.rng, NetFaults(**vars(options.faults)))
        self.checker = Checker()
        ids = [f"n{i + 1}" for i in range(options.nodes)]
        self.config = ClusterConfig(frozenset(ids))
        self.nodes = {i: Node(i, MemoryLog()) for i in ids}
        self.now = 0
        self.next_op = 0
        self.leader_hint: str | None = None
        for node in self.nodes.values():
            self.start(node)

    # -- the world ----------------------------------------------------------------------------
    def start(self, node: Node) -> None:
        def on_apply(meta, cmd, state, node_id=node.id):
            self.checker.applied(self.now, node_id, meta.index, meta.term, cmd, state["digest"])
        node.core = self.core_class(node.id, self.config, node.log,
                                    kvmachine.KvMachine(on_apply),
                                    random.Random(self.rng.getrandbits(32)), SETTINGS)
        node.sync_at = None

    def crash(self, node: Node) -> None:
        node.core = None
        node.sync_at = None
        node.log.crash()

    def run_effects(self, node: Node, effects: list) -> None:
        for eff in effects:
            if node.core is None:
                return
            if isinstance(eff, Send):
                self.net.send(self.now, node.id, eff.to, eff.msg)
            elif isinstance(eff, PersistHardState):
                node.log.save_hard_state(eff.term, eff.voted_for)
            elif isinstance(eff, ClientReply):
                if isinstance(eff.reply, tuple):
                    index, term, op_id = eff.reply
                    self.checker.ack(self.now, op_id, index, term)
            elif isinstance(eff, NotLeader):
                self.leader_hint = eff.leader
            elif isinstance(eff, LeaderChanged):
                if eff.leader is not None:
                    self.leader_hint = eff.leader
            elif isinstance(eff, WriteSnapshot):
                node.log.install_snapshot(eff.index, eff.term, eff.data)
                self.run_effects(node, node.core.snapshot_written(eff.index, eff.term))
        core = node.core
        if core is not None:
            if core.role == LEADER:
                self.checker.leader(self.now, core.term, node.id)
            if node.log.unsynced() and node.sync_at is None:
                node.sync_at = self.now + self.rng.randint(1, self.options.max_fsync_ticks)

    def live(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.core is not None]

    def tick(self, faults: bool) -> None:
        self.now += 1
        for src, dst, msg in self.net.due(self.now):
            node = self.nodes[dst]
            if node.core is not None:
                self.run_effects(node, node.core.step(msg))
        for node in self.nodes.values():
            if node.core is not None and node.sync_at is not None and node.sync_at <= self.now:
                node.sync_at = None
                upto = node.log.sync()
                self.run_effects(node, node.core.written(upto))
        for node in self.nodes.values():
            if node.core is not None:
                self.run_effects(node, node.core.tick())
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
                self.run_effects(leaders[0], leaders[0].core.transfer_leadership(target))

    def propose(self) -> int | None:
        target = self.nodes.get(self.leader_hint) if self.leader_hint else None
        if target is None or target.core is None or self.rng.random() < 0.2:
            live = self.live()
            if not live:
                return None
            target = self.rng.choice(live)
        self.next_op += 1
        op = "set" if self.rng.random() < 0.3 else "incr"
        cmd = kvmachine.command(op, self.rng.choice("abc"), self.rng.randint(1, 9), self.next_op)
        self.run_effects(target, target.core.propose(cmd, self.next_op))
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
            self.tick(faults=False)
            if marker is None and self.now % 5 == 0:
                marker = self.propose_marker()
            if marker is not None and marker in self.checker.acked:
                index = self.checker.acked[marker][0]
                if all(n.core.applied >= index for n in self.nodes.values()) and \
                        all(n.core.applied >= max((i for i, _ in self.checker.acked.values()),
                                                  default=0) for n in self.nodes.values()):
                    self.checker.final(self.now, {n.id: n.core.applied
                                                  for n in self.nodes.values()})
                    return
            if marker is not None and marker not in self.checker.acked and self.now % 50 == 0:
                marker = None  # the leader it went to was deposed; propose a new one
        self.checker.violation(self.now, f"no progress within {self.options.liveness_ticks} "
                                         "ticks after healing (liveness)")

    def propose_marker(self) -> int | None:
        leaders = [n for n in self.live() if n.core.role == LEADER]
        if not leaders:
            return None
        self.leader_hint = leaders[0].id
        return self.propose()
