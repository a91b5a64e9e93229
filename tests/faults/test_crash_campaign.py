"""The crash campaign (tests/faults/crash_campaign.py): kill -9 of every kind of process of a node,
one at a time and two at once, under confirmed publishing to a classic and a quorum queue:
every host running again within 10 s, nothing confirmed lost, nothing left behind, and a restart
right after kill -9 of the main process serving within its normal start time. The suite runs the
short form (each kind once, five pairs); `WARREN_SLOW=1` adds a long seeded one."""
from __future__ import annotations

import pytest

from tests.faults.crash_campaign import SHORT, back_s, report, restart_slack_s, rounds, run

pytestmark = pytest.mark.integration


def campaign(tmp_path, kills, gap_s: float = 0.0) -> None:
    out = run(tmp_path, kills, gap_s=gap_s, say=lambda line: None)
    text = report(out)
    assert out.ok, text
    assert out.result.confirmed > 100, text  # the workload did work between the kills
    assert all(took <= back_s for _, took in out.back), text
    assert len(out.restarts) == sum("main" in k for k in kills), text
    assert all(took <= out.first_start_s + restart_slack_s for took in out.restarts), text


@pytest.mark.timeout(600)
def test_every_kind_of_process_killed_alone_and_in_pairs_loses_nothing_and_leaves_nothing(tmp_path):
    campaign(tmp_path, SHORT)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_a_long_crash_campaign(tmp_path):
    campaign(tmp_path, rounds(seed=33, n=80), gap_s=7.0)
