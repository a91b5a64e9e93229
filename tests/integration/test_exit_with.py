"""A node started with `--exit-with PID` stops by itself when that process is gone, and only then
(scripts/node_main.py): how a test's nodes never outlive it."""
from __future__ import annotations

import subprocess

import pytest

from tests.integration.nodes import start_node
from tests.waiting import until

pytestmark = pytest.mark.integration


def test_a_node_stops_when_the_process_it_exits_with_is_gone(tmp_path):
    owner = subprocess.Popen(["sleep", "600"])
    node = start_node(tmp_path / "data", "--exit-with", str(owner.pid))
    try:
        assert node.proc.poll() is None and node.processes()  # serving while its owner lives
        owner.kill()
        owner.wait()
        until(lambda: node.proc.poll() is not None and not node.processes(), "the node gone with its owner",
              timeout_s=60)
    finally:
        if node.proc.poll() is None:
            node.stop()
