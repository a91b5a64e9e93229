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

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}/%2F"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

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


def start_node(data_dir: Path, *extra: str, port: int | None = None) -> Node:
    """`extra` flags go to scripts.node_main; the management and Prometheus ports are off unless
    `extra` sets them (several test nodes must not fight over 15672)."""
    port = port or free_port()
    for flag in ("--management-port", "--prometheus-port"):
        if flag not in extra:
            extra = (*extra, flag, "0")
    data_dir.mkdir(parents=True, exist_ok=True)
    log_path = data_dir / "node.log"
    with open(log_path, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "scripts.node_main", "--port", str(port),
                                 "--data-dir", str(data_dir), "--name", data_dir.name,
                                 "--exit-with", str(os.getpid()), *extra],
                                cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    node = Node(port, data_dir, proc, log_path)
    deadline = time.monotonic() + start_timeout_s
    while not ((data_dir / "ready").exists() and port_open(port)):
        if proc.poll() is not None or time.monotonic() > deadline:
            node.stop()
            raise RuntimeError(f"node did not start; log:\n{node.log()[-4000:]}")
        time.sleep(poll_s)  # waiting for a condition with a deadline, not for time to pass
    return node
