"""The simulator with groups that go quiet (raft/quiescence.py), and the node liveness they rely on.

As simulator.py (the key-value machine, the same network, disk faults, crashes, partitions and
transfers), with `quiesce` on and proposals rare enough that the group is often idle: an idle group
sends nothing, so a crashed or cut-off leader is found only through liveness. The liveness here
is a perfect failure detector with a seeded delay: a node that a peer cannot reach (crashed, or on
the other side of a cut) is reported down to that peer `detect_ticks` later, as the cluster view
reports a node silent for `cluster.node_down_after`, and the peer's core gets `peer_down` (its
leader's or not), as the quorum host passes it on. The checks are the simulator's: one leader per
term, identical committed prefixes, nothing acknowledged lost, then a leader that commits a fresh
command within the liveness phase.
"""
from __future__ import annotations

from dataclasses import replace

from tests.sim.simulator import SETTINGS, SimOptions, Simulation

QUIET_PROPOSE_RATE = 0.03  # idle stretches of tens of ticks, long enough for groups to go quiet
DETECT_TICKS = (1, 8)  # a node out of reach is reported down after this many ticks (seeded)


class QuietSimulation(Simulation):
    base_settings = replace(SETTINGS, quiesce=True)

    def __init__(self, seed: int, options: SimOptions = SimOptions()) -> None:
        super().__init__(seed, replace(options, propose_rate=QUIET_PROPOSE_RATE))
        self.out_of_reach: dict[tuple[str, str], int] = {}  # (node, peer) -> tick it went out of reach
        self.reported: set[tuple[str, str]] = set()
        self.quiet_ticks = 0  # ticks a whole live group spent quiet
        self.downs_reported = 0

    def tick(self, faults: bool) -> None:
        super().tick(faults)
        self.detect()
        live = self.live()
        if live and all(n.core.quiet for n in live):
            self.quiet_ticks += 1

    def reachable(self, a: str, b: str) -> bool:
        return self.nodes[b].core is not None and frozenset((a, b)) not in self.net.cut

    def detect(self) -> None:
        for node in self.live():
            for peer in sorted(self.nodes):
                if peer == node.id:
                    continue
                key = (node.id, peer)
                if self.reachable(node.id, peer):
                    self.out_of_reach.pop(key, None)
                    self.reported.discard(key)
                    continue
                since = self.out_of_reach.setdefault(key, self.now + self.rng.randint(*DETECT_TICKS))
                if since <= self.now and key not in self.reported:
                    self.reported.add(key)
                    self.downs_reported += 1
                    self.drive(node, lambda core, peer=peer: core.peer_down(leader=core.leader_id == peer))
