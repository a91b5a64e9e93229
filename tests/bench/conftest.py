"""A RabbitMQ oracle for the perf tool's integration tests (port 5685, this area's port)."""

import os
import socket
import subprocess
from pathlib import Path

import pytest

from tests.integration.oracle import run_script

ORACLE_PORT = 5685
RABBITMQ_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "rabbitmq_oracle"


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="session")
def oracle(tmp_path_factory):
    """(uri, workdir); workdir is None for an oracle someone started by hand on this port."""
    uri = f"amqp://guest:guest@127.0.0.1:{ORACLE_PORT}/%2F"
    if _listening(ORACLE_PORT):
        yield uri, None  # leave a hand-started oracle running
        return
    if not os.path.exists(RABBITMQ_SERVER):
        pytest.skip("rabbitmq-server is not installed (apt-get install rabbitmq-server)")
    workdir = tmp_path_factory.mktemp("rabbitmq")
    run_script("start", str(ORACLE_PORT), str(workdir))
    try:
        yield uri, workdir
    finally:
        subprocess.run([str(SCRIPT), "stop", str(workdir)], capture_output=True, timeout=60)


@pytest.fixture
def oracle_uri(oracle):
    return oracle[0]


def rabbitmqctl(workdir: Path, *args: str) -> None:
    """Run rabbitmqctl against the fixture's oracle (its cookie lives in HOME=workdir)."""
    env = dict(os.environ, HOME=str(workdir))
    subprocess.run(["/usr/lib/rabbitmq/bin/rabbitmqctl", "-n", f"oracle{ORACLE_PORT}@localhost",
                    *args], check=True, capture_output=True, env=env, timeout=60)
