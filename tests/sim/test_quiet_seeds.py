"""CI's slice of the simulator with quiescence (tests/sim/quiet.py): groups that go quiet when
idle, under crashes, partitions, lost messages and transfers, stay safe and live, with a dead
leader replaced through liveness only; and proof that the runs go quiet and lean on liveness."""
from __future__ import annotations

import pytest

from tests.sim.quiet import QuietSimulation
from tests.sim.run import report
from tests.sim.simulator import SimOptions

SEEDS = range(8)
STEPS = 1200


@pytest.mark.parametrize("nodes", [3, 5])
@pytest.mark.parametrize("seed", SEEDS)
def test_a_quiet_seed_is_safe_and_live(seed: int, nodes: int) -> None:
    violations = QuietSimulation(seed, SimOptions(nodes=nodes, steps=STEPS)).run()
    assert not violations, report(seed, STEPS, nodes, violations, machine="quiet")


def test_quiet_runs_go_quiet_and_replace_leaders_through_liveness() -> None:
    quiet = downs = terms = 0
    for seed in SEEDS[:4]:
        sim = QuietSimulation(seed, SimOptions(nodes=3, steps=STEPS))
        assert not sim.run()
        quiet += sim.quiet_ticks
        downs += sim.downs_reported
        terms += len(sim.checker.leaders)
    assert quiet >= 400 and downs >= 20 and terms >= 20, (quiet, downs, terms)


def test_a_quiet_groups_dead_leader_is_replaced_through_liveness_alone() -> None:
    """No restart brings the leader back and no heartbeat stops: only the reported node failure
    makes the quiet followers stand for election (without it they would wait for ever)."""
    sim = QuietSimulation(5, SimOptions(nodes=3, steps=0))
    for _ in range(200):
        sim.tick(faults=False)
        if all(n.core.quiet for n in sim.nodes.values()):
            break
    assert all(n.core.quiet for n in sim.nodes.values())
    old = next(n for n in sim.nodes.values() if n.core.role == "leader")
    sim.crash(old)
    for _ in range(200):
        sim.tick(faults=False)
        if any(n.core is not None and n.core.role == "leader" for n in sim.nodes.values()):
            break
    new = [n for n in sim.nodes.values() if n.core is not None and n.core.role == "leader"]
    assert len(new) == 1 and new[0].id != old.id
    before = set(sim.checker.acked)
    for _ in range(300):  # the clients' proposals find the new leader
        sim.tick(faults=False)
    assert set(sim.checker.acked) - before and not sim.checker.violations
