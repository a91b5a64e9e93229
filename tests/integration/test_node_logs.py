"""A started node's logs: every process's structlog events as JSON lines in DATA_DIR/log/warren.log,
and on the terminal one prefix per line (the supervisor's were prefixed twice)."""
from __future__ import annotations

import json
import re

import pytest

from tests.integration.nodes import start_node
from tests.waiting import until

pytestmark = pytest.mark.integration
HOSTS = {"node", "quorum", "conn0", "conn1"}  # the classic queues run in the connection hosts
CONSOLE_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \[(info|warning|error) *\] \S")


def events(data_dir) -> list[dict]:
    path = data_dir / "log" / "warren.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_every_process_logs_json_lines_to_the_file_and_one_prefix_per_terminal_line(tmp_path):
    node = start_node(tmp_path / "data")
    try:
        # the main process writes the ready file the test waited for, then logs node.ready
        logged = until(lambda: (lambda evs: evs if {e.get("host") for e in evs if e["event"] == "host.started"} == HOSTS
                                and any(e["event"] == "node.ready" for e in evs) else None)(
            events(node.data_dir)), "every host's start and the node's readiness in the log file")
        by_event = {}
        for e in logged:
            assert {"event", "level", "host", "timestamp"} <= set(e), e
            by_event.setdefault(e["event"], []).append(e)
        assert [e["host"] for e in by_event["node.ready"]] == ["main"]
        assert {e["host"] for e in by_event["supervisor.host_started"]} == HOSTS
        assert by_event["listener.started"][0]["port"] == node.port
    finally:
        node.stop()
    assert any(e["event"] == "node.stopped" for e in events(node.data_dir))
    terminal = [line for line in node.log().splitlines() if "supervisor." in line]
    assert terminal and all(CONSOLE_LINE.match(line) and line.count("supervisor.") == 1 for line in terminal)
