"""CI's slice of the quorum queue simulation (tests/sim/quorum.py): a fixed set of seeds on 3 and 5
nodes, proof that the runs exercise what they claim (leader changes under the channels, crashes,
snapshots, redeliveries, repeated deliveries dropped), and proof that the checkers catch a member
that confirms too early, a client that does not resynchronise its consumers, a leader whose
resync returns its deliveries still on their way and a member that enqueues a resent publish
again. The long sweep is
`python -m tests.sim.run --quorum --sweep 1000`."""
from __future__ import annotations

import pytest

from tests.sim import mutants
from tests.sim.quorum import QuorumSimulation
from tests.sim.run import report, run_seed
from tests.sim.simulator import SimOptions

SEEDS = range(6)
STEPS = 1000


@pytest.mark.parametrize("nodes", [3, 5])
@pytest.mark.parametrize("seed", SEEDS)
def test_quorum_seed_is_safe_and_live(seed: int, nodes: int) -> None:
    violations = run_seed(seed, STEPS, nodes, machine="quorum")
    assert not violations, report(seed, STEPS, nodes, violations, machine="quorum")


def test_quorum_runs_exercise_failover_snapshots_and_redelivery() -> None:
    totals: dict[str, int] = {}
    followers_installed = 0
    for seed in SEEDS[:4]:
        sim = QuorumSimulation(seed, SimOptions(nodes=3, steps=STEPS))
        assert not sim.run()
        for key, value in sim.stats().items():
            totals[key] = totals.get(key, 0) + value
        followers_installed += sum(1 for n in sim.nodes.values() if n.core.log.snapshot_meta() is not None)
    assert totals["confirmed"] >= 1000 and totals["switches"] >= 40 and totals["crashes"] >= 40, totals
    assert totals["redelivered"] >= 20 and totals["duplicates_dropped"] >= 10, totals
    assert followers_installed >= 8, followers_installed


def first_failing(**kwargs) -> tuple[int, list[str]]:
    for seed in range(20):
        violations = QuorumSimulation(seed, SimOptions(nodes=3, steps=STEPS), **kwargs).run()
        if violations:
            return seed, violations
    return -1, []


def test_simulator_catches_a_confirm_before_the_majority_has_it() -> None:
    """Confirm only what is committed: a leader that confirms on propose loses confirmed messages
    when it crashes before replicating them."""
    seed, violations = first_failing(front_class=mutants.ConfirmsOnPropose)
    assert seed >= 0, "no seed exposed a member that confirms before commit"
    assert any("confirmed message(s) never delivered" in v for v in violations), violations[:3]


def test_simulator_catches_consumers_left_behind_by_a_leader_change() -> None:
    """Without a resync, deliveries lost with an old leader stay unacked forever: consumers stall."""
    seed, violations = first_failing(client_class=mutants.NeverResyncs)
    assert seed >= 0, "no seed exposed a client that never resynchronises"


def test_simulator_catches_a_resync_that_returns_deliveries_on_their_way() -> None:
    """CI's kombu duplicate: a message acked once came back, redelivered."""
    seed, violations = first_failing(front_class=mutants.ReturnsWhatIsOnItsWay)
    assert seed >= 0, "no seed exposed a leader that returns its own deliveries on their way"
    assert any("again after a consumer acked it" in v for v in violations), violations[:3]


def test_simulator_catches_a_publish_enqueued_twice() -> None:
    seed, violations = first_failing(front_class=mutants.ForgetsPublishers)
    assert seed >= 0, "no seed exposed a member that enqueues a resent publish again"
    assert any("unflagged a second time" in v for v in violations), violations[:3]
