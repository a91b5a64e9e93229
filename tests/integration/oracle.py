"""RabbitMQ 3.10 beside warren in one test: `start_oracle` runs Debian's rabbitmq-server through
scripts/rabbitmq_oracle on a free port (the test skips, saying why, when it is not installed)."""
from __future__ import annotations

import os
import random
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from actors.runtime.ports import can_listen

RABBITMQ_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "rabbitmq_oracle"


@dataclass
class Oracle:
    port: int
    workdir: Path

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}/%2F"

    def stop(self) -> None:
        subprocess.run([str(SCRIPT), "stop", str(self.workdir)], capture_output=True, timeout=60)


def _free_port() -> int:
    """A free port in 30000-32000, where this machine's oracles go (its Erlang distribution port
    is the AMQP port + 20000)."""
    while True:
        port = random.randrange(30000, 32000)
        if can_listen(port) and can_listen(port + 20000):
            return port


def start_oracle(workdir: Path) -> Oracle:
    if not os.path.exists(RABBITMQ_SERVER):
        pytest.skip("rabbitmq-server is not installed (apt-get install rabbitmq-server): no oracle to compare with")
    oracle = Oracle(_free_port(), workdir)
    try:
        subprocess.run([str(SCRIPT), "start", str(oracle.port), str(workdir)], check=True, capture_output=True,
                       timeout=120)
    except BaseException:
        oracle.stop()
        raise
    return oracle
