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

    def stop(self) -> None:
        for node in self.nodes.values():
            node.signal_all(signal.SIGCONT)
        for node in self.nodes.values():
            node.stop()
