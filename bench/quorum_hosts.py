"""Quorum queues against the node's processes: where the CPU of a quorum message goes, per process
kind, flat out and at a steady rate, so one can tell which process saturates first as cores grow
(issue 36 item 1): with `--quorum-hosts 1` one quorum host holds every member of the node and the
node's WAL; with `--quorum-hosts 2` the members are spread over two quorum hosts and the WAL has a
process of its own (actors/raft/wal_host.py).

    .venv/bin/python -m bench.quorum_hosts [--queues 8] [--time 20] [--rate 1000] [--size 1024]
        [--quorum-hosts 1|2] [--dir DIR]

One node (every queue's members local, so nothing but this node's processes is measured), `--queues`
durable quorum queues, each with one bench/perf producer (persistent bodies, confirms 1000
outstanding) and one consumer (manual acks, prefetch 300), all at once. Two phases, each on a fresh
node: flat out, then `--rate` msg/s in all (spread over the queues). For each phase: confirmed/s
and consumed/s, publish->consume p50/p99, and the CPU time (user+system) of each process of the
node over the measured window (after perf's warm-up), as µs per message (per message confirmed)
and as cores used, grouped by kind: the connection hosts (conn*: readers, channels), the quorum
hosts (their members and, with one, the node's WAL in the same process), the WAL's own process
(with several quorum hosts), the node host, the rest (main,
Thespian's admin and logger, the supervisor); and the WAL's syncs/s and entries per sync. The
load tool's own CPU is given too: on a small machine it takes cores the node would use.
Prints figures; asserts nothing.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import psutil

from actors.runtime.client import control
from bench.compare_brokers import PY, ROOT
from scripts.local_cluster import Node, start_node
from tests.integration.nodes import serving_processes

QUORUM = json.dumps({"x-queue-type": "quorum"})
warmup_s = 4.0


def kind(name: str) -> str:
    if name.startswith("conn"):
        return "conn hosts"
    if name.startswith("quorum"):
        return "quorum hosts"
    if name in ("wal", "node"):
        return f"{name} host"
    return "rest"


def node_cpu(node: Node) -> dict[str, float]:
    """CPU seconds so far of each of the node's processes, by the name `warrenctl status` gives it."""
    out = {}
    for name, p in (serving_processes(node) or {}).items():
        try:
            t = psutil.Process(p["pid"]).cpu_times()
            out[name] = t.user + t.system
        except psutil.Error:
            pass
    return out


def wal_stats(node: Node, quorum_hosts: int) -> dict:
    """The WAL's syncs, the entries the members had written, and the share of the last 5 s the
    WAL spent writing and syncing (with one quorum host its loop spends that blocked: the WAL
    syncs in the members' process; with several, the WAL's own process does)."""
    port = int((node.data_dir / "admin_port").read_text())
    hosts = ["quorum"] + [f"quorum{i}" for i in range(1, quorum_hosts)]
    entries = sum(control(port, h, "wal_stats", {})["entries"] for h in hosts)
    wal = "quorum" if quorum_hosts == 1 else "wal"
    links = control(port, wal, "flow_links", {})
    share = next((link["flow_share"] for link in links if link["kind"] == "wal"), 0.0)
    return {"syncs": control(port, wal, "wal_stats", {})["syncs"], "entries": entries, "syncing_share": share}


def children_cpu(procs: list[subprocess.Popen]) -> float:
    """CPU seconds so far of the perf processes and their workers."""
    total = 0.0
    for proc in procs:
        try:
            top = psutil.Process(proc.pid)
            for p in [top, *top.children(recursive=True)]:
                t = p.cpu_times()
                total += t.user + t.system
        except psutil.Error:
            pass
    return total


def phase(root: Path, queues: int, time_s: float, rate_total: float, size: int, quorum_hosts: int) -> dict:
    conf = root / "n1.conf"
    conf.write_text(f"quorum_hosts = {quorum_hosts}\n")
    node = start_node(root / "n1", "--config", str(conf))
    try:
        extra = ["--rate", str(rate_total / queues)] if rate_total else []
        outs = [root / f"perf{i}.json" for i in range(queues)]
        procs = [subprocess.Popen([PY, "-m", "bench.perf", "--uri", node.url, "--queue", f"qh-{i}",
                                   "--queue-args", QUORUM, "--durable", "--persistent", "--size", str(size),
                                   "--confirm", "1000", "--prefetch", "300", "--time", str(time_s),
                                   "--warmup", str(warmup_s), "--json", str(out), *extra],
                                  cwd=ROOT, stdout=subprocess.DEVNULL)
                 for i, out in enumerate(outs)]
        marks: dict[str, tuple] = {}

        def mark(at: str) -> None:
            marks[at] = (time.monotonic(), node_cpu(node), wal_stats(node, quorum_hosts), children_cpu(procs))
        timers = [threading.Timer(warmup_s + 1, mark, ("start",)), threading.Timer(time_s - 0.5, mark, ("end",))]
        for t in timers:
            t.start()
        for proc in procs:
            proc.wait()
        for t in timers:
            t.join()
        summaries = [json.loads(out.read_text())["summary"] for out in outs]
    finally:
        node.stop()
    (t0, cpu0, wal0, load0), (t1, cpu1, wal1, load1) = marks["start"], marks["end"]
    span = t1 - t0
    confirmed = sum(s["confirmed_rate"] for s in summaries)
    consumed = sum(s["consumed_rate"] for s in summaries)
    messages = max(confirmed * span, 1.0)
    by_kind: dict[str, float] = {}
    for name, seconds in cpu1.items():
        by_kind[kind(name)] = by_kind.get(kind(name), 0.0) + seconds - cpu0.get(name, seconds)
    syncs = wal1["syncs"] - wal0["syncs"]
    return {"confirmed/s": round(confirmed), "consumed/s": round(consumed),
            "p50 ms": max(s["latency_ms"]["p50"] or 0 for s in summaries),
            "p99 ms": max(s["latency_ms"]["p99"] or 0 for s in summaries),
            "cpu us/msg": {k: round(v / messages * 1e6, 1) for k, v in sorted(by_kind.items())},
            "cores": {k: round(v / span, 2) for k, v in sorted(by_kind.items())},
            "load tool cores": round((load1 - load0) / span, 2),
            "wal syncs/s": round(syncs / span), "entries/sync": round((wal1["entries"] - wal0["entries"]) / max(syncs, 1), 1),
            "wal syncing share": round(wal1["syncing_share"], 2)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--queues", type=int, default=8)
    p.add_argument("--time", type=float, default=20.0, help="seconds of each phase")
    p.add_argument("--rate", type=float, default=1000.0, help="msg/s in all, of the steady phase")
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--quorum-hosts", type=int, default=1, choices=(1, 2))
    p.add_argument("--dir", type=Path, default=None)
    a = p.parse_args(argv)
    root = a.dir or Path(tempfile.mkdtemp(prefix="warren-qhosts-"))
    try:
        for label, rate in (("flat out", 0.0), (f"{a.rate:g} msg/s", a.rate)):
            shutil.rmtree(root / "n1", ignore_errors=True)
            figures = phase(root, a.queues, a.time, rate, a.size, a.quorum_hosts)
            print(f"{a.queues} quorum queues, {a.quorum_hosts} quorum host(s), {label}: {figures['confirmed/s']} confirmed/s, "
                  f"{figures['consumed/s']} consumed/s, p50 {figures['p50 ms']} ms, p99 {figures['p99 ms']} ms, "
                  f"WAL {figures['wal syncs/s']} syncs/s of {figures['entries/sync']} entries, writing and syncing "
                  f"{figures['wal syncing share']:.0%} of the time")
            for k, us in figures["cpu us/msg"].items():
                print(f"    {k:12s} {us:8.1f} µs/msg  {figures['cores'][k]:5.2f} cores")
            print(f"    {'load tool':12s} {'':8s}         {figures['load tool cores']:5.2f} cores")
    finally:
        if a.dir is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
