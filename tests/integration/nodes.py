"""Start and stop real warren nodes for tests: a subprocess in its own session, ready when the node
wrote `<data_dir>/ready` (after every host answered ping) and the AMQP port accepts connections."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
from actors.runtime.ports import free_port, port_open

REPO = Path(__file__).resolve().parents[2]
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

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}/%2F"

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

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(stop_timeout_s)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # whatever is left of the node's session
        except ProcessLookupError:
            pass


def start_node(data_dir: Path, *extra: str, port: int | None = None, cluster_port: int | None = None,
               wait: bool = True) -> Node:
    """Start a node (`wait`: until it serves); `extra` flags go to scripts.node_main. The cluster port
    is a free one unless given (the default, AMQP port + 20000, is out of range for most free ports);
    the management and Prometheus ports are off unless `extra` sets them (several test nodes must
    not fight over 15672)."""
    port = port or free_port()
    cluster_port = cluster_port or free_port()
    for flag in ("--management-port", "--prometheus-port"):
        if flag not in extra:
            extra = (*extra, flag, "0")
    data_dir.mkdir(parents=True, exist_ok=True)
    log_path = data_dir / "node.log"
    with open(log_path, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "scripts.node_main", "--port", str(port),
                                 "--cluster-port", str(cluster_port),
                                 "--data-dir", str(data_dir), "--name", data_dir.name,
                                 "--exit-with", str(os.getpid()), *extra],
                                cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    node = Node(port, data_dir, proc, log_path, cluster_port)
    if wait:
        wait_serving(node)
    return node


def wait_serving(node: Node) -> None:
    data_dir, port, proc = node.data_dir, node.port, node.proc
    deadline = time.monotonic() + start_timeout_s
    while not ((data_dir / "ready").exists() and port_open(port)):
        if proc.poll() is not None or time.monotonic() > deadline:
            node.stop()
            raise RuntimeError(f"node did not start; log:\n{node.log()[-4000:]}")
        time.sleep(poll_s)  # waiting for a condition with a deadline, not for time to pass
