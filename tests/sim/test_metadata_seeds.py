"""CI's slice of the metadata group simulation (tests/sim/metadata.py): a fixed set of seeds on 3 and
5 nodes with nodes joining and being forgotten, proof that the runs do change the membership and
crash members, and proof that the checkers catch a member that stands for election outside the
configuration's voters. The long sweep is `python -m tests.sim.run --metadata --sweep 1000`."""
from __future__ import annotations

import pytest

from tests.sim.metadata import MetadataSimulation
from tests.sim.run import report, run_seed
from tests.sim.simulator import SimOptions

SEEDS = range(4)
STEPS = 1200


@pytest.mark.parametrize("nodes", [3, 5])
@pytest.mark.parametrize("seed", SEEDS)
def test_metadata_seed_is_safe_and_live(seed: int, nodes: int) -> None:
    violations = run_seed(seed, STEPS, nodes, machine="metadata")
    assert not violations, report(seed, STEPS, nodes, violations, machine="metadata")


def test_metadata_runs_join_and_forget_nodes_under_crashes() -> None:
    added = removed = crashes = joined_to_the_end = 0
    for seed in SEEDS:
        sim = MetadataSimulation(seed, SimOptions(nodes=3, steps=STEPS))
        assert not sim.run()
        added += sim.changes["added"]
        removed += sim.changes["removed"]
        crashes += sim.crashes
        joined_to_the_end += len(sim.final_config().members() - sim.founders)
    assert added >= 8 and removed >= 8 and crashes >= 100, (added, removed, crashes)
    assert joined_to_the_end >= 2  # spares that joined are members at the end, with the same registry


class ElectsOutsideTheVoters(MetadataSimulation):
    """A mutant: spares start as voters of their own one-node group, as if a node that joins
    bootstrapped a cluster of its own (the bug `start_node --join` must not have)."""

    def build(self, node):
        super().build(node)
        if node.id not in self.founders:
            from raft import ClusterConfig
            node.core.configs = [(0, ClusterConfig(frozenset({node.id})))]


def test_the_checkers_catch_a_joiner_that_starts_its_own_group() -> None:
    # the first seed that catches it is the proof (any() stops there: the later seeds cost seconds)
    assert any(ElectsOutsideTheVoters(seed, SimOptions(nodes=3, steps=600)).run() for seed in range(20)), \
        "no seed caught two leaders or diverging registries"
