"""A rolling upgrade under the simulator's faults: the key-value machine gains a version 2, and the
nodes are restarted one at a time onto code that runs it (raft/versions.py).

`VersionedKv` version 2 counts every increment twice, so an entry applied by the wrong version's
rules leaves another state, which the checker's per-index digests catch. `UpgradeSimulation`
builds every member on version-1 code until `upgrade_at`, then crashes the nodes one by one
`upgrade_gap` ticks apart (a kill -9 rolling restart; the faults go on meanwhile): a node built
after `upgrade_at` runs version 2, and once every member does, the group switches. The checks
are the simulator's own (one leader per term, identical committed prefixes, the same state at
every index on every member, acks) plus the switch itself (`switched`).
Left out: a node rolled back to version 1 (tests/raft/test_versions.py checks that it halts).
"""
from __future__ import annotations

import random
from typing import Any

import msgpack

from raft.driver import RaftDriver
from raft.machine import ApplyMeta
from tests.sim.kvmachine import KvMachine
from tests.sim.simulator import Node, SimOptions, SimPorts, Simulation


class VersionedKv(KvMachine):
    def __init__(self, on_apply: Any, runs: int) -> None:
        super().__init__(on_apply)
        self.runs = runs

    def version(self) -> int:
        return self.runs

    def apply(self, meta: ApplyMeta, cmd: bytes, state: dict) -> tuple[dict, Any, list]:
        return super().apply(meta, self.rules(meta.machine_version, cmd), state)

    @staticmethod
    def rules(version: int, cmd: bytes) -> bytes:
        op, key, value, op_id = msgpack.unpackb(cmd)
        if version >= 2 and op == "incr":
            return msgpack.packb([op, key, value * 2, op_id])
        return cmd


class UpgradeSimulation(Simulation):
    def __init__(self, seed: int, options: SimOptions = SimOptions(), *, upgrade_at: int = 300,
                 upgrade_gap: int = 150, machine_class: type[VersionedKv] = VersionedKv) -> None:
        self.upgrade_at, self.upgrade_gap, self.machine_class = upgrade_at, upgrade_gap, machine_class
        self.built_on: dict[str, int] = {}  # node -> the version its code runs
        super().__init__(seed, options)
        self.order = sorted(self.nodes)

    def build(self, node: Node) -> None:
        def on_apply(meta: ApplyMeta, cmd: bytes, state: dict, node_id: str = node.id) -> None:
            self.checker.applied(self.now, node_id, meta.index, meta.term, cmd, state["digest"])
        runs = 2 if self.now >= self.upgrade_at else 1
        self.built_on[node.id] = runs
        node.core = self.core_class(node.id, self.config, node.log, self.machine_class(on_apply, runs),
                                    random.Random(self.rng.getrandbits(32)), self.settings)
        node.driver = RaftDriver(node.core, SimPorts(self, node), hard_state_in_wal=node.storage.hard_state_in_wal,
                                 defer_snapshots=self.options.defer_snapshots)

    def tick(self, faults: bool) -> None:
        super().tick(faults)
        k, late = divmod(self.now - self.upgrade_at, self.upgrade_gap)
        if late == 0 and 0 <= k < len(self.order):
            node = self.nodes[self.order[k]]
            if node.core is not None and self.built_on[node.id] == 1:
                self.crash(node)  # restarted by the faults' restart rate, or by the liveness phase

    def switched(self) -> bool:
        """Every member runs version 2. That they switched at one index is the digests' check: a
        member that switched elsewhere would hold another state at the indexes between."""
        return all(n.core.machine_version == 2 for n in self.nodes.values())


class IgnoresTheLogsVersion(VersionedKv):
    """Applies every entry by the newest rules its code knows: a member that restarts on version 2
    replays the old entries differently from the members that applied them under version 1."""

    def apply(self, meta: ApplyMeta, cmd: bytes, state: dict) -> tuple[dict, Any, list]:
        return KvMachine.apply(self, meta, self.rules(self.runs, cmd), state)
