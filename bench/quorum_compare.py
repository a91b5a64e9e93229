"""Quorum queues over AMQP: warren against Debian's RabbitMQ 3.10, one broker after the other in
one run, with the same load tool (bench/perf) and the same settings as issue 12 asks.

Usage: .venv/bin/python -m bench.quorum_compare [--nodes 1|3] [--time S] [--repeat N]
       [--only warren|rabbitmq] [--phases flat,steady] [--rabbit-ports LO-HI] [--size BYTES] [--dir DIR]

Two phases, each on a fresh 1- or 3-node cluster of each broker (loopback ports; RabbitMQ's nodes
joined with rabbitmqctl join_cluster and one Erlang cookie), so neither phase inherits the other's
log, memory or backlog:
- throughput: one durable quorum queue declared through the first node (so its leader is there,
  client-local), 1 producer and 1 consumer on that node, persistent bodies of --size bytes,
  confirms 1000 outstanding, manual acks prefetch 300: confirmed/s, received/s and latency;
- latency: the same at a steady 1,000 msg/s: publish -> consume p50/p99.
Each round runs both phases (or those `--phases` names) on warren, then on RabbitMQ; the table
gives the median of the rounds and their spread (min-max). `--rabbit-ports` keeps RabbitMQ's AMQP
ports in a range (its distribution ports 1000 above), for a machine whose ports are shared out.
Prints; asserts nothing.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

from actors.runtime.ports import can_listen
from bench.compare_brokers import PY, ROOT, Rabbit
from scripts.local_cluster import Cluster

QUORUM = json.dumps({"x-queue-type": "quorum"})


class RabbitCluster:
    """`size` oracle nodes, the second and later joined to the first."""

    def __init__(self, root: Path, size: int, ports: range = range(20000, 45000), dist_offset: int = 20000) -> None:
        self.cookie = secrets.token_hex(16)
        self.dist_offset = dist_offset  # each node's Erlang distribution port is its AMQP port + this
        self.nodes = [Rabbit(f"rabbit{i}", _oracle_port(ports, dist_offset), root / f"rabbit{i}") for i in range(size)]

    @property
    def uri(self) -> str:
        return self.nodes[0].uri

    def start(self) -> None:
        os.environ["ORACLE_COOKIE"] = self.cookie
        try:
            for node in self.nodes:
                node.data_dir.mkdir(parents=True, exist_ok=True)
                os.environ["ORACLE_DIST_PORT"] = str(node.port + self.dist_offset)
                node.start()
        finally:
            del os.environ["ORACLE_COOKIE"]
            os.environ.pop("ORACLE_DIST_PORT", None)
        first = f"oracle{self.nodes[0].port}@localhost"
        for node in self.nodes[1:]:
            for args in (["stop_app"], ["join_cluster", first], ["start_app"]):
                self._ctl(node, *args)

    def _ctl(self, node: Rabbit, *args: str) -> None:
        env = dict(os.environ, HOME=str(node.data_dir), ERL_EPMD_ADDRESS="127.0.0.1")
        subprocess.run(["/usr/lib/rabbitmq/bin/rabbitmqctl", "-n", f"oracle{node.port}@localhost", *args],
                       env=env, check=True, stdout=subprocess.DEVNULL)

    def stop(self) -> None:
        for node in reversed(self.nodes):
            node.stop()


class WarrenCluster:
    def __init__(self, root: Path, size: int) -> None:
        self.cluster = Cluster(root / "warren", size)

    @property
    def uri(self) -> str:
        return self.cluster.url("n1")

    def start(self) -> None:
        self.cluster.start()

    def stop(self) -> None:
        self.cluster.stop()


def perf(uri: str, queue: str, out: Path, *extra: str, time_s: float, size: int, queue_args: str = QUORUM) -> dict:
    """One bench.perf run (a durable queue of `queue_args`, persistent bodies, confirms 1000,
    prefetch 300): its summary."""
    subprocess.run([PY, "-m", "bench.perf", "--uri", uri, "--queue", queue, "--queue-args", queue_args, "--durable",
                    "--persistent", "--size", str(size), "--confirm", "1000", "--prefetch", "300",
                    "--time", str(time_s), "--json", str(out), *extra],
                   cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())["summary"]


def alternate_rounds(repeat: int, only: str | None, measure_one: Callable[[str, type, int], dict],
                     rabbit: type = RabbitCluster) -> dict[str, list[dict]]:
    """`repeat` rounds of warren then RabbitMQ (or `only` one): measure_one(name, cluster class,
    round) per broker and round; the rows by broker."""
    rounds: dict[str, list[dict]] = {}
    for round_ in range(repeat):
        for name, make in (("warren", WarrenCluster), ("rabbitmq", rabbit)):
            if only in (None, name):
                print(f"== round {round_ + 1}/{repeat}: {name}", file=sys.stderr, flush=True)
                rounds.setdefault(name, []).append(measure_one(name, make, round_))
    return rounds


PHASES = {"flat": (), "steady": ("--rate", "1000")}  # bench.perf's arguments for each phase


def measure(make: Callable[[Path, int], WarrenCluster | RabbitCluster], root: Path, nodes: int, name: str,
            time_s: float, size: int, phases: tuple[str, ...] = tuple(PHASES)) -> dict:
    """The phases, each on a broker of its own."""
    summaries = {}
    for phase in phases:
        extra = PHASES[phase]
        broker = make(root / f"{name}-{phase}", nodes)
        broker.start()
        try:
            summaries[phase] = perf(broker.uri, f"qq-{phase}", root / f"{name}-{phase}.json", *extra,
                                    time_s=time_s, size=size)
        finally:
            broker.stop()
            shutil.rmtree(root / f"{name}-{phase}", ignore_errors=True)  # a flat-out run leaves GBs
    row = {}
    flat, steady = summaries.get("flat"), summaries.get("steady")
    if flat is not None:
        row.update({"confirmed/s": flat["confirmed_rate"], "received/s": flat["consumed_rate"],
                    "p50 ms (flat out)": flat["latency_ms"]["p50"], "p99 ms (flat out)": flat["latency_ms"]["p99"]})
    if steady is not None:
        row.update({"p50 ms @1k/s": steady["latency_ms"]["p50"], "p99 ms @1k/s": steady["latency_ms"]["p99"]})
    if flat is not None:  # published less consumed when the run ended: what the drain left (negative: redeliveries)
        row["unconsumed"] = flat["published"] - flat["consumed"]
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nodes", type=int, default=1)
    p.add_argument("--time", type=float, default=20.0)
    p.add_argument("--repeat", type=int, default=1, help="rounds; the table gives their median (min-max)")
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--only", choices=("warren", "rabbitmq"))
    p.add_argument("--phases", default=",".join(PHASES), help="which phases, of: " + ", ".join(PHASES))
    p.add_argument("--rabbit-ports", help="LO-HI: RabbitMQ's AMQP ports (distribution ports 1000 above)")
    p.add_argument("--dir", type=Path)
    a = p.parse_args(argv)
    phases = tuple(a.phases.split(","))
    unknown = [name for name in phases if name not in PHASES]
    if unknown:
        p.error(f"unknown phase {unknown[0]!r}")
    rabbit: Callable[[Path, int], RabbitCluster] = RabbitCluster
    if a.rabbit_ports:
        lo, hi = (int(x) for x in a.rabbit_ports.split("-"))
        rabbit = functools.partial(_ranged_rabbits, ports=range(lo, hi + 1))
    root = a.dir or Path(tempfile.mkdtemp(prefix="quorum-compare-"))
    rounds = alternate_rounds(a.repeat, a.only, lambda name, make, round_: measure(
        make, root / f"r{round_}", a.nodes, name, a.time, a.size, phases), rabbit)
    keys = list(next(iter(rounds.values()))[0])
    print(f"quorum queue, {a.nodes} node(s), {a.size} B persistent, confirms 1000, prefetch 300, {a.time:.0f} s, "
          f"median of {a.repeat} round(s)" + (" (min-max)" if a.repeat > 1 else ""))
    width = 30 if a.repeat > 1 else 12
    print(f"{'':20}" + "".join(f"{name:>{width}}" for name in rounds))
    for key in keys:
        print(f"{key:20}" + "".join(f"{_spread([r[key] for r in rounds[name]]):>{width}}" for name in rounds))
    (root / "quorum_compare.json").write_text(json.dumps(rounds, indent=1))
    return 0


def _ranged_rabbits(root: Path, size: int, ports: range) -> RabbitCluster:
    return RabbitCluster(root, size, ports, 1000)


def _oracle_port(ports: range, dist_offset: int = 20000) -> int:
    """A free port of `ports` whose distribution port (+dist_offset) is free too (and below 65536)."""
    while True:
        port = ports.start + secrets.randbelow(len(ports))
        if can_listen(port, "127.0.0.1") and can_listen(port + dist_offset, "127.0.0.1"):
            return port


def _spread(values: list) -> str:
    """median (min-max) of the rounds' figures."""
    known = [v for v in values if v is not None]
    if not known:
        return "-"
    mid = _fmt(statistics.median(known))
    return mid if len(known) == 1 else f"{mid} ({_fmt(min(known))}-{_fmt(max(known))})"


def _fmt(value: float) -> str:
    return f"{value:.2f}" if isinstance(value, float) else str(value)


if __name__ == "__main__":
    sys.exit(main())
