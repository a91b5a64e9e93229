"""bench.quorum_compare's phases: `--phases steady` runs the steady 1,000 msg/s phase alone, on a
broker of its own, and its row holds only that phase's figures."""
from __future__ import annotations

from pathlib import Path

import pytest

from bench import quorum_compare


class Broker:
    started: list[Path] = []

    def __init__(self, root: Path, size: int) -> None:
        self.root = root

    uri = "amqp://x"

    def start(self) -> None:
        Broker.started.append(self.root)

    def stop(self) -> None:
        pass


def summary(p50: float) -> dict:
    return {"confirmed_rate": 1.0, "consumed_rate": 2.0, "published": 5, "consumed": 5,
            "latency_ms": {"p50": p50, "p99": 2 * p50}}


def test_the_steady_phase_alone(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen = []
    monkeypatch.setattr(quorum_compare, "perf", lambda uri, queue, out, *extra, **kw: seen.append(extra) or summary(1.5))
    Broker.started = []
    row = quorum_compare.measure(Broker, tmp_path, 3, "warren", 1.0, 1024, ("steady",))
    assert seen == [("--rate", "1000")] and Broker.started == [tmp_path / "warren-steady"]
    assert row == {"p50 ms @1k/s": 1.5, "p99 ms @1k/s": 3.0}


def test_both_phases_by_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(quorum_compare, "perf", lambda uri, queue, out, *extra, **kw: summary(4.0 if not extra else 1.0))
    row = quorum_compare.measure(Broker, tmp_path, 1, "warren", 1.0, 1024)
    assert row == {"confirmed/s": 1.0, "received/s": 2.0, "p50 ms (flat out)": 4.0, "p99 ms (flat out)": 8.0,
                   "p50 ms @1k/s": 1.0, "p99 ms @1k/s": 2.0, "unconsumed": 0}
