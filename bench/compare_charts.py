"""PNG charts for the comparison runs, written beside their JSON (matplotlib, no display needed).

    python -m bench.compare_charts perf OUT.png bench/out/warren-A.json bench/out/rabbitmq-A.json ...
    python -m bench.compare_charts durable OUT.png bench/out/durable_compare.json

perf: bench.perf results named BROKER-SCENARIO.json (as bench/compare.sh writes them): rates,
latency percentiles and the consume rate over time. durable: bench.durable_compare's JSON.
locust: bench.compare_locust's rows (drawn by that module through `locust_chart`).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

BROKER_COLORS = {"warren": "tab:blue", "rabbitmq": "tab:orange"}


def _plt() -> Any:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _color(broker: str) -> str | None:
    return BROKER_COLORS.get(broker)  # None: matplotlib's next colour


def _bars(ax: Any, labels: list[str], series: dict[str, list[float]], ylabel: str, title: str) -> None:
    """Grouped bars: one group per label, one bar per series (its name picks the colour)."""
    width = 0.8 / max(1, len(series))
    for i, (name, values) in enumerate(series.items()):
        xs = [x + i * width for x in range(len(labels))]
        bars = ax.bar(xs, values, width, label=name, color=_color(name.split()[0]),
                      alpha=1.0 if i % 2 == 0 or len(series) <= 2 else 0.6)
        ax.bar_label(bars, labels=[f"{v:,.0f}" if v >= 10 else f"{v:.2f}" for v in values], fontsize=7)
    ax.set_xticks([x + width * (len(series) - 1) / 2 for x in range(len(labels))], labels, fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize="small")
    ax.grid(axis="y", alpha=0.3)


def perf_chart(paths: list[Path], out: Path) -> Path:
    runs = []
    for path in paths:
        broker, _, scenario = path.stem.partition("-")
        runs.append((broker, scenario, json.loads(path.read_text())))
    scenarios = sorted({s for _, s, _ in runs})
    brokers = sorted({b for b, _, _ in runs}, key=lambda b: (b != "warren", b))
    plt = _plt()
    fig, (rates, latency, timeline) = plt.subplots(3, 1, figsize=(10, 12))

    def summary(broker: str, scenario: str) -> dict:
        return next((d["summary"] for b, s, d in runs if b == broker and s == scenario), {})
    _bars(rates, scenarios, {f"{b} {k}": [summary(b, s).get(f"{k}_rate", 0) for s in scenarios]
                             for b in brokers for k in ("published", "consumed")},
          "msg/s", "publish and consume rates by scenario")
    _bars(latency, scenarios, {f"{b} {p}": [summary(b, s).get("latency_ms", {}).get(p) or 0 for s in scenarios]
                               for b in brokers for p in ("p50", "p99")},
          "ms", "publish-to-deliver latency")
    for broker, scenario, data in runs:
        samples = data.get("samples", [])
        timeline.plot([x["elapsed_s"] for x in samples], [x["consumed_rate"] for x in samples],
                      label=f"{broker} {scenario}", color=_color(broker),
                      linestyle="-" if scenario == scenarios[0] else "--")
    timeline.set_xlabel("s")
    timeline.set_ylabel("consumed msg/s")
    timeline.set_title("consume rate over time")
    timeline.legend(fontsize="small")
    timeline.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def durable_chart(result: dict, out: Path) -> Path:
    plt = _plt()
    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    through = result.get("throughput", [])
    labels = [f"{name} {size // 1024} KiB" for name, size, _ in through]
    _bars(axes[0][0], labels, {"sent": [s.get("published_rate", 0) for _, _, s in through],
                               "received": [s.get("consumed_rate", 0) for _, _, s in through]},
          "msg/s", "durable throughput (confirms, manual acks)")
    _bars(axes[0][1], labels, {"p50": [(s.get("latency_ms") or {}).get("p50") or 0 for _, _, s in through],
                               "p99": [(s.get("latency_ms") or {}).get("p99") or 0 for _, _, s in through]},
          "ms", "latency")
    backlog = result.get("backlog", [])
    labels = [f"{b['broker']} {b['mode']}" for b in backlog]
    _bars(axes[1][0], labels, {"publish": [b["publish_rate"] for b in backlog],
                               "drain": [b["drain_rate"] for b in backlog]},
          "msg/s", f"backlog of {backlog[0]['messages']:,} messages" if backlog else "backlog")
    _bars(axes[1][1], labels, {"idle PSS": [b["pss_before_mb"] for b in backlog],
                               "peak PSS": [b["peak_pss_mb"] for b in backlog]},
          "MB", "memory (PSS)")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def locust_chart(rows: list[dict], out: Path) -> Path:
    """rows: broker, scenario, type, name, rps, p50, p99 (one per locust request type and name)."""
    labels = sorted({(r["scenario"], r["type"], r["name"]) for r in rows})
    brokers = sorted({r["broker"] for r in rows}, key=lambda b: (b != "warren", b))

    def value(broker: str, key: tuple, field: str) -> float:
        return next((r[field] or 0 for r in rows if (r["broker"], r["scenario"], r["type"], r["name"])
                     == (broker, *key)), 0)
    names = [f"{s}\n{t} {n}" if n != s else f"{s}\n{t}" for s, t, n in labels]
    plt = _plt()
    fig, (rates, latency) = plt.subplots(2, 1, figsize=(max(10, 1.4 * len(labels)), 9))
    _bars(rates, names, {b: [value(b, k, "rps") for k in labels] for b in brokers}, "requests/s",
          "locust: operations per second")
    _bars(latency, names, {f"{b} {p}": [value(b, k, p) for k in labels] for b in brokers for p in ("avg_ms", "p99")},
          "ms", "locust: average and p99 response time (log scale above 1 ms)")
    latency.set_yscale("symlog", linthresh=1)  # sub-millisecond operations beside a seconds-long queue
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 3 or args[0] not in ("perf", "durable"):
        print(__doc__, file=sys.stderr)
        return 64
    kind, out, files = args[0], Path(args[1]), [Path(a) for a in args[2:]]
    if kind == "perf":
        perf_chart(files, out)
    else:
        durable_chart(json.loads(files[0].read_text()), out)
    print(f"chart: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
