"""The fault suite against real clusters (tests/faults/campaign.py): quorum queues and a durable classic
queue must lose nothing confirmed, deliver nothing unexpected and leave no consumer stuck under
every nemesis.

CI runs the short form: one window of each nemesis (6 s each, 5 s recovery) on 3 nodes in network
namespaces where they can be made (root, `ip`, `nft`), and one partition through the fault-injecting
transport, the fallback elsewhere. The long campaigns (3 and 5 nodes, every nemesis, 10-30 s
faults) are `slow`; `scripts/faults` runs them by hand. A failure's message is the report: seed,
schedule, the command that replays it, and where the logs are."""
from __future__ import annotations

import pytest

from tests.faults.campaign import Options, run
from tests.faults.network import netns_unavailable
from tests.faults.schedule import NEMESES

pytestmark = pytest.mark.integration


def campaign(tmp_path, **kw) -> None:
    outcome = run(Options(out=tmp_path / "run", **kw), say=lambda line: None)
    assert outcome.ok, outcome.report
    assert outcome.result.confirmed > 100, outcome.report  # the workload did work under the faults


@pytest.mark.timeout(600)  # ~65 s when healthy; room for a node that does not serve to be reported
def test_one_of_each_nemesis_loses_nothing_confirmed(tmp_path):
    if netns_unavailable():
        pytest.skip(f"network namespaces: {netns_unavailable()} (the transport test covers the fallback)")
    campaign(tmp_path, nodes=3, nemeses=NEMESES, rounds=1, seed=13, fault_s=(6, 6), recovery_s=(5, 5))


@pytest.mark.timeout(180)
def test_a_partition_through_the_fault_injecting_transport_loses_nothing_confirmed(tmp_path):
    campaign(tmp_path, nodes=3, nemeses=("partition",), rounds=1, seed=4, fault_s=(10, 10), recovery_s=(5, 5),
             transport=True)


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("nodes", [3, 5])
def test_a_long_campaign_loses_nothing_confirmed(tmp_path, nodes):
    campaign(tmp_path, nodes=nodes, nemeses=NEMESES, time_s=600, seed=nodes)
