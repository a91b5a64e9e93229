"""Where a warren node's CPU goes per message: run bench.perf against a running node, measure each
host process's CPU time (psutil) over the run, and sample each busy host with py-spy.

    python -m bench.profile_node --data-dir DIR --port PORT [--spy-seconds 8] -- <bench.perf options>

Prints, per host, CPU seconds and CPU microseconds per consumed message, then the functions with the
most non-idle py-spy samples in each busy host. A benchmark: it prints figures, it asserts nothing.
"""
from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil

from actors.runtime.client import control

IDLE_FRAMES = ("select (selectors.py", "GarbageCollectorThread.run", "thespian/", "_bootstrap", "threading.py",
               "wait (threading", "run_forever", "_run_once",
               "lifeline.py")  # every process's lifeline thread, blocked on its pipe
busy_share_min = 0.05  # hosts using less CPU than this share of the run are not sampled


def host_pids(admin_port: int, hosts: list[str]) -> dict[str, int]:
    return {h: control(admin_port, h, "pid", {}) for h in hosts}


def top_functions(raw: Path, n: int = 12) -> list[tuple[float, str]]:
    self_time: collections.Counter = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        if any(idle in frames[-1] for idle in IDLE_FRAMES):
            continue
        total += int(count)
        self_time[frames[-1]] += int(count)
    return [(100 * c / total, f) for f, c in self_time.most_common(n)] if total else []


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", type=Path, required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--hosts", default="node,conn0,conn1")
    p.add_argument("--spy-seconds", type=float, default=8.0)
    p.add_argument("perf", nargs=argparse.REMAINDER, help="options for bench.perf (after --)")
    a = p.parse_args(argv)
    admin = int((a.data_dir / "admin_port").read_text())
    pids = host_pids(admin, a.hosts.split(","))
    procs = {h: psutil.Process(pid) for h, pid in pids.items()}
    before = {h: sum(pr.cpu_times()[:2]) for h, pr in procs.items()}
    out = Path(tempfile.mkdtemp(prefix="warren-profile-"))
    perf_args = [x for x in a.perf if x != "--"]
    perf = subprocess.Popen([sys.executable, "-m", "bench.perf", "--uri",
                             f"amqp://guest:guest@127.0.0.1:{a.port}/%2F", "--json", str(out / "perf.json"),
                             *perf_args], stdout=subprocess.DEVNULL)
    spy_bin = Path(sys.executable).parent / "py-spy"
    spies = [subprocess.Popen([str(spy_bin), "record", "-p", str(pid), "-d", str(int(a.spy_seconds)), "-r", "250",
                               "-f", "raw", "-o", str(out / f"{h}.txt")], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for h, pid in pids.items()]
    perf.wait()
    for s in spies:
        s.wait()
    after = {h: sum(pr.cpu_times()[:2]) for h, pr in procs.items()}
    summary = json.loads((out / "perf.json").read_text())["summary"]
    consumed = summary["consumed"] or 1
    total_cpu = sum(after[h] - before[h] for h in procs)
    print(f"messages consumed: {consumed}; node CPU {total_cpu:.2f} s = {1e6 * total_cpu / consumed:.1f} µs/msg")
    print("| host | CPU s | µs/msg |")
    print("|---|---|---|")
    for h in procs:
        cpu = after[h] - before[h]
        print(f"| {h} | {cpu:.2f} | {1e6 * cpu / consumed:.1f} |")
    for h in procs:
        if (after[h] - before[h]) < busy_share_min * total_cpu or not (out / f"{h}.txt").exists():
            continue
        print(f"\n{h}: top functions by non-idle samples")
        for share, frame in top_functions(out / f"{h}.txt"):
            print(f"  {share:5.1f}%  {frame[:120]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
