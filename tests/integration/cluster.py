"""Several real warren nodes on this machine forming one cluster, for tests and benchmarks.

`Cluster(root, size)` starts the first node, then the others with `--join` to it, each with its
own data dir under `root` (named n1, n2, ... so the nodes are `n1@HOST`, ...), AMQP and cluster
ports. Nodes can be stopped, killed (-9), paused (SIGSTOP/SIGCONT) and started again on the same
ports and data dir, which is a restart: the node finds its cluster in `cluster.json`.
"""
from __future__ import annotations

import signal
import socket
from pathlib import Path

from actors.runtime.client import control
from actors.runtime.ports import free_port
from tests.integration.nodes import Node, start_node, wait_serving

HOST = socket.gethostname().split(".")[0]


class Cluster:
    def __init__(self, root: Path, size: int = 3, *extra: str) -> None:
        self.root = Path(root)
        self.extra = extra
        self.names = [f"n{i + 1}" for i in range(size)]
        self.ports = {name: (free_port(), free_port()) for name in self.names}
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
        for node in self.nodes.values():
            node.signal_all(signal.SIGCONT)
        for node in self.nodes.values():
            node.stop()
