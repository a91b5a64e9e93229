"""Where a stream's CPU goes on one node: stream_compare's throughput phase (1 producer, 1 consumer
from "first", 1 KiB persistent, confirms 1000, prefetch 300) on a fresh 1-node cluster, with each
host's CPU share and the perf processes' over the middle of the run, and with --profile a cProfile
of each connection host's loop (the `profile` control op) written to the run's directory.

Usage: .venv/bin/python -m bench.stream_profile [--time S] [--profile]
Run it from the tree to measure (the nodes start from the tree this module is in). Prints; asserts
nothing. The profiler slows the hosts about 2x: compare rates only between runs without it.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from bench.stream_compare import FIRST, STREAM
from scripts.local_cluster import Cluster

WARMUP_S = 3.0  # before the CPU is sampled: connections made, the stream declared


def _cpu(procs: list[psutil.Process]) -> float:
    total = 0.0
    for p in procs:
        try:
            total += sum(p.cpu_times()[:2])
        except psutil.Error:
            pass
    return total


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--time", type=float, default=14.0)
    p.add_argument("--profile", action="store_true")
    a = p.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="stream-profile-"))
    cluster = Cluster(root, 1).start()
    try:
        hosts = cluster.hosts("n1")
        procs = {h: psutil.Process(cluster.control("n1", h, "pid")) for h in hosts}
        perf = subprocess.Popen([sys.executable, "-m", "bench.perf", "--uri", cluster.url("n1"), "--queue", "s1",
                                 "--queue-args", STREAM, "--durable", "--persistent", "--size", "1024", "--confirm",
                                 "1000", "--prefetch", "300", "--time", str(a.time), "--json", str(root / "perf.json"),
                                 "--consumer-args", FIRST], stdout=subprocess.DEVNULL)
        time.sleep(WARMUP_S)
        workers = [psutil.Process(perf.pid), *psutil.Process(perf.pid).children(recursive=True)]
        profiled = [h for h in hosts if h.startswith("conn")] if a.profile else []
        for h in profiled:
            cluster.control("n1", h, "profile", {"path": str(root / f"{h}.prof")})
        before = {h: _cpu([pr]) for h, pr in procs.items()}
        perf_before, idle_before, t0 = _cpu(workers), psutil.cpu_times().idle, time.monotonic()
        time.sleep(max(1.0, a.time - 2 * WARMUP_S))
        dt = time.monotonic() - t0
        after = {h: _cpu([pr]) for h, pr in procs.items()}
        perf_cpu, idle = _cpu(workers) - perf_before, psutil.cpu_times().idle - idle_before
        for h in profiled:
            cluster.control("n1", h, "profile", {"path": None})
        perf.wait()
        summary = json.loads((root / "perf.json").read_text())["summary"]
        print(f"confirmed/s {summary['confirmed_rate']:.0f}  received/s {summary['consumed_rate']:.0f}")
        for h in hosts:
            print(f"{h:12} {100 * (after[h] - before[h]) / dt:5.1f}% of a core")
        print(f"{'bench.perf':12} {100 * perf_cpu / dt:5.1f}%; machine idle {100 * idle / dt / psutil.cpu_count():.1f}%")
        if profiled:
            print("profiles:", ", ".join(str(root / f"{h}.prof") for h in profiled))
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
