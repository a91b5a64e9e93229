"""Run nodes of one host kind as real processes: `python -m actors.raft.launch CONFIG.json` runs one
node; `NodeCluster` starts, kills (-9) and restarts several of them for tests and benchmarks, and
`RaftCluster` is the one whose host is the Raft test host (actors/raft/hosts.py). Quorum queues have
theirs (actors/quorum/launch.py).

Each node is its own `run_node` (Thespian admin port, data dir) with one host bound to a tcp://
endpoint on 127.0.0.1, running the cluster's host `entry`. Every node's directory names every
node's host and the client hosts, so replies reach a test or benchmark process that runs its own
Runtime as a client host. `kill` is a kill -9 of every process of the node at the same moment.
"""
from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import structlog

from actors.raft.hosts import group_names, host_name, member_id
from actors.runtime.client import control
from actors.runtime.control import HostSpec
from actors.runtime.node_process import run_node
from actors.runtime.ports import stable_port

REPO = Path(__file__).resolve().parents[2]
ready_timeout_s = 90.0
stop_timeout_s = 20.0
poll_s = 0.05


@dataclass
class NodeProc:
    name: str
    admin_port: int
    data_dir: Path
    config_path: Path
    host: str = ""
    proc: subprocess.Popen | None = None

    def log(self) -> str:
        path = self.data_dir / "node.log"
        return path.read_text(errors="replace") if path.exists() else ""


@dataclass
class NodeCluster:
    """`nodes` node processes under `root`, each running one host of `entry`."""
    root: Path
    nodes: tuple[str, ...] = ("n1", "n2", "n3")
    clients: tuple[str, ...] = ("client",)
    host_config: dict = field(default_factory=dict)  # extra host config (settings, ...)
    procs: dict[str, NodeProc] = field(default_factory=dict)
    directory: dict[str, str] = field(default_factory=dict)
    entry = "actors.raft.hosts:raft_host"

    def host_of(self, node: str) -> str:
        return host_name(node)

    def node_host_config(self, node: str) -> dict:
        """What every node's host gets, besides `host_config`."""
        return {}

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        hosts = [self.host_of(n) for n in self.nodes] + list(self.clients)
        self.directory = {h: f"tcp://127.0.0.1:{stable_port()}" for h in hosts}
        for name in self.nodes:
            data_dir = self.root / name
            data_dir.mkdir(parents=True, exist_ok=True)
            config = {"node": name, "admin_port": stable_port(), "data_dir": str(data_dir),
                      "directory": self.directory, "host_name": self.host_of(name), "entry": self.entry,
                      "host": {**self.host_config, **self.node_host_config(name), "node": name,
                               "nodes": list(self.nodes), "data_dir": str(data_dir)}}
            path = data_dir / "node.json"
            path.write_text(json.dumps(config))
            self.procs[name] = NodeProc(name, config["admin_port"], data_dir, path, host=self.host_of(name))

    # -- processes -------------------------------------------------------------------------------
    def start(self, *names: str) -> None:
        """Start the named nodes (all if none) and wait until each is ready."""
        names = names or self.nodes
        for name in names:
            node = self.procs[name]
            (node.data_dir / "ready").unlink(missing_ok=True)
            with open(node.data_dir / "node.log", "ab") as out:
                node.proc = subprocess.Popen(
                    [sys.executable, "-m", "actors.raft.launch", str(node.config_path)],
                    cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        for name in names:
            self._wait_ready(self.procs[name])

    def _wait_ready(self, node: NodeProc) -> None:
        deadline = time.monotonic() + ready_timeout_s
        while not (node.data_dir / "ready").exists():
            if node.proc.poll() is not None or time.monotonic() > deadline:
                self.kill(node.name)
                raise RuntimeError(f"node {node.name} did not start:\n{node.log()[-4000:]}")
            time.sleep(poll_s)  # polling a condition with a deadline

    def kill(self, name: str) -> float | None:
        """kill -9 every process of the node at once; time.monotonic() when the signals went.

        Thespian's admin daemonizes into its own session, so the node's process group is not
        enough; its processes are all forks of the launcher and share its command line.
        """
        node = self.procs[name]
        if node.proc is None:
            return None
        marker = str(node.config_path)
        victims = [p for p in psutil.process_iter(["cmdline"])
                   if p.info["cmdline"] and marker in p.info["cmdline"]]
        killed_at = time.monotonic()
        for p in victims:
            try:
                p.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(victims, timeout=stop_timeout_s)
        node.proc.wait()
        node.proc = None
        return killed_at

    def stop(self) -> None:
        """SIGTERM every node, then SIGKILL whatever is left of its session."""
        running = [n for n in self.procs.values() if n.proc is not None]
        for node in running:
            if node.proc.poll() is None:
                node.proc.send_signal(signal.SIGTERM)
        for node in running:
            try:
                node.proc.wait(stop_timeout_s)
            except subprocess.TimeoutExpired:
                pass
            self.kill(node.name)

    # -- control ---------------------------------------------------------------------------------
    def ask(self, name: str, op: str, args: dict | None = None, timeout: float = 10) -> Any:
        node = self.procs[name]
        return control(node.admin_port, node.host, op, args or {}, timeout)

    def running(self) -> list[str]:
        return [n for n, p in self.procs.items() if p.proc is not None]


@dataclass
class RaftCluster(NodeCluster):
    """Raft test hosts, each with a member of every group."""
    groups: int = 1

    def node_host_config(self, node: str) -> dict:
        return {"groups": self.groups}

    def group_names(self) -> list[str]:
        return group_names(self.groups)

    def members(self) -> dict[str, list[str]]:
        return {g: [member_id(n, g) for n in self.nodes] for g in self.group_names()}

    def status(self, name: str, groups: list[str] | None = None) -> dict:
        return self.ask(name, "status", {"groups": groups})

    def leader_of(self, group: str, among: list[str] | None = None) -> str | None:
        """The node whose member leads `group` with the highest term (as reported now)."""
        best = None
        for name in among or self.running():
            st = self.status(name, [group])[group]
            if st["role"] == "leader" and (best is None or st["term"] > best[1]):
                best = (name, st["term"])
        return best[0] if best else None


def main() -> None:
    config = json.loads(Path(sys.argv[1]).read_text())
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    structlog.configure(logger_factory=structlog.stdlib.LoggerFactory())
    spec = HostSpec(config["host_name"], config["entry"], config["host"])
    sys.exit(run_node(config["node"], [spec], config["directory"], config["admin_port"],
                      Path(config["data_dir"])))


if __name__ == "__main__":
    main()
