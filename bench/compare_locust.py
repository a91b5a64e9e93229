"""warren against Debian's RabbitMQ under the locust scenarios (bench/locust), in one run. Prints a
markdown table; not a test.

    .venv/bin/python -m bench.compare_locust [--scenarios steady,fanout,rpc,small_queues,long_queue,quorum]
        [--users 4] [--time 20] [--warren-port P] [--rabbit-port P] [--no-rabbitmq]

Each broker is started fresh in a temporary directory (warren: scripts.node_main; RabbitMQ:
scripts/rabbitmq_oracle) and stopped at the end. Every scenario runs headless against it
(`locust -u USERS -r USERS -t TIME`), one after the other, with a queue prefix of its own; locust's
CSVs (full history) and final JSON go to bench/out/locust/BROKER-SCENARIO*, the table's rows to
bench/out/locust_compare.json and a chart to bench/out/locust_compare.png. Latency percentiles
come from locust's histogram, which rounds to whole milliseconds below 100 ms; the average is exact.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.compare_brokers import PY, ROOT, Broker, Rabbit, Warren, add_broker_options
from bench.compare_charts import locust_chart
from bench.compare_progress import Progress

LOCUSTFILE = ROOT / "bench" / "locust" / "locustfile.py"
SCENARIOS = ("steady", "fanout", "rpc", "small_queues", "long_queue", "quorum")
grace_s = 60  # past -t: users finishing their operation, locust writing its files


def run_scenario(broker: Broker, scenario: str, users: int, seconds: int, out: Path, prefix: str) -> list[dict]:
    stem = out / f"{broker.name}-{scenario}"
    command = [PY, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "-u", str(users), "-r", str(users),
               "-t", f"{seconds}s", "--host", broker.uri, "--scenario", scenario, "--queue-prefix", prefix,
               "--csv", str(stem), "--csv-full-history", "--json-file", str(stem), "--only-summary",
               "--loglevel", "WARNING"]
    progress = Progress(f"{broker.name} {scenario}", seconds, unit="s", rate=False)
    with open(f"{stem}.log", "w") as log:
        proc = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        started = time.monotonic()
        while proc.poll() is None:
            elapsed = time.monotonic() - started
            progress.update(min(elapsed, seconds))
            if elapsed > seconds + grace_s:
                proc.kill()
            time.sleep(0.2)
    if proc.returncode != 0:
        print(f"  {broker.name} {scenario}: locust exited {proc.returncode}; see {stem}.log", file=sys.stderr)
    try:
        entries = json.loads(Path(f"{stem}.json").read_text())
    except (OSError, ValueError):
        return []
    return [row(broker.name, scenario, e) for e in entries]


def percentile(times: dict[float, int], n: int, share: float) -> float:
    """locust's rule (locust.stats.calculate_response_time_percentile): the smallest bucket with at
    most n x (1 - share) requests above it. (Importing locust would monkey-patch this process for
    gevent, subprocesses included, so the rule is restated here.)"""
    above = 0
    for ms in sorted(times, reverse=True):
        above += times[ms]
        if n - above <= int(n * share):
            return ms
    return 0.0


def row(broker: str, scenario: str, e: dict) -> dict:
    n = e["num_requests"]
    times = {float(ms): count for ms, count in e["response_times"].items()}  # JSON made the keys strings
    span = max(e["last_request_timestamp"] - e["start_time"], 1e-9) if n else 1.0

    def pct(p: float) -> float | None:
        return percentile(times, n, p) if n else None
    return {"broker": broker, "scenario": scenario, "type": e["method"], "name": e["name"], "requests": n,
            "failures": e["num_failures"], "rps": round(n / span, 1),
            "avg_ms": round(e["total_response_time"] / n, 3) if n else None,
            "p50": pct(0.5), "p95": pct(0.95), "p99": pct(0.99)}


def table(rows: list[dict]) -> str:
    lines = ["| scenario | request | broker | req/s | failures | avg ms | p50 ms | p95 ms | p99 ms |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in sorted(rows, key=lambda r: (r["scenario"], r["type"], r["name"], r["broker"] != "warren")):
        request = r["type"] if r["name"] == r["scenario"] else f"{r['type']} {r['name']}"
        lines.append(f"| {r['scenario']} | {request} | {r['broker']} | {r['rps']:,.0f} | {r['failures']} | "
                     f"{r['avg_ms']} | {r['p50']} | {r['p95']} | {r['p99']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenarios", default=",".join(SCENARIOS))
    p.add_argument("--users", type=int, default=4)
    p.add_argument("--time", type=int, default=20, help="seconds per scenario (default 20)")
    add_broker_options(p, 5693, 5694)
    a = p.parse_args(argv)
    scenarios = [s for s in a.scenarios.split(",") if s]
    unknown = set(scenarios) - set(SCENARIOS)
    if unknown:
        p.error(f"unknown scenarios {sorted(unknown)}")
    out = ROOT / "bench" / "out" / "locust"
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="warren-locust-"))
    brokers: list[Broker] = [Warren("warren", a.warren_port, work / "warren")]
    if not a.no_rabbitmq:
        brokers.append(Rabbit("rabbitmq", a.rabbit_port, work / "rabbit"))
    rows: list[dict] = []
    total = len(brokers) * len(scenarios)
    try:
        for broker in brokers:
            broker.data_dir.mkdir(parents=True)
            print(f"== {broker.name}: starting", file=sys.stderr, flush=True)
            broker.start()
            try:
                for i, scenario in enumerate(scenarios):
                    done = brokers.index(broker) * len(scenarios) + i + 1
                    print(f"== [{done}/{total}] {broker.name}, {scenario}: {a.users} users, {a.time} s",
                          file=sys.stderr, flush=True)
                    rows += run_scenario(broker, scenario, a.users, a.time, out, f"cmp.{scenario}.")
            finally:
                broker.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"locust scenarios, {a.users} users, {a.time} s each, 1 KiB bodies")
    print(table(rows))
    result = ROOT / "bench" / "out" / "locust_compare.json"
    result.write_text(json.dumps(rows, indent=1))
    if rows:
        locust_chart(rows, result.with_suffix(".png"))
    print(f"\nJSON: {result}, chart: {result.with_suffix('.png')}, locust files: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
