"""Tests marked `slow` (long fault campaigns, long fuzz runs) run only with WARREN_SLOW=1; the suite
runs their short forms."""
from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("WARREN_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow: set WARREN_SLOW=1 to run it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
