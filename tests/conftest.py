"""Tests marked `slow` (long fault campaigns, long fuzz runs) run only with WARREN_SLOW=1; the suite
runs their short forms. The run ends with every skip and its reason."""
from __future__ import annotations

import os
from collections import Counter

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("WARREN_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow: set WARREN_SLOW=1 to run it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Every skip of the run with its reason, grouped, just above the final counts: a skip that
    remains (a tool missing here, a slow test) says why in the run's last lines."""
    reasons: Counter[str] = Counter()
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reasons[reason.removeprefix("Skipped: ")] += 1
    if reasons:
        terminalreporter.section("skipped, and why", sep="-")
        for reason, n in sorted(reasons.items(), key=lambda item: (-item[1], item[0])):
            terminalreporter.write_line(f"{n:5d}  {reason}")
