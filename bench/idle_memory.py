"""Idle memory of a warren node and of Debian's RabbitMQ, side by side: per process RSS, PSS and USS,
and the totals. Prints; not a test.

    .venv/bin/python -m bench.idle_memory [--settle 10] [--no-rabbitmq]

Both brokers start fresh on loopback ports in a temporary directory (bench/compare_brokers.py),
warren twice (with its management and Prometheus listeners on, as by default, on free ports, and
with them off, as the RabbitMQ here runs without its management plugin), sit idle for `--settle` seconds, are measured, and are stopped. RSS summed over processes counts a page
they share once per process; PSS charges each process its share, so the PSS total counts it once
(what the node really holds); USS is what only that process holds. The last lines say what
importing a host's code costs a fresh interpreter (USS and tracemalloc), the part that warren's
main process imports once before it forks everything else (actors/runtime/node_process.py).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from actors.runtime.client import control
from actors.runtime.ports import stable_port
from bench.compare_brokers import ROOT, Broker, Rabbit, Warren

MIB = 1 << 20
MANAGEMENT_OFF = ("--management-port", "0", "--prometheus-port", "0")
USS_PROBE = """
import psutil
me = psutil.Process()
before = me.memory_full_info().uss
import actors.hosts
print(me.memory_full_info().uss - before)
"""
TRACED_PROBE = """
import tracemalloc
tracemalloc.start()
import actors.hosts
print(tracemalloc.get_traced_memory()[0])
"""


def rows(broker: Broker, names: dict[int, str]) -> list[tuple[str, int, int, int, int]]:
    """(name, pid, rss, pss, uss) of each process of `broker`."""
    out = []
    for p in sorted(broker.processes(), key=lambda p: p.pid):
        try:
            m = p.memory_full_info()
            out.append((names.get(p.pid) or p.name(), p.pid, m.rss, m.pss, m.uss))
        except psutil.Error:
            continue  # exited meanwhile
    return out


def warren_names(broker: Warren) -> dict[int, str]:
    """The node's own names for its processes (main, admin, logger, supervisor, hosts)."""
    admin_port = int((broker.data_dir / "admin_port").read_text())
    status = control(admin_port, "$supervisor", "node_status", {})
    return {p["pid"]: p["name"] for p in status["processes"]}


def print_table(broker: str, table: list[tuple[str, int, int, int, int]]) -> None:
    print(f"{broker:14} {'process':15} {'pid':>7} {'RSS MiB':>8} {'PSS MiB':>8} {'USS MiB':>8}")
    for name, pid, rss, pss, uss in table:
        print(f"{broker:14} {name:15} {pid:7} {rss / MIB:8.1f} {pss / MIB:8.1f} {uss / MIB:8.1f}")
    rss, pss, uss = (sum(row[i] for row in table) for i in (2, 3, 4))
    print(f"{broker:14} {'total':15} {len(table):7} {rss / MIB:8.1f} {pss / MIB:8.1f} {uss / MIB:8.1f}\n")


def import_cost() -> tuple[int, int]:
    """(USS, tracemalloc bytes) a fresh interpreter gains by importing the hosts' code (each in a
    fresh interpreter of its own: tracing costs memory too)."""
    uss, traced = (int(subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True,
                                      check=True).stdout) for probe in (USS_PROBE, TRACED_PROBE))
    return uss, traced


def rabbit_port() -> int:
    """A free port whose RabbitMQ distribution port (+20000, scripts/rabbitmq_oracle) exists too."""
    while True:
        port = stable_port()
        if port + 20000 <= 65535:
            return port


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--settle", type=float, default=10.0, help="seconds idle before measuring")
    p.add_argument("--no-rabbitmq", action="store_true")
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="warren-idle-") as work:
        brokers: list[tuple[Broker, bool]] = []
        management_on = ("--management-port", str(stable_port()), "--prometheus-port", str(stable_port()))
        for name, extra in (("warren", management_on), ("warren-no-mgmt", MANAGEMENT_OFF)):
            # directories whose names are not each other's prefix: processes are found by them
            warren = Warren(name, stable_port(), Path(work) / f"{len(brokers)}-{name}")
            warren.extra_args = extra
            warren.data_dir.mkdir()
            brokers.append((warren, True))
        if not a.no_rabbitmq:
            brokers.append((Rabbit("rabbitmq", rabbit_port(), Path(work) / "rabbitmq"), False))
        started = []
        try:
            for broker, _ in brokers:
                broker.start()
                started.append(broker)
            time.sleep(a.settle)  # idle on purpose: this measures a broker at rest
            for broker, is_warren in brokers:
                print_table(broker.name, rows(broker, warren_names(broker) if is_warren else {}))
        finally:
            for broker in reversed(started):
                broker.stop()
    uss, traced = import_cost()
    print(f"importing actors.hosts in a fresh interpreter: +{uss / MIB:.1f} MiB USS, "
          f"{traced / MIB:.1f} MiB traced by tracemalloc")


if __name__ == "__main__":
    main()
