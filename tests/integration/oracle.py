"""RabbitMQ 3.10 beside warren in one test: `start_oracle` runs Debian's rabbitmq-server through
scripts/rabbitmq_oracle on a free port (the test skips, saying why, when it is not installed);
`run_script` runs that script for any test, a failed start failing with what the broker said."""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from actors.runtime.ports import stable_port

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


class OracleFailed(RuntimeError):
    """scripts/rabbitmq_oracle failed; the message holds what it printed (for a start: why the
    broker did not come up, and the end of its log)."""


def run_script(*args: str, env: dict[str, str] | None = None) -> None:
    done = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=180)
    if done.returncode != 0:
        raise OracleFailed(f"scripts/rabbitmq_oracle {' '.join(args)} exited {done.returncode}:\n"
                           f"{done.stdout}{done.stderr}")


def start_oracle(workdir: Path) -> Oracle:
    if not os.path.exists(RABBITMQ_SERVER):
        pytest.skip("rabbitmq-server is not installed (apt-get install rabbitmq-server): no oracle to compare with")
    oracle = Oracle(stable_port(), workdir)
    # the Erlang distribution port, like the AMQP port, from outside the kernel's ephemeral range:
    # the script's default (the AMQP port + 20000) fell inside it, where an outgoing connection's
    # local end could take it before beam bound it, and the broker exited at once
    env = dict(os.environ, ORACLE_DIST_PORT=str(stable_port()))
    try:
        run_script("start", str(oracle.port), str(workdir), env=env)
    except BaseException:
        oracle.stop()
        raise
    return oracle
