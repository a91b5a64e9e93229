"""Stream queues over AMQP 0-9-1: warren against Debian's RabbitMQ 3.10, one broker after the
other, with the same load tool (bench/perf) and the same settings (issue 39).

Usage: .venv/bin/python -m bench.stream_compare [--nodes 1|3] [--time S] [--backlog N]
       [--read-time S] [--repeat N] [--only warren|rabbitmq] [--size BYTES] [--dir DIR]

Two phases, each on a fresh 1- or 3-node cluster of each broker (bench/quorum_compare.py's), so
neither inherits the other's log:
- throughput: one stream declared through the first node, 1 producer and 1 consumer on that node
  reading from "first", --size byte persistent bodies, confirms 1000 outstanding, prefetch 300:
  confirmed/s, received/s, latency;
- backlog: --backlog messages published first (no consumer; perf runs of 10 s until the
  confirmed total reaches it), then one consumer from "first" for --read-time seconds (shorter
  than the backlog lasts, so it reads the backlog the whole time): received/s, and the broker's
  memory (RSS, and PSS, summed over every process of every node) at the end of the read.
On 3 nodes the stream has a member on every node on both brokers (x-initial-cluster-size's
default), its leader on the first node (client-local), where the producer and the consumer
connect: a publish is confirmed once two of the three members have it on disk. RabbitMQ's nodes
listen on AMQP ports in 30000-30999, their distribution ports 1000 above (below the kernel's
ephemeral range, where a client's port once took one). Prints; asserts nothing.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Callable

from bench.compare_brokers import by_cmdline
from bench import quorum_compare
from bench.quorum_compare import RabbitCluster, WarrenCluster, _spread, alternate_rounds

RABBIT_PORTS = range(30000, 31000)  # AMQP; the distribution ports are 1000 above (all below the ephemeral range)


class Rabbits(RabbitCluster):
    """quorum_compare's RabbitMQ cluster on ports in 30000-32000."""

    def __init__(self, root: Path, size: int) -> None:
        super().__init__(root, size, RABBIT_PORTS, 1000)

STREAM = json.dumps({"x-queue-type": "stream"})
FIRST = json.dumps({"x-stream-offset": "first"})
PUBLISH_ROUND_S = 10.0


def perf(uri: str, queue: str, out: Path, *extra: str, time_s: float, size: int) -> dict:
    """bench.perf on a stream, its consumers reading from "first"."""
    return quorum_compare.perf(uri, queue, out, "--consumer-args", FIRST, *extra, time_s=time_s, size=size,
                               queue_args=STREAM)


def memory_bytes(root: Path) -> tuple[int, int]:
    """RSS and PSS summed over the broker's processes. RSS counts the pages a node's processes
    share (forks of one interpreter) once per process, so for warren's eight it is mostly the
    interpreters' common pages; PSS splits each shared page among its sharers."""
    rss = pss = 0
    for p in by_cmdline(str(root)):
        try:
            m = p.memory_full_info()
        except Exception:  # a process that ended meanwhile
            continue
        rss, pss = rss + m.rss, pss + m.pss
    return rss, pss


def measure(make: Callable[[Path, int], WarrenCluster | RabbitCluster], root: Path, nodes: int, name: str,
            a: argparse.Namespace) -> dict:
    out: dict = {}
    broker = make(root / f"{name}-flat", nodes)
    broker.start()
    try:
        flat = perf(broker.uri, "s-flat", root / f"{name}-flat.json", time_s=a.time, size=a.size)
    finally:
        broker.stop()
        shutil.rmtree(root / f"{name}-flat", ignore_errors=True)
    out.update({"confirmed/s": flat["confirmed_rate"], "received/s": flat["consumed_rate"],
                "p50 ms": flat["latency_ms"]["p50"], "p99 ms": flat["latency_ms"]["p99"]})
    where = root / f"{name}-backlog"
    broker = make(where, nodes)
    broker.start()
    try:
        published, i = 0, 0
        while published < a.backlog:
            s = perf(broker.uri, "s-backlog", root / f"{name}-fill{i}.json", "--consumers", "0",
                     time_s=PUBLISH_ROUND_S, size=a.size)
            published += s["confirmed"]
            i += 1
        read = perf(broker.uri, "s-backlog", root / f"{name}-read.json", "--producers", "0", "--drain", "0",
                    time_s=a.read_time, size=a.size)
        rss, pss = memory_bytes(where)
    finally:
        broker.stop()
        shutil.rmtree(where, ignore_errors=True)
    out.update({"backlog": published, "backlog read/s": read["consumed_rate"],
                "memory MiB (reading)": round(rss / 2**20, 1), "PSS MiB (reading)": round(pss / 2**20, 1)})
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nodes", type=int, default=1)
    p.add_argument("--time", type=float, default=20.0)
    p.add_argument("--backlog", type=int, default=1_000_000)
    p.add_argument("--read-time", type=float, default=10.0)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--only", choices=("warren", "rabbitmq"))
    p.add_argument("--dir", type=Path)
    a = p.parse_args(argv)
    root = a.dir or Path(tempfile.mkdtemp(prefix="stream-compare-"))
    rounds = alternate_rounds(a.repeat, a.only, lambda name, make, round_: measure(
        make, root / f"r{round_}", a.nodes, name, a), Rabbits)
    keys = list(next(iter(rounds.values()))[0])
    print(f"stream, {a.nodes} node(s), {a.size} B persistent, confirms 1000, prefetch 300, consumer from first, "
          f"{a.time:.0f} s; backlog read {a.read_time:.0f} s; median of {a.repeat} round(s)"
          + (" (min-max)" if a.repeat > 1 else ""))
    width = 30 if a.repeat > 1 else 14
    print(f"{'':22}" + "".join(f"{name:>{width}}" for name in rounds))
    for key in keys:
        print(f"{key:22}" + "".join(f"{_spread([r[key] for r in rounds[name]]):>{width}}" for name in rounds))
    if len(rounds) == 2:
        w, r = (_median(rounds[n], "confirmed/s") for n in ("warren", "rabbitmq"))
        print(f"{'confirmed/s ratio':22}{w / r if r else float('nan'):>{width}.2f}")
    (root / "stream_compare.json").write_text(json.dumps(rounds, indent=1))
    return 0


def _median(rows: list[dict], key: str) -> float:
    values = sorted(r[key] for r in rows)
    return values[len(values) // 2]


if __name__ == "__main__":
    sys.exit(main())
