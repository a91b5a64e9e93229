"""Protocol fuzzing against a running node (tests/fuzz/node_fuzz.py), short form: cases of valid
then mutated frames from four connections at once while a control client publishes with confirms
and consumes. The node stays up with no host restarted, the control client notices nothing and
loses nothing, every close carries RabbitMQ's "CODE_NAME - " text and the node logs no crash.
`python -m tests.fuzz.node_fuzz --cases 5000 --oracle` is the long campaign."""
from __future__ import annotations

import pytest

from scripts.local_cluster import start_node
from tests.fuzz.node_fuzz import fuzz
from tests.fuzz.sequences import case

pytestmark = pytest.mark.integration


def test_a_case_is_its_seed():
    assert case(41) == case(41) and case(41) != case(42)
    assert case(7, mutation_rate=0).mutations == ()


@pytest.mark.timeout(240)
def test_mutated_frames_from_several_connections_leave_the_node_and_its_other_clients_alone(tmp_path):
    node = start_node(tmp_path / "node")
    try:
        findings = fuzz(node, range(1000, 1100), workers=4)
    finally:
        node.stop()
    assert findings.ok, findings.report()
    assert findings.cases == 100 and findings.confirmed > 0
    assert sum(n for kind, n in findings.endings.items() if kind.startswith("close")) > 25  # errors were provoked
