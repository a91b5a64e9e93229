"""CI's slice of the simulator: a fixed set of seeds, safety then liveness; and proof that the
checkers catch real bugs. The long sweep is `python -m tests.sim.run --sweep 1000`."""
from __future__ import annotations

import pytest

from tests.sim import mutants
from tests.sim.run import report, run_seed
from tests.sim.simulator import SimOptions, Simulation

SEEDS = range(12)


@pytest.mark.parametrize("nodes", [3, 5])
@pytest.mark.parametrize("seed", SEEDS)
def test_seed_is_safe_and_live(seed: int, nodes: int) -> None:
    steps = 1200
    violations = run_seed(seed, steps, nodes)
    assert not violations, report(seed, steps, nodes, violations)


def first_failing(core_class, seeds=range(30), steps=1500, nodes=3) -> tuple[int, list[str]]:
    for seed in seeds:
        violations = run_seed(seed, steps, nodes, core_class)
        if violations:
            return seed, violations
    return -1, []


def test_simulator_catches_skipped_election_restriction() -> None:
    """Reference: Raft §5.4.1 - without the up-to-date check a stale member can win an election
    and overwrite committed entries; the checkers must see it within a small sweep."""
    seed, violations = first_failing(mutants.NoUpToDateCheck)
    assert seed >= 0, "no seed exposed a core that skips the election restriction"
    print(report(seed, 1500, 3, violations))


def test_simulator_catches_commit_before_fsync() -> None:
    """Ra's rule: acks and the leader's own vote count only written entries. A core that ignores
    the WAL commits entries a crash then loses; with frequent crashes and slow fsyncs the
    checkers must see committed entries diverge."""
    harsh = SimOptions(steps=1500, crash_rate=0.03, restart_rate=0.2, max_fsync_ticks=10)
    failing = [s for s in range(30) if Simulation(s, harsh, mutants.IgnoresWal).run()]
    assert failing, "no seed exposed a core that commits before fsync"
    assert not Simulation(failing[0], harsh).run(), "the correct core fails the same seed"


def test_failure_report_names_seed_and_replay_command():
    text = report(42, 900, 5, ["tick 7: two leaders in term 3: n1 and n2"])
    assert "seed 42" in text and "two leaders" in text
    assert "python -m tests.sim.run --seed 42 --steps 900 --nodes 5" in text
