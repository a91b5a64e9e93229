"""The cluster under test: real warren nodes, each in its own network namespace (tests/faults/network.py)
or, where namespaces cannot be made, on loopback with the runtime's fault-injecting transport.

The nemeses act through this class only: `kill` (-9 of every process of a node) and `restart` (same
ports, same data dir), `pause`/`resume` (SIGSTOP/SIGCONT of every process), `kill_host` (-9 of one
host process; the node's supervisor restarts it), and `cut(grudge)` (each node loses the nodes its
grudge names; `{}` heals). In namespaces a cut is nftables rules; on loopback it is the control op
"partition" sent to every host of every node (a paused or dead node cannot be told: its grudge is
applied again when it comes back).

Nodes listen on their namespace's address (`listeners.tcp.default = IP:PORT`, `cluster.interface`),
with no loopback-only users, so clients in the root namespace connect as guest through the bridge.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from actors.runtime.client import control
from actors.runtime.ports import stable_port
from scripts.local_cluster import HOST, REPO, Node, start_node, wait_serving
from tests.faults.network import Netns

AMQP_PORT, CLUSTER_PORT = 5672, 25672  # in a namespace every node has the defaults to itself
control_timeout_s = 30.0


class FaultCluster:
    def __init__(self, root: Path, size: int, *, netns: bool, conf: str = "") -> None:
        self.root = Path(root)
        self.names = [f"n{i + 1}" for i in range(size)]
        self.net = Netns(self.names) if netns else None
        self.conf = conf  # extra warren.conf lines for every node
        self.ports = {n: (AMQP_PORT, CLUSTER_PORT) if netns else (stable_port(), stable_port()) for n in self.names}
        self.nodes: dict[str, Node] = {}
        self.grudge: dict[str, set[str]] = {}
        self.paused: set[str] = set()

    @property
    def mode(self) -> str:
        return "netns" if self.net else "transport"

    def node_name(self, name: str) -> str:
        return f"{name}@{HOST}"

    def address(self, name: str) -> str:
        return self.net.ip(name) if self.net else "127.0.0.1"

    def url(self, name: str) -> str:
        return self.nodes[name].url

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> FaultCluster:
        self.root.mkdir(parents=True, exist_ok=True)
        if self.net:
            self.net.create()
        first, *others = self.names
        self._start(first)
        for name in others:
            self._start(name, join=first, wait=False)
        for name in others:
            wait_serving(self.nodes[name])
        return self

    def _start(self, name: str, *, join: str | None = None, wait: bool = True) -> Node:
        port, cluster_port = self.ports[name]
        ip = self.address(name)
        conf = self.root / f"{name}.conf"
        conf.write_text(f"listeners.tcp.default = {ip}:{port}\ncluster.interface = {ip}\n"
                        f"loopback_users =\n{self.conf}")
        extra = ["--config", str(conf)]
        if join is not None:
            extra += ["--join", f"{self.address(join)}:{self.ports[join][1]}"]
        prefix = self.net.prefix(name) if self.net else ()
        node = start_node(self.root / name, *extra, port=port, cluster_port=cluster_port, wait=wait,
                          host=ip, prefix=prefix)
        self.nodes[name] = node
        return node

    def stop(self) -> None:
        for node in self.nodes.values():
            node.signal_all(signal.SIGCONT)
        for node in self.nodes.values():
            node.stop()
        if self.net:
            self.net.destroy()

    # -- faults ------------------------------------------------------------------------------
    def kill(self, name: str) -> None:
        self.nodes[name].kill()
        self.paused.discard(name)

    def restart(self, name: str) -> None:
        """Start a killed node again on its ports and data dir; it finds its cluster in cluster.json."""
        node = self._start(name, wait=False)
        if not self.net and self.grudge.get(name):
            self._tell_partition(name)
        wait_serving(node)

    def running(self, name: str) -> bool:
        return self.nodes[name].proc.poll() is None

    def pause(self, name: str) -> None:
        self.nodes[name].signal_all(signal.SIGSTOP)
        self.paused.add(name)

    def resume(self, name: str) -> None:
        self.nodes[name].signal_all(signal.SIGCONT)
        self.paused.discard(name)
        if not self.net:
            self._tell_partition(name)

    def host_processes(self, name: str) -> dict[str, int]:
        """The node's host processes (conn0, quorum, node ...) by name, with their PIDs."""
        status = self.control(name, "$supervisor", "node_status")
        return {p["name"]: p["pid"] for p in status["processes"]
                if p["name"] not in ("main", "admin", "supervisor", "logger")}

    def kill_host(self, name: str, host: str) -> int:
        """kill -9 of one host process of a node; returns its PID."""
        pid = self.host_processes(name)[host]
        os.kill(pid, signal.SIGKILL)
        return pid

    def cut(self, grudge: dict[str, set[str]]) -> None:
        self.grudge = {n: set(away) for n, away in grudge.items() if away}
        if self.net:
            self.net.cut(self.grudge)
            return
        for name in self.names:
            self._tell_partition(name)

    def heal(self) -> None:
        self.cut({})

    def _tell_partition(self, name: str) -> None:
        if name in self.paused or not self.running(name):
            return
        away = [self.node_name(n) for n in sorted(self.grudge.get(name, ()))]
        for host in self.control(name, "$supervisor", "hosts")["hosts"]:
            self.control(name, host, "partition", {"nodes": away})

    # -- questions ---------------------------------------------------------------------------
    def control(self, name: str, host: str, op: str, args: dict | None = None) -> Any:
        """A control ask of `host` on node `name` (RuntimeError when it cannot be answered)."""
        admin_port = int((self.nodes[name].data_dir / "admin_port").read_text())
        if not self.net:
            return control(admin_port, host, op, args or {})
        try:
            out = subprocess.run([*self.net.prefix(name), sys.executable, "-m", "tests.faults.ctl", str(admin_port),
                                  host, op, json.dumps(args or {})], cwd=REPO, capture_output=True, text=True,
                                 timeout=control_timeout_s)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"{name} did not answer {op!r}") from None
        lines = out.stdout.strip().splitlines()
        reply = json.loads(lines[-1]) if lines else {"error": out.stderr[-500:]}
        if "error" in reply:
            raise RuntimeError(f"{name}: {reply['error']}")
        return reply["ok"]

    def cluster_status(self, name: str) -> dict:
        return self.control(name, "node", "cluster_status")

    def metadata_leader(self) -> str | None:
        """The metadata leader (short name) as the first running, unpaused node that knows one says."""
        for name in self.names:
            if name in self.paused or not self.running(name):
                continue
            try:
                leader = self.cluster_status(name).get("metadata_leader")
            except (RuntimeError, ConnectionError, TimeoutError, OSError):
                continue
            if leader:
                return leader.split("@")[0]
        return None

    def all_running(self) -> bool:
        """Every node up, and every node seeing every other as running."""
        want = {self.node_name(n) for n in self.names}
        try:
            return all(set(self.cluster_status(n)["running"]) == want for n in self.names)
        except (RuntimeError, ConnectionError, TimeoutError, OSError, KeyError):
            return False

