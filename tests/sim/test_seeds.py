"""CI's slice of the simulator: a fixed set of seeds in both log modes, safety then liveness;
proof that a run exercises the real WAL (rollovers, segments, torn tails, crashes at sync
points); and proof that the checkers catch broken cores and a broken disk. The long sweep is
`python -m tests.sim.run --sweep 1000` (add `--log memory` for the MemoryLog model)."""
from __future__ import annotations

import pytest

from tests.sim import mutants
from tests.sim.run import report, run_seed
from tests.sim.simulator import SimOptions, Simulation

SEEDS = range(12)
STEPS = 1200


@pytest.mark.parametrize("log", ["wal", "memory"])
@pytest.mark.parametrize("nodes", [3, 5])
@pytest.mark.parametrize("seed", SEEDS)
def test_seed_is_safe_and_live(seed: int, nodes: int, log: str) -> None:
    violations = run_seed(seed, STEPS, nodes, log=log)
    assert not violations, report(seed, STEPS, nodes, violations, log)


def test_wal_runs_exercise_rollover_segments_torn_tails_and_sync_point_crashes() -> None:
    """The seeds above are only worth something if the storage paths they claim to cover run:
    WAL files roll over into segment files, crashes strike inside syncs and leave torn tails
    that recovery cuts, and crashed members recover and rejoin."""
    rollovers = segments = torn = crashes = 0
    for seed in SEEDS[:6]:
        sim = Simulation(seed, SimOptions(nodes=3, steps=STEPS))
        assert not sim.run()
        crashes += sim.crashes
        for node in sim.nodes.values():
            rollovers += node.storage.rollovers
            segments += node.storage.segment_files()
            torn += node.storage.torn_tails
    assert rollovers >= 20 and segments >= 6 and torn >= 2 and crashes >= 10, \
        (rollovers, segments, torn, crashes)


def test_one_seed_is_one_trace() -> None:
    """Replaying a seed must reproduce the run exactly, disk contents included."""
    def fingerprint(sim: Simulation) -> tuple:
        sim.run()
        disks = [[(name, node.storage.disk.read(name)) for name in node.storage.disk.files()]
                 for node in sim.nodes.values()]
        return sim.now, sim.crashes, sorted(sim.checker.committed.items()), disks

    assert fingerprint(Simulation(3, SimOptions(steps=600))) == \
        fingerprint(Simulation(3, SimOptions(steps=600)))


def first_failing(core_class, log: str, seeds=range(30), steps=1500, nodes=3
                  ) -> tuple[int, list[str]]:
    for seed in seeds:
        violations = run_seed(seed, steps, nodes, core_class, log=log)
        if violations:
            return seed, violations
    return -1, []


@pytest.mark.parametrize("log", ["wal", "memory"])
def test_simulator_catches_skipped_election_restriction(log: str) -> None:
    """Reference: Raft §5.4.1 - without the up-to-date check a stale member can win an election
    and overwrite committed entries; the checkers must see it within a small sweep."""
    seed, violations = first_failing(mutants.NoUpToDateCheck, log)
    assert seed >= 0, "no seed exposed a core that skips the election restriction"
    print(report(seed, 1500, 3, violations, log))


@pytest.mark.parametrize("log", ["wal", "memory"])
def test_simulator_catches_commit_before_fsync(log: str) -> None:
    """Ra's rule: acks and the leader's own vote count only written entries. A core that ignores
    the WAL commits entries a crash then loses; with frequent crashes and slow fsyncs the
    checkers must see committed entries diverge."""
    harsh = SimOptions(steps=1500, crash_rate=0.03, restart_rate=0.2, max_fsync_ticks=20, log=log)
    seed = next((s for s in range(30) if Simulation(s, harsh, mutants.IgnoresWal).run()), -1)
    assert seed >= 0, "no seed exposed a core that commits before fsync"
    assert not Simulation(seed, harsh).run(), "the correct core fails the same seed"


def test_simulator_catches_a_disk_that_does_not_sync() -> None:
    """A WAL on a lying disk reports entries written that a crash then loses: the recovery
    checker (the written log survives a crash) must name it on the first crash."""
    violations = Simulation(0, SimOptions(steps=STEPS), disk_class=mutants.SyncIgnoringDisk).run()
    assert any("had been reported written" in v for v in violations), violations[:3]


def test_failure_report_names_seed_and_replay_command():
    text = report(42, 900, 5, ["tick 7: two leaders in term 3: n1 and n2"], "wal")
    assert "seed 42" in text and "two leaders" in text
    assert "python -m tests.sim.run --seed 42 --steps 900 --nodes 5 --log wal" in text
