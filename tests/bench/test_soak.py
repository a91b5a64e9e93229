"""The soak (bench/soak.py): a minute of the mixed load on three nodes with one restart of n3, sampled
every 15 s, and 15 minutes with a restart every 5; both with `WARREN_SLOW=1` for now (see below).
Nothing confirmed may be lost, and the report and plots must be written. The hour-long run is
`python -m bench.soak` (bench/RESULTS.md has its figures)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.soak import NODES, Settings, run, write

pytestmark = pytest.mark.integration


def soak(root: Path, settings: Settings, restarts: int) -> None:
    out = run(root / "nodes", settings, say=lambda _: None)
    figures = write(out, root / "report")
    assert out.result is not None and out.result.lost == [], out.result
    assert out.result.unexpected == [] and out.failures == [], (out.result, out.failures)
    assert out.result.confirmed > 0 and len(out.restarts) == restarts
    assert out.churn.queues_declared > 0 and out.churn.connections > 0
    assert all(s.pss.get(n) and s.fds.get(n) for s in out.samples for n in ("n1", "n2")), out.samples
    assert set(figures["nodes"]) == set(NODES) and figures["messages"]["lost"] == 0
    assert json.loads((root / "report" / "soak.json").read_text())["summary"]["ok"] is True
    for name in ("soak.txt", "soak_pss.png", "soak_fds.png", "soak_latency.png"):
        assert (root / "report" / name).stat().st_size > 0


# slow for now: in one of the suite's full runs here the restarted n3 never heard from its peers
# (its node host logged no node_up in 90 s, its quorum host never learned their endpoints); alone
# it passes. Until that restart is understood, the suite must not depend on it.
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_minute_of_mixed_load_with_a_restart_loses_nothing_and_is_reported(tmp_path):
    soak(tmp_path, Settings(duration_s=60, sample_s=15, warmup_s=15, restart_every_s=30, rate=20), restarts=1)


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_a_quarter_hour_of_mixed_load_with_restarts_loses_nothing(tmp_path):
    soak(tmp_path, Settings(duration_s=900, sample_s=60, warmup_s=180, restart_every_s=300, rate=20), restarts=2)
