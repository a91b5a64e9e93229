"""Render perf JSON results as the markdown table bench/RESULTS.md uses.

`python -m bench.perf.table FILE...` where each FILE is named BROKER-SCENARIO.json (as
bench/compare.sh writes them).  One row per file, in the order given.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HEADER = ("| broker | scenario | publish msg/s | consume msg/s | p50 latency ms | p99 latency ms |\n"
          "|---|---|---:|---:|---:|---:|")


def row(path: Path) -> str:
    broker, _, scenario = path.stem.partition("-")
    data = json.loads(path.read_text())
    s = data["summary"]
    lat = s["latency_ms"]

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}"
    note = " (error)" if data.get("errors") else ""
    return (f"| {broker} | {scenario}{note} | {s['published_rate']:.0f} | {s['consumed_rate']:.0f} "
            f"| {ms(lat['p50'])} | {ms(lat['p99'])} |")


def table(paths: list[Path]) -> str:
    return "\n".join([HEADER] + [row(p) for p in paths])


def main(argv: list[str] | None = None) -> int:
    paths = [Path(p) for p in (sys.argv[1:] if argv is None else argv)]
    print(table(paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
