"""CI's slice of the rolling-upgrade simulation (tests/sim/upgrade.py): seeds on 3 and 5 nodes stay
safe and live while the nodes restart onto a new machine version, every run ends switched, and a
member that ignores the log's version (applies by its code's newest rules) is caught."""
from __future__ import annotations

import pytest

from tests.sim.simulator import SimOptions
from tests.sim.upgrade import IgnoresTheLogsVersion, UpgradeSimulation

SEEDS = range(4)
STEPS = 1000


@pytest.mark.parametrize("nodes", [3, 5])
@pytest.mark.parametrize("seed", SEEDS)
def test_a_rolling_upgrade_is_safe_live_and_switches(seed: int, nodes: int) -> None:
    sim = UpgradeSimulation(seed, SimOptions(nodes=nodes, steps=STEPS), upgrade_gap=120)
    violations = sim.run()
    assert not violations, f"seed {seed}, {nodes} nodes: " + "\n".join(violations[:5])
    assert sim.switched(), {n: (x.core.machine_version, x.core.versions) for n, x in sim.nodes.items()}


def test_the_simulator_catches_a_member_that_ignores_the_logs_version() -> None:
    found = [seed for seed in range(10)
             if any("different machine state" in v for v in
                    UpgradeSimulation(seed, SimOptions(nodes=3, steps=STEPS), upgrade_gap=120,
                                      machine_class=IgnoresTheLogsVersion).run())]
    assert found, "no seed exposed a member that applies old entries by the new version's rules"
