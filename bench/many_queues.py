"""Many queues: warren against Debian's RabbitMQ 3.10 on the same machine, one broker after the
other, each a fresh cluster of `--nodes` nodes (RabbitMQ's joined with rabbitmqctl join_cluster, as
bench/quorum_compare.py does). Prints a table; asserts nothing.

    .venv/bin/python -m bench.many_queues [--nodes 1|3] [--classic 10000] [--quorum 2000]
        [--channels 8] [--idle 30] [--only warren|rabbitmq] [--skip restart,delete,...] [--dir DIR]

What each broker goes through, in this order:
- declare: `--classic` durable classic queues, then `--quorum` quorum queues, over `--channels`
  channels (one connection and one process each, the connections spread over the nodes in turn):
  queues per second, from the first declare to the last declare-ok;
- memory per idle queue: the PSS summed over every process of every node (bench/idle_memory.py's
  measure: the pages forked processes share counted once), after a settle, less the same before
  the declares, divided by the queues (classic and quorum apart: each after its own declares);
- idle CPU with them all: the CPU time of every process of every node over `--idle` seconds, as a
  share of one core;
- listings: `warrenctl list_queues name messages` against `rabbitmqctl list_queues name messages`,
  and GET /api/queues (every queue, every column) on the first node;
- restart to serving: the first node stopped cleanly and started again on the same data dir (the
  others keep running), timed from the start until its AMQP port accepts and then until a basic.get
  answers on `--probe` of the classic and of the quorum queues, chosen at random;
- delete: every queue deleted over the channels, classic then quorum: queues per second.
"""
from __future__ import annotations

import argparse
import base64
import json
import multiprocessing
import os
import random
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable

import pika
import psutil

from actors.runtime.ports import can_listen, port_open, stable_port
from bench.compare_brokers import PY, ROOT, Rabbit, by_cmdline
from bench.quorum_compare import _oracle_port
from scripts.local_cluster import Cluster, start_node, wait_serving

MIB = 1 << 20
QUORUM = {"x-queue-type": "quorum"}
RABBITMQCTL = "/usr/lib/rabbitmq/bin/rabbitmqctl"
settle_s = 10.0  # after a phase, before memory is measured: timers, GC and samples settle


# ------------------------------------------------------------------ the brokers
class WarrenNodes:
    """A warren cluster whose nodes serve the management API on ports of their own."""

    name = "warren"

    def __init__(self, root: Path, size: int) -> None:
        self.cluster = Cluster(root / "warren", size)
        self.api = {name: (stable_port(), stable_port()) for name in self.cluster.names}

    def start(self) -> None:
        first, *others = self.cluster.names
        self._start(first)
        for name in others:
            self._start(name, join=first, wait=False)
        for name in others:
            wait_serving(self.cluster.nodes[name])

    def _start(self, name: str, *, join: str | None = None, wait: bool = True) -> float:
        c = self.cluster
        port, cluster_port = c.ports[name]
        api, prom = self.api[name]
        extra = ["--management-port", str(api), "--prometheus-port", str(prom)]
        if join is not None:
            extra += ["--join", f"127.0.0.1:{c.ports[join][1]}"]
        t0 = time.perf_counter()
        c.nodes[name] = start_node(c.root / name, *extra, port=port, cluster_port=cluster_port, wait=False)
        if wait:
            wait_serving(c.nodes[name])
        return t0

    def ports(self) -> list[int]:
        return [self.cluster.ports[n][0] for n in self.cluster.names]

    def api_port(self) -> int:
        return self.api[self.cluster.names[0]][0]

    def processes(self) -> list[psutil.Process]:
        return [p for node in self.cluster.nodes.values() for p in node.processes()]

    def list_queues(self) -> float:
        data_dir = self.cluster.nodes[self.cluster.names[0]].data_dir
        t0 = time.perf_counter()
        subprocess.run([PY, "-m", "scripts.warrenctl", "-n", str(data_dir), "list_queues", "name", "messages"],
                       cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        return time.perf_counter() - t0

    def restart_first(self) -> float:
        """Stop the first node cleanly, start it again; the time of the start (then: until it serves)."""
        first = self.cluster.names[0]
        self.cluster.nodes[first].stop()
        return self._start(first, wait=False)

    def stop(self) -> None:
        self.cluster.stop()


class RabbitNodes:
    name = "rabbitmq"

    def __init__(self, root: Path, size: int) -> None:
        self.cookie = secrets.token_hex(16)
        self.nodes = [Rabbit(f"rabbit{i}", _oracle_port(), root / f"rabbit{i}") for i in range(size)]
        self.mgmt = {node.name: _mgmt_port() for node in self.nodes}

    def _env(self, node: Rabbit) -> dict:
        return dict(os.environ, ORACLE_COOKIE=self.cookie, ORACLE_MANAGEMENT_PORT=str(self.mgmt[node.name]))

    def _boot(self, node: Rabbit, check: bool = True) -> None:
        subprocess.run([str(ROOT / "scripts" / "rabbitmq_oracle"), "start", str(node.port), str(node.data_dir)],
                       check=check, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=self._env(node))

    def start(self) -> None:
        for node in self.nodes:
            node.data_dir.mkdir(parents=True, exist_ok=True)
            self._boot(node)
        first = self._nodename(self.nodes[0])
        for node in self.nodes[1:]:
            for args in (["stop_app"], ["join_cluster", first], ["start_app"]):
                self._ctl(node, *args)

    def _nodename(self, node: Rabbit) -> str:
        return f"oracle{node.port}@localhost"

    def _ctl(self, node: Rabbit, *args: str, out: Any = subprocess.DEVNULL) -> None:
        env = dict(os.environ, HOME=str(node.data_dir), ERL_EPMD_ADDRESS="127.0.0.1")
        subprocess.run([RABBITMQCTL, "-n", self._nodename(node), *args], env=env, check=True, stdout=out)

    def ports(self) -> list[int]:
        return [node.port for node in self.nodes]

    def api_port(self) -> int:
        return self.mgmt[self.nodes[0].name]

    def processes(self) -> list[psutil.Process]:
        return [p for node in self.nodes for p in by_cmdline(str(node.data_dir))]

    def list_queues(self) -> float:
        t0 = time.perf_counter()
        self._ctl(self.nodes[0], "list_queues", "name", "messages")
        return time.perf_counter() - t0

    def restart_first(self) -> float:
        first = self.nodes[0]
        first.stop()
        deadline = time.monotonic() + 60  # its ports free again (the old beam's dist port, above all)
        while not all(can_listen(p) for p in (first.port, first.port + 20000)) and time.monotonic() < deadline:
            time.sleep(0.1)
        t0 = time.perf_counter()
        # rabbitmq_oracle's start gives up waiting for the port after a minute, which a node holding
        # many queues may take: the caller waits for the port itself
        self._boot(first, check=False)
        return t0

    def stop(self) -> None:
        for node in reversed(self.nodes):
            node.stop()


def _mgmt_port() -> int:
    while True:
        port = stable_port()
        if port + 20 < 65536:
            return port


# ------------------------------------------------------------------ load
def _worker(port: int, names: list[str], arguments: dict | None, op: str, start: Any, out: Any) -> None:
    try:
        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port, heartbeat=0,
                                                                 blocked_connection_timeout=None))
        ch = conn.channel()
        start.wait()
        t0 = time.perf_counter()
        for name in names:
            if op == "declare":
                ch.queue_declare(name, durable=True, arguments=arguments)
            else:
                ch.queue_delete(name)
        out.put((t0, time.perf_counter()))
        conn.close()
    except Exception as e:  # said to the parent, which stops the run, rather than waited for
        out.put(f"{op} through port {port}: {e!r}")
        raise


def over_channels(ports: list[int], names: list[str], arguments: dict | None, op: str, channels: int) -> float:
    """Declare or delete `names` over `channels` connections (one process each, spread over the
    nodes in turn); queues per second from the first call to the last answer."""
    ctx = multiprocessing.get_context("fork")
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(ports[i % len(ports)], names[i::channels], arguments, op, start, out))
             for i in range(channels)]
    for p in procs:
        p.start()
    time.sleep(1.0)  # the connections open before the clock starts (they are not what is measured)
    start.set()
    spans = [out.get(timeout=3600) for _ in procs]
    failed = [span for span in spans if isinstance(span, str)]
    if failed:
        raise SystemExit(f"a {op} worker failed: {failed[0]}")
    for p in procs:
        p.join()
        if p.exitcode:
            raise SystemExit(f"a {op} worker failed (exit {p.exitcode})")
    return len(names) / (max(e for _, e in spans) - min(s for s, _ in spans))


def pss(broker: Any) -> int:
    total = 0
    for p in broker.processes():
        try:
            total += p.memory_full_info().pss
        except psutil.Error:
            pass
    return total


def idle_cpu(broker: Any, seconds: float) -> float:
    """CPU time of every process of the broker over `seconds`, as a share of one core."""
    procs = broker.processes()

    def cpu() -> dict[int, float]:
        out = {}
        for p in procs:
            try:
                t = p.cpu_times()
                out[p.pid] = t.user + t.system
            except psutil.Error:
                pass
        return out
    before = cpu()
    time.sleep(seconds)  # idle on purpose: this measures a broker at rest
    after = cpu()
    return sum(after[pid] - before[pid] for pid in after if pid in before) / seconds


def api_queues(port: int) -> tuple[float, int]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/api/queues",
                                 headers={"Authorization": "Basic " + base64.b64encode(b"guest:guest").decode()})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=600) as resp:
        body = resp.read()
    return time.perf_counter() - t0, len(json.loads(body))


def probe(port: int, names: list[str], deadline_s: float = 600.0) -> None:
    """Until a basic.get answers on every one of `names` through the node on `port`."""
    deadline = time.monotonic() + deadline_s
    left = list(names)
    while left:
        try:
            conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port, heartbeat=0))
            ch = conn.channel()
            while left:
                ch.basic_get(left[-1], auto_ack=True)
                left.pop()
            conn.close()
        except pika.exceptions.AMQPError:
            if time.monotonic() > deadline:
                raise SystemExit(f"{len(left)} queues never answered after the restart")
            time.sleep(0.1)  # the node is still recovering: try again


def wait_port(port: int, deadline_s: float = 600.0) -> None:
    deadline = time.monotonic() + deadline_s
    while not port_open(port):
        if time.monotonic() > deadline:
            raise SystemExit(f"port {port} never opened")
        time.sleep(0.02)


# ------------------------------------------------------------------ the run
def run(broker: Any, a: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    skip = set(a.skip.split(",")) if a.skip else set()
    say = lambda text: print(f"[{broker.name}] {text}", file=sys.stderr, flush=True)  # noqa: E731
    t0 = time.perf_counter()
    broker.start()
    out["start s"] = time.perf_counter() - t0
    time.sleep(settle_s)
    ports = broker.ports()
    base = pss(broker)
    classic = [f"c{i}" for i in range(a.classic)]
    quorum = [f"q{i}" for i in range(a.quorum)]
    out["classic declare /s"] = over_channels(ports, classic, None, "declare", a.channels)
    say(f"classic declared: {out['classic declare /s']:.0f}/s")
    time.sleep(settle_s)
    with_classic = pss(broker)
    out["KiB per classic"] = (with_classic - base) / max(1, a.classic) / 1024
    if a.quorum:
        out["quorum declare /s"] = over_channels(ports, quorum, QUORUM, "declare", a.channels)
        say(f"quorum declared: {out['quorum declare /s']:.0f}/s")
        time.sleep(settle_s)
        out["KiB per quorum"] = (pss(broker) - with_classic) / a.quorum / 1024
    out["PSS MiB"] = pss(broker) / MIB
    if "cpu" not in skip:
        out["idle CPU %"] = 100 * idle_cpu(broker, a.idle)
        say(f"idle CPU {out['idle CPU %']:.1f} %")
    if "list" not in skip:
        out["list_queues s"] = broker.list_queues()
        out["/api/queues s"], listed = api_queues(broker.api_port())
        say(f"list_queues {out['list_queues s']:.2f} s, /api/queues {out['/api/queues s']:.2f} s ({listed} rows)")
    if "restart" not in skip:
        sample = random.Random(1)
        probes = sample.sample(classic, min(a.probe, len(classic))) + sample.sample(quorum, min(a.probe, len(quorum)))
        started = broker.restart_first()
        wait_port(ports[0])
        out["restart: port s"] = time.perf_counter() - started
        probe(ports[0], probes)
        out["restart: serving s"] = time.perf_counter() - started
        say(f"restarted: port after {out['restart: port s']:.1f} s, serving after {out['restart: serving s']:.1f} s")
    if "delete" not in skip:
        out["classic delete /s"] = over_channels(ports, classic, None, "delete", a.channels)
        if a.quorum:
            out["quorum delete /s"] = over_channels(ports, quorum, None, "delete", a.channels)
        say("deleted")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nodes", type=int, default=1)
    p.add_argument("--classic", type=int, default=10000)
    p.add_argument("--quorum", type=int, default=2000)
    p.add_argument("--channels", type=int, default=8)
    p.add_argument("--idle", type=float, default=30.0, help="seconds of idle CPU measured")
    p.add_argument("--probe", type=int, default=50, help="queues of each type probed after the restart")
    p.add_argument("--only", choices=("warren", "rabbitmq"))
    p.add_argument("--skip", default="", help="comma-separated: cpu, list, restart, delete")
    p.add_argument("--dir", type=Path)
    a = p.parse_args(argv)
    root = a.dir or Path(tempfile.mkdtemp(prefix="many-queues-"))
    root.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict] = {}
    makers: list[tuple[str, Callable[[Path, int], Any]]] = [("warren", WarrenNodes), ("rabbitmq", RabbitNodes)]
    for name, make in makers:
        if a.only not in (None, name):
            continue
        broker = make(root / name, a.nodes)
        try:
            results[name] = run(broker, a)
        finally:
            broker.stop()
            shutil.rmtree(root / name, ignore_errors=True)
    print(f"{a.classic} classic + {a.quorum} quorum durable queues, {a.nodes} node(s), {a.channels} channels")
    names = list(results)
    keys = list(dict.fromkeys(k for r in results.values() for k in r))
    print(f"{'':22}" + "".join(f"{n:>12}" for n in names))
    for key in keys:
        cells = "".join(f"{results[n][key]:>12.1f}" if key in results[n] else f"{'-':>12}" for n in names)
        print(f"{key:22}{cells}")
    (root / "many_queues.json").write_text(json.dumps(results, indent=1))
    print(f"(figures in {root / 'many_queues.json'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
