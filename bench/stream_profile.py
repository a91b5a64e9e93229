"""Where a stream's CPU goes: stream_compare's throughput phase (1 producer, 1 consumer from
"first", 1 KiB persistent, confirms 1000, prefetch 300) on a fresh 1- or 3-node cluster, with each
host's CPU share (every node's) and the perf processes' over the middle of the run, per second and
per confirmed message, the fdatasyncs each node's stream member ran, and with --profile a cProfile
of each connection host's loop (the `profile` control op) written to the run's directory, or with
--py-spy a py-spy record (flat, by function) of the hosts named there.

Usage: .venv/bin/python -m bench.stream_profile [--nodes 1|3] [--time S] [--profile] [--py-spy HOST,...]
Run it from the tree to measure (the nodes start from the tree this module is in). Prints; asserts
nothing. The profilers slow what they sample (cProfile about 2x, py-spy a little): compare rates
only between runs without them.
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

import psutil

from bench.stream_compare import FIRST, STREAM
from scripts.local_cluster import Cluster

WARMUP_S = 3.0  # before the CPU is sampled: connections made, the stream declared
PY_SPY = Path(sys.executable).parent / "py-spy"


def _cpu(procs: list[psutil.Process]) -> float:
    total = 0.0
    for p in procs:
        try:
            total += sum(p.cpu_times()[:2])
        except psutil.Error:
            pass
    return total


def _threads(proc: psutil.Process) -> dict[str, float]:
    """CPU seconds by kind of thread: ZeroMQ's own (its io thread: CURVE between nodes, the TCP
    writes), the busiest Python thread (the host's event loop) and the other Python threads
    (syncing threads, pyzmq's garbage thread)."""
    out = {"loop": 0.0, "zmq": 0.0, "other": 0.0}
    py = []
    try:
        for t in proc.threads():
            try:
                comm = Path(f"/proc/{proc.pid}/task/{t.id}/comm").read_text().strip()
            except OSError:
                continue
            if comm.startswith("ZMQ"):
                out["zmq"] += t.user_time + t.system_time
            else:
                py.append((t.id, t.user_time + t.system_time))
    except psutil.Error:
        return out
    for tid, cpu in py:
        out[f"t{tid}"] = cpu
    return out


def _split(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """loop / zmq / other CPU seconds between two `_threads` samples (the loop: the Python thread
    that used the most in between)."""
    deltas = {k: after[k] - before.get(k, 0.0) for k in after if k.startswith("t")}
    loop = max(deltas, key=deltas.get, default=None)
    return {"loop": deltas.get(loop, 0.0) if loop else 0.0, "zmq": after["zmq"] - before["zmq"],
            "other": sum(v for k, v in deltas.items() if k != loop)}


def _disk_writes() -> int:
    counters = psutil.disk_io_counters()
    return counters.write_count if counters else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nodes", type=int, default=1)
    p.add_argument("--time", type=float, default=14.0)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--py-spy", default="", help="node/host names to sample, e.g. n1/conn0,n2/conn0")
    p.add_argument("--py-spy-args", default="", help="more py-spy record options, e.g. '--gil' or '--native'")
    a = p.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="stream-profile-"))
    cluster = Cluster(root, a.nodes).start()
    try:
        names = cluster.names
        procs = {f"{n}/{h}": psutil.Process(cluster.control(n, h, "pid")) for n in names for h in cluster.hosts(n)}
        perf = subprocess.Popen([sys.executable, "-m", "bench.perf", "--uri", cluster.url("n1"), "--queue", "s1",
                                 "--queue-args", STREAM, "--durable", "--persistent", "--size", "1024", "--confirm",
                                 "1000", "--prefetch", "300", "--time", str(a.time), "--json", str(root / "perf.json"),
                                 "--consumer-args", FIRST], stdout=subprocess.DEVNULL)
        time.sleep(WARMUP_S)
        workers = [psutil.Process(perf.pid), *psutil.Process(perf.pid).children(recursive=True)]
        profiled = [h for h in cluster.hosts("n1") if h.startswith("conn")] if a.profile else []
        for h in profiled:
            cluster.control("n1", h, "profile", {"path": str(root / f"{h}.prof")})
        window = max(1.0, a.time - 2 * WARMUP_S)
        spies = []
        for key in filter(None, a.py_spy.split(",")):
            out = root / f"{key.replace('/', '-')}.spy.txt"
            spies.append((out, subprocess.Popen(
                [str(PY_SPY), "record", "--pid", str(procs[key].pid), "--rate", "200", "--duration",
                 str(int(window)), "--format", "raw", "--output", str(out),
                 *a.py_spy_args.split(), *([] if "--native" in a.py_spy_args else ["--nonblocking"])],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
        before = {h: _cpu([pr]) for h, pr in procs.items()}
        threads_before = {h: _threads(pr) for h, pr in procs.items()}
        perf_before, idle_before, t0 = _cpu(workers), psutil.cpu_times().idle, time.monotonic()
        writes_before = _disk_writes()
        time.sleep(window)
        dt = time.monotonic() - t0
        after = {h: _cpu([pr]) for h, pr in procs.items()}
        split = {h: _split(threads_before[h], _threads(pr)) for h, pr in procs.items()}
        perf_cpu, idle = _cpu(workers) - perf_before, psutil.cpu_times().idle - idle_before
        writes = _disk_writes() - writes_before
        for h in profiled:
            cluster.control("n1", h, "profile", {"path": None})
        perf.wait()
        for _, spy in spies:
            spy.wait()
        summary = json.loads((root / "perf.json").read_text())["summary"]
        rate = summary["confirmed_rate"]
        print(f"confirmed/s {rate:.0f}  received/s {summary['consumed_rate']:.0f}  "
              f"p50 {summary['latency_ms']['p50']:.0f} ms")
        for h in procs:
            share = (after[h] - before[h]) / dt
            if share < 0.005:
                continue
            parts = "  ".join(f"{k} {100 * v / dt:4.1f}%" for k, v in split[h].items())
            print(f"{h:14} {100 * share:5.1f}% of a core  {1e6 * share / rate if rate else 0:6.2f} µs/msg  ({parts})")
        total = sum(after[h] - before[h] for h in procs) / dt
        chunks = sum(f.stat().st_size for f in (root / "n1" / "streams").glob("*/*/*.index")) // 24
        print(f"{'warren, all':14} {100 * total:5.1f}% of a core  {1e6 * total / rate if rate else 0:6.2f} µs/msg;"
              f" {summary['confirmed'] / chunks if chunks else 0:.0f} messages per chunk")
        print(f"{'bench.perf':14} {100 * perf_cpu / dt:5.1f}%; machine idle {100 * idle / dt / psutil.cpu_count():.1f}%;"
              f" disk writes {writes / dt:.0f}/s")
        if profiled:
            print("profiles:", ", ".join(str(root / f"{h}.prof") for h in profiled))
        for out, _ in spies:
            print("py-spy:", out)
    finally:
        cluster.stop()
        for name in cluster.names:  # the logs are GBs; what the profilers wrote stays
            shutil.rmtree(root / name, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
