"""The simulator running the cluster's metadata group: the registry as the Raft machine
(actors/node/metadata_machine.py) on every node, under the simulator's faults, with nodes joining
the group and being forgotten (issue 11).

Each node's member applies registry commands (metadata/commands.py) packed as the node core packs
them, to its own Registry. Besides the simulator's faults (crashes inside WAL flushes, partitions,
losses, leadership transfers), the leader is asked now and then to add a spare node (a node that
starts outside the group, with no voters, as `start_node --join` starts one: it learns the group
from the leader, as a learner first, then a voter) or to remove a member (forget_cluster_node); a
removed node may later be added again, with whatever its log still holds.

Checks, besides the Raft checker's (one leader per term, identical committed prefixes, the same
registry at the same index on every member, acknowledged commands applied by everyone):
- every node in the final configuration applies every acknowledged command by the end, nodes
  outside it are not waited for;
- at the end every member of the final configuration holds the same registry, record for record.
"""
from __future__ import annotations

import hashlib
import random
from typing import Any

import msgpack

from actors.messages import pack_default
from actors.node import metadata_machine
from actors.node.metadata_machine import MetadataMachine
from metadata.commands import (
    AddBinding, AddUser, AddVhost, ClearPolicy, PutExchange, PutQueue, RemoveBinding, RemoveExchange,
    RemoveNodeTransients, RemoveQueue, RemoveUser, RemoveVhost, SetPolicy,
)
from metadata.records import QUEUE
from metadata.registry import Registry
from raft import ClusterConfig, RaftCore
from raft.driver import RaftDriver
from raft.machine import ApplyMeta
from raft.roles import LEADER
from tests.sim.simulator import Node, SimOptions, SimPorts, Simulation

SPARES = 2
MEMBERSHIP_RATE = 0.01  # per tick: ask the leader to add a spare or remove a member


class ObservedMetadataMachine(MetadataMachine):
    """The real machine, reporting each member's applies to the checker with a digest of the whole
    registry (so "the same state at the same index" is checked on every entry)."""

    def __init__(self, sim: MetadataSimulation, node_id: str) -> None:
        super().__init__(Registry(), lambda *_: None, lambda: None)
        self.sim, self.node_id = sim, node_id

    def apply(self, meta: ApplyMeta, command: bytes, state: Registry) -> tuple[Registry, Any, list]:
        state, _, effects = super().apply(meta, command, state)
        self.sim.checker.applied(self.sim.now, self.node_id, meta.index, meta.term, b"u" + command,
                                 digest(state))
        _origin, key, _cmd = metadata_machine.decode(command)
        return state, (meta.index, meta.term, key), effects


def digest(registry: Registry) -> str:
    return hashlib.blake2b(msgpack.packb(registry.snapshot(), use_bin_type=True, default=pack_default),
                           digest_size=8).hexdigest()


class MetadataSimulation(Simulation):
    def __init__(self, seed: int, options: SimOptions = SimOptions(), *, spares: int = SPARES,
                 membership_rate: float = MEMBERSHIP_RATE) -> None:
        self.founders = {f"n{i + 1}" for i in range(options.nodes)}
        self.membership_rate = membership_rate
        self.changes = {"added": 0, "removed": 0, "refused": 0}
        super().__init__(seed, options)
        for i in range(spares):
            spare = Node(f"s{i + 1}", self.new_storage(f"s{i + 1}"))
            self.nodes[spare.id] = spare
            self.start(spare)

    def build(self, node: Node) -> None:
        """A founder starts with the founders as voters, a spare with none (it joins); a restarted
        node's log overrides both."""
        config = self.config if node.id in self.founders else ClusterConfig(frozenset())
        node.core = RaftCore(node.id, config, node.log, ObservedMetadataMachine(self, node.id),
                             random.Random(self.rng.getrandbits(32)), self.settings)
        node.driver = RaftDriver(node.core, MembershipPorts(self, node), hard_state_in_wal=node.storage.hard_state_in_wal,
                                 defer_snapshots=self.options.defer_snapshots)

    def inject_faults(self) -> None:
        super().inject_faults()
        if self.rng.random() < self.membership_rate:
            self.change_membership()

    def change_membership(self) -> None:
        leaders = [n for n in self.live() if n.core.role == LEADER]
        if not leaders:
            return
        leader = leaders[0]
        members = leader.core.config.members()
        outside = sorted(set(self.nodes) - members)
        if outside and (self.rng.random() < 0.5 or len(leader.core.config.voters) <= 2):
            node = self.rng.choice(outside)
            self.drive(leader, lambda core: core.add_member(node, ("membership", "added")))
        elif len(leader.core.config.voters) > 2:
            node = self.rng.choice(sorted(members))
            self.drive(leader, lambda core: core.remove_member(node, ("membership", "removed")))

    def propose(self) -> int | None:
        target = self.proposal_target()
        if target is None:
            return None
        self.next_op += 1
        command = metadata_machine.encode("client", self.next_op, self.random_command())
        op = self.next_op
        self.drive(target, lambda core: core.propose(command, op))
        return op

    def random_command(self) -> Any:
        rng = self.rng
        vhost = rng.choice(["/", "/", "v1"])
        q, x, u = f"q{rng.randrange(5)}", f"x{rng.randrange(3)}", f"u{rng.randrange(3)}"
        return rng.choice([
            lambda: PutQueue(vhost, q, rng.random() < 0.5, home=f"{rng.choice(sorted(self.nodes))}:queue0"),
            lambda: RemoveQueue(vhost, q),
            lambda: PutExchange(vhost, x, rng.choice(["direct", "fanout", "topic"]), True),
            lambda: RemoveExchange(vhost, x),
            lambda: AddBinding(vhost, QUEUE, q, x, f"k{rng.randrange(3)}"),
            lambda: RemoveBinding(vhost, QUEUE, q, x, f"k{rng.randrange(3)}"),
            lambda: AddUser(u, f"hash{rng.randrange(9)}"),
            lambda: RemoveUser(u),
            lambda: SetPolicy(vhost, f"p{rng.randrange(2)}", "^q", {"max-length": rng.randrange(1, 9)}),
            lambda: ClearPolicy(vhost, f"p{rng.randrange(2)}"),
            lambda: AddVhost("v1"),
            lambda: RemoveVhost("v1"),
            lambda: RemoveNodeTransients(rng.choice(sorted(self.nodes))),
        ])()

    def final_config(self) -> ClusterConfig:
        leaders = [n for n in self.live() if n.core.role == LEADER]
        return max(leaders, key=lambda n: n.core.term).core.config if leaders else self.config

    def expected_members(self) -> list[Node]:
        members = self.final_config().members()
        return [n for n in self.nodes.values() if n.id in members]

    def finished(self) -> None:
        registries = {n.id: digest(n.core.state) for n in self.expected_members()}
        if len(set(registries.values())) > 1:
            self.checker.violation(self.now, f"the members' registries differ at the end: {registries}")


class MembershipPorts(SimPorts):
    """Counts the membership changes the leader made or refused (a change in progress, say)."""

    def reply(self, corr: object, reply: object) -> None:
        if isinstance(corr, tuple) and corr and corr[0] == "membership":
            self.sim.changes[corr[1]] += 1
            return
        super().reply(corr, reply)

    def change_refused(self, corr: object, reason: str) -> None:
        self.sim.changes["refused"] += 1
