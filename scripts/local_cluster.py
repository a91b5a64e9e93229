"""Real warren nodes and clusters on this machine, started from a program (tests, benchmarks, the
fault suite): each node a subprocess in its own session, ready when it wrote `<data_dir>/ready`
(once every host serves) and its AMQP port accepts connections.

`Cluster(root, size)` starts the first node, then the others with `--join` to it, each with its
own data dir under `root` (named n1, n2, ... so the nodes are `n1@HOST`, ...), AMQP and cluster
ports. Nodes can be stopped, killed (-9), paused (SIGSTOP/SIGCONT), partitioned from each other
(the runtime's fault-injecting `partition`) and started again on the same ports and data dir, which
is a restart: the node finds its cluster in `cluster.json`."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
from actors.runtime.client import control
from actors.runtime.ports import port_open, stable_port

REPO = Path(__file__).resolve().parents[1]
start_timeout_s = 90.0
stop_timeout_s = 30.0
poll_s = 0.05


@dataclass
class Node:
    port: int
    data_dir: Path
    proc: subprocess.Popen
    log_path: Path
    cluster_port: int = 0
    host: str = "127.0.0.1"  # where its AMQP listener is (listeners.tcp.default)
    terminated: bool = False  # sent its SIGTERM

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@{self.host}:{self.port}/%2F"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def processes(self) -> list[psutil.Process]:
        """Every process of the node: all are forks of its main process and share its command line
        (Thespian's admin leaves the node's session, so the session alone does not find them)."""
        marker = str(self.data_dir)
        found = []
        for p in psutil.process_iter(["cmdline"]):
            try:
                if p.info["cmdline"] and marker in p.info["cmdline"] and "scripts.node_main" in p.info["cmdline"]:
                    found.append(p)
            except psutil.Error:
                pass
        return found

    def kill(self) -> None:
        """kill -9 of every process of the node at once."""
        victims = self.processes()
        for p in victims:
            try:
                p.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(victims, timeout=stop_timeout_s)
        self.proc.wait(stop_timeout_s)

    def signal_all(self, sig: int) -> None:
        """SIGSTOP / SIGCONT every process of the node (a paused node)."""
        for p in self.processes():
            try:
                p.send_signal(sig)
            except psutil.Error:
                pass

    def terminate(self) -> None:
        """SIGTERM, once: the node stops by itself; `stop` waits for it."""
        if self.proc.poll() is None and not self.terminated:
            self.proc.send_signal(signal.SIGTERM)
            self.terminated = True

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.terminate()
            try:
                self.proc.wait(stop_timeout_s)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # whatever is left of the node's session
        except ProcessLookupError:
            pass


def start_node(data_dir: Path, *extra: str, port: int | None = None, cluster_port: int | None = None,
               wait: bool = True, host: str = "127.0.0.1", prefix: tuple[str, ...] = ()) -> Node:
    """Start a node (`wait`: until it serves); `extra` flags go to scripts.node_main. The cluster port
    is a free one unless given (the default, AMQP port + 20000, is out of range for most free ports);
    the management and Prometheus ports are off unless `extra` sets them (several test nodes must
    not fight over 15672). `host` is where its AMQP listener will be (the configuration sets it);
    `prefix` runs the node under another command (`ip netns exec NS`: the fault suite)."""
    port = port or stable_port()
    cluster_port = cluster_port or stable_port()
    for flag in ("--management-port", "--prometheus-port"):
        if flag not in extra:
            extra = (*extra, flag, "0")
    data_dir.mkdir(parents=True, exist_ok=True)
    log_path = data_dir / "node.log"
    with open(log_path, "ab") as out:
        proc = subprocess.Popen([*prefix, sys.executable, "-m", "scripts.node_main", "--port", str(port),
                                 "--cluster-port", str(cluster_port),
                                 "--data-dir", str(data_dir), "--name", data_dir.name,
                                 "--exit-with", str(os.getpid()), *extra],
                                cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    node = Node(port, data_dir, proc, log_path, cluster_port, host)
    if wait:
        wait_serving(node)
    return node


def ready_by(data_dir: Path) -> int | None:
    """The pid of the main process that wrote `<data_dir>/ready` (one killed -9 leaves its file)."""
    try:
        return json.loads((data_dir / "ready").read_text())["pid"]
    except (OSError, ValueError, KeyError):
        return None


def wait_serving(node: Node) -> None:
    data_dir, port, proc = node.data_dir, node.port, node.proc
    deadline = time.monotonic() + start_timeout_s
    while not (ready_by(data_dir) == proc.pid and port_open(port, node.host)):
        if proc.poll() is not None or time.monotonic() > deadline:
            node.stop()
            raise RuntimeError(f"node did not start; log:\n{node.log()[-4000:]}")
        time.sleep(poll_s)  # waiting for a condition with a deadline, not for time to pass


HOST = socket.gethostname().split(".")[0]


class Cluster:
    def __init__(self, root: Path, size: int = 3, *extra: str) -> None:
        self.root = Path(root)
        self.extra = extra
        self.names = [f"n{i + 1}" for i in range(size)]
        self.ports = {name: (stable_port(), stable_port()) for name in self.names}
        self.nodes: dict[str, Node] = {}

    def node_name(self, name: str) -> str:
        return f"{name}@{HOST}"

    def start(self) -> Cluster:
        first, *others = self.names
        self.start_node(first)
        for name in others:
            self.start_node(name, join=first, wait=False)
        for name in others:
            wait_serving(self.nodes[name])
        return self

    def start_node(self, name: str, *, join: str | None = None, wait: bool = True) -> Node:
        port, cluster_port = self.ports[name]
        extra = [*self.extra]
        if join is not None:
            extra += ["--join", f"127.0.0.1:{self.ports[join][1]}"]
        node = start_node(self.root / name, *extra, port=port, cluster_port=cluster_port, wait=wait)
        self.nodes[name] = node
        return node

    def restart(self, name: str, *, wait: bool = True) -> Node:
        return self.start_node(name, wait=wait)

    def url(self, name: str) -> str:
        return self.nodes[name].url

    def kill(self, name: str) -> None:
        self.nodes[name].kill()

    def pause(self, name: str) -> None:
        self.nodes[name].signal_all(signal.SIGSTOP)

    def resume(self, name: str) -> None:
        self.nodes[name].signal_all(signal.SIGCONT)

    def control(self, name: str, host: str, op: str, args: dict | None = None) -> object:
        node = self.nodes[name]
        port = int((node.data_dir / "admin_port").read_text())
        return control(port, host, op, args or {})

    def hosts(self, name: str) -> list[str]:
        return list(self.control(name, "$supervisor", "hosts")["hosts"])

    def partition(self, *sides: list[str]) -> None:
        """Cut the nodes of each side off from every node of the other sides (no sides: heal)."""
        everyone = [n for side in sides for n in side] if sides else self.names
        for side in sides or [self.names]:
            others = [self.node_name(n) for n in everyone if n not in side] if sides else []
            for name in side:
                for host in self.hosts(name):
                    self.control(name, host, "partition", {"nodes": others})

    def heal(self) -> None:
        self.partition()

    def cluster_status(self, name: str) -> dict:
        return self.control(name, "node", "cluster_status")

    def stop(self) -> None:
        """Every node at once: each stops in its own time, so the cluster takes the slowest's."""
        for node in self.nodes.values():
            node.signal_all(signal.SIGCONT)
        for node in self.nodes.values():
            node.terminate()
        for node in self.nodes.values():
            node.stop()
