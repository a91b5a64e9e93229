"""scripts/rabbitmq_oracle, the oracle every comparing test starts: a start that fails says why."""
from __future__ import annotations

import os
import socket

import pytest

from actors.runtime.ports import stable_port
from tests.integration.oracle import RABBITMQ_SERVER, OracleFailed, run_script

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not os.path.exists(RABBITMQ_SERVER), reason="rabbitmq-server is not installed")]


def test_a_broker_that_exits_at_start_fails_the_start_with_its_own_words(tmp_path) -> None:
    """Its Erlang distribution port taken, RabbitMQ exits before it listens: the start stops
    waiting then (it waited out its whole minute before) and fails with the broker's output."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", stable_port()))
    taken.listen()
    env = dict(os.environ, ORACLE_DIST_PORT=str(taken.getsockname()[1]))
    try:
        with pytest.raises(OracleFailed) as failed:
            run_script("start", str(stable_port()), str(tmp_path / "oracle"), env=env)
    finally:
        run_script("stop", str(tmp_path / "oracle"))
        taken.close()
    said = str(failed.value)
    assert "exited before it listened" in said
    assert "stdout.log" in said and said.count("\n") > 3  # the broker's output follows
