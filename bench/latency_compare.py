"""Latency under load and at rest, warren against Debian's RabbitMQ in the same run (issue 14, 6).
Prints; not a test.

    .venv/bin/python -m bench.latency_compare [--repeat N] [--time S] [--scenarios a,b,...]
        [--no-rabbitmq] [--warren-port P] [--rabbit-port P]

Scenarios (bench.perf, 1 producer and 1 consumer, durable queue, persistent messages):
- `1k`, `16k`: confirms (window 1000) and manual acks (prefetch 300), flat out, 1 KiB / 16 KiB
  bodies: sent and received msg/s, p50 / p99 publish -> consume latency, p50 publish -> confirm;
- `steady`: the same with 1 KiB at a steady 1,000 msg/s: the latency of an idle path.
One warren node and one RabbitMQ (scripts/rabbitmq_oracle) are started fresh in a temporary
directory and kept for the whole run; each round runs every scenario on warren, then on RabbitMQ,
so both see the same machine. The machine is shared: the table gives the median of the rounds and
the spread (min-max). Per-run JSON: bench/out/latency_compare.json.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.compare_brokers import PY, ROOT, Broker, Rabbit, Warren, add_broker_options, running

SCENARIOS = {
    "1k": ["--size", "1024", "--confirm", "1000", "--prefetch", "300"],
    "16k": ["--size", "16384", "--confirm", "1000", "--prefetch", "300"],
    "steady": ["--size", "1024", "--confirm", "1000", "--prefetch", "300", "--rate", "1000"],
}


def perf(broker: Broker, args: list[str], seconds: float, path: Path) -> dict:
    path.unlink(missing_ok=True)
    subprocess.run([PY, "-m", "bench.perf", "--uri", broker.uri, "--producers", "1", "--consumers", "1",
                    "--persistent", "--durable", *args, "--time", str(seconds), "--warmup", str(min(3, seconds / 3)),
                    "--json", str(path)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=sys.stderr, check=False)
    try:
        return json.loads(path.read_text())["summary"]
    except (OSError, ValueError, KeyError):
        return {}


def spread(values: list[float], fmt: str) -> str:
    """median (min-max) of the rounds."""
    if not values:
        return "-"
    mid = format(statistics.median(values), fmt)
    return mid if len(values) == 1 else f"{mid} ({format(min(values), fmt)}-{format(max(values), fmt)})"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=3, help="rounds (default 3)")
    p.add_argument("--time", type=float, default=15.0, help="seconds per run (default 15)")
    p.add_argument("--scenarios", default="1k,16k,steady")
    add_broker_options(p, 5693, 5694)
    a = p.parse_args(argv)
    scenarios = a.scenarios.split(",")
    work = Path(tempfile.mkdtemp(prefix="warren-latency-"))
    out = ROOT / "bench" / "out"
    out.mkdir(exist_ok=True)
    brokers: list[Broker] = [Warren("warren", a.warren_port, work / "warren")]
    if not a.no_rabbitmq:
        brokers.append(Rabbit("rabbitmq", a.rabbit_port, work / "rabbit"))
    runs: list[dict] = []
    try:
        with running(brokers):
            for round_ in range(1, a.repeat + 1):
                for name in scenarios:
                    for broker in brokers:
                        print(f"== round {round_}/{a.repeat}: {broker.name} {name}", file=sys.stderr, flush=True)
                        s = perf(broker, SCENARIOS[name], a.time, work / "perf.json")
                        runs.append({"round": round_, "broker": broker.name, "scenario": name, "summary": s})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"1 producer, 1 consumer, durable queue, persistent, confirms (window 1000), manual acks "
          f"(prefetch 300); {a.time:g} s per run, median of {a.repeat} rounds (min-max)")
    print("| scenario | broker | sent msg/s | received msg/s | received / sent | p50 ms | p99 ms | confirm p50 ms |")
    print("|---|---|---|---|---|---|---|---|")
    for name in scenarios:
        for broker in brokers:
            got = [r["summary"] for r in runs if r["broker"] == broker.name and r["scenario"] == name and r["summary"]]
            sent = [s.get("published_rate", 0) for s in got]
            received = [s.get("consumed_rate", 0) for s in got]
            ratio = [r / s for s, r in zip(sent, received) if s]
            p50 = [s["latency_ms"]["p50"] for s in got if s.get("latency_ms", {}).get("p50") is not None]
            p99 = [s["latency_ms"]["p99"] for s in got if s.get("latency_ms", {}).get("p99") is not None]
            confirm = [s["confirm_latency_ms"]["p50"] for s in got
                       if s.get("confirm_latency_ms", {}).get("p50") is not None]
            fmt = ".2f" if name == "steady" else ".1f"
            print(f"| {name} | {broker.name} | {spread(sent, ',.0f')} | {spread(received, ',.0f')} | "
                  f"{spread(ratio, '.2f')} | {spread(p50, fmt)} | {spread(p99, fmt)} | {spread(confirm, fmt)} |")
    (out / "latency_compare.json").write_text(json.dumps(runs, indent=1))
    print(f"\nJSON: {out / 'latency_compare.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
