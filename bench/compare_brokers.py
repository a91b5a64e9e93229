"""Brokers for the comparison runs (bench/durable_compare.py, bench/compare_locust.py): a fresh warren
node or a fresh Debian RabbitMQ (scripts/rabbitmq_oracle) in a directory of its own on a loopback
port, with the memory and disk its processes use."""
from __future__ import annotations

import argparse
import signal
from collections.abc import Iterator
from contextlib import contextmanager
import subprocess
import sys
import time
from pathlib import Path

import psutil

from actors.runtime.ports import port_open, stable_port

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
start_timeout_s = 90.0


class Broker:
    def __init__(self, name: str, port: int, data_dir: Path) -> None:
        self.name, self.port, self.data_dir = name, port, data_dir

    @property
    def uri(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}/%2F"

    def processes(self) -> list[psutil.Process]:
        raise NotImplementedError

    def memory(self) -> tuple[int, int]:
        """(RSS, PSS) summed over the broker's processes. RSS counts the pages forked processes
        share once per process; PSS splits them, so its sum is what the broker really holds."""
        rss = pss = 0
        for p in self.processes():
            try:
                m = p.memory_full_info()
            except psutil.Error:
                continue
            rss += m.rss
            pss += getattr(m, "pss", m.rss)
        return rss, pss

    def disk_bytes(self) -> int:
        return sum(f.stat().st_size for f in self.data_dir.rglob("*") if f.is_file())


class Warren(Broker):
    extra_args: tuple[str, ...] = ()  # more scripts.node_main flags

    def start(self) -> None:
        (self.data_dir / "ready").unlink(missing_ok=True)
        self.proc = subprocess.Popen(
            [PY, "-m", "scripts.node_main", "--port", str(self.port), "--data-dir", str(self.data_dir),
             "--name", "bench", "--cluster-port", str(stable_port()), *self.extra_args], cwd=ROOT, stdout=open(self.data_dir.parent / "warren.log", "ab"),
            stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + start_timeout_s
        while not ((self.data_dir / "ready").exists() and port_open(self.port)):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("warren did not start; see warren.log")
            time.sleep(0.1)

    def processes(self) -> list[psutil.Process]:
        return by_cmdline(str(self.data_dir))

    def disk_bytes(self) -> int:  # message data only: the stores and the queue indexes
        return sum(f.stat().st_size for d in ("msg_stores", "queues") for f in (self.data_dir / d).rglob("*")
                   if f.is_file())

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            pass
        left = self.processes()
        for p in left:
            p.kill()
        psutil.wait_procs(left, timeout=10)


class Rabbit(Broker):
    def start(self) -> None:
        subprocess.run([str(ROOT / "scripts" / "rabbitmq_oracle"), "start", str(self.port), str(self.data_dir)],
                       check=True, stdout=subprocess.DEVNULL)

    def processes(self) -> list[psutil.Process]:
        return by_cmdline(str(self.data_dir))  # beam runs with -home DIR

    def disk_bytes(self) -> int:
        return sum(f.stat().st_size for f in (self.data_dir / "mnesia").rglob("*") if f.is_file())

    def stop(self) -> None:
        subprocess.run([str(ROOT / "scripts" / "rabbitmq_oracle"), "stop", str(self.data_dir)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def add_broker_options(p: argparse.ArgumentParser, warren_port: int, rabbit_port: int) -> None:
    """--warren-port, --rabbit-port and --no-rabbitmq, with this tool's default ports (each
    comparison has its own pair, so two of them can run side by side)."""
    p.add_argument("--warren-port", type=int, default=warren_port)
    p.add_argument("--rabbit-port", type=int, default=rabbit_port)
    p.add_argument("--no-rabbitmq", action="store_true")


@contextmanager
def running(brokers: list[Broker]) -> Iterator[list[Broker]]:
    """Start every broker in its fresh data dir; stop those that started on the way out."""
    started: list[Broker] = []
    try:
        for broker in brokers:
            broker.data_dir.mkdir(parents=True)
            broker.start()
            started.append(broker)
        yield brokers
    finally:
        for broker in started:
            broker.stop()


def by_cmdline(marker: str) -> list[psutil.Process]:
    """Processes whose command line names `marker`, and their children (the Thespian admin and
    the host processes leave the node's process tree but keep its command line)."""
    out = {}
    for p in psutil.process_iter(["cmdline"]):
        if marker in " ".join(p.info["cmdline"] or ()):
            out[p.pid] = p
            try:
                out.update({c.pid: c for c in p.children(recursive=True)})
            except psutil.Error:
                pass
    return list(out.values())
