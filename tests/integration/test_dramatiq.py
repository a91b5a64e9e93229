"""Dramatiq (its RabbitMQ broker, pika) on one warren node, its worker a subprocess: actors,
delayed messages through the delay queue, retries with backoff, a message out of retries in the
dead-letter queue, and an actor whose worker is killed -9 mid-message (it runs again: Dramatiq
acks after the actor returns). The actors are tests/integration/dramatiq_app.py."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pika
import pytest

from scripts.local_cluster import REPO, start_node
from tests.integration.sessions import kill_session, stop_session
from tests.integration.workers import Marks, key, running
from tests.waiting import until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]
ready_s = 60.0


class World:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.marks = Marks(root / "marks")
        self.marks.root.mkdir(parents=True)
        self.node = start_node(root / "node")
        os.environ["WARREN_DRAMATIQ_BROKER"] = self.node.url  # the sending side (this process)
        from tests.integration import dramatiq_app
        self.app = dramatiq_app
        self.worker: subprocess.Popen | None = None
        self.starts = 0

    def start_worker(self) -> None:
        self.starts += 1
        self.log = self.root / f"worker-{self.starts}.log"
        env = dict(os.environ, WARREN_DRAMATIQ_BROKER=self.node.url, WARREN_DRAMATIQ_MARKS=str(self.marks.root))
        with open(self.log, "ab") as log:
            self.worker = subprocess.Popen(
                [sys.executable, "-m", "dramatiq", "tests.integration.dramatiq_app", "--processes", "1",
                 "--threads", "1"], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        until(lambda: "is ready for action" in self.log.read_text(errors="replace") or self.worker.poll() is not None,
              lambda: self.log.read_text()[-3000:], ready_s)
        assert self.worker.poll() is None, self.log.read_text()[-3000:]

    def kill_worker(self) -> None:
        """kill -9 of the worker's main process and its worker process."""
        assert self.worker is not None
        kill_session(self.worker, 30)

    def stop(self) -> None:
        if self.worker is not None:
            stop_session(self.worker)
        self.app.broker.close()
        self.node.stop()

    def mark(self, name: str) -> list[str]:
        return self.marks.lines(name)

    def wait_mark(self, name: str, lines: int = 1, deadline_s: float = 20.0) -> list[str]:
        return self.marks.wait(name, lines, deadline_s, lambda: "\n" + self.log.read_text()[-2000:])

    def count(self, queue: str) -> int:
        with pika.BlockingConnection(pika.URLParameters(self.node.url)) as conn:
            return conn.channel().queue_declare(queue, passive=True).method.message_count


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    with running(World(tmp_path_factory.mktemp("dramatiq"))) as w:
        yield w


def test_an_actor_runs(world):
    k = key()
    world.app.record.send(k)
    assert len(world.wait_mark(k)) == 1


def test_a_delayed_message_waits_in_the_delay_queue_and_runs_on_time(world):
    k = key()
    due = time.time() + 1.5
    world.app.record.send_with_options(args=(k,), delay=1500)
    ran = float(world.wait_mark(k)[0])
    assert due - 0.05 <= ran <= due + 1.0, (due, ran)


def test_a_failing_actor_is_retried_with_backoff(world):
    k = key()
    world.app.flaky.send(k, 2)
    world.wait_mark(k + ".ok")
    assert len(world.mark(k)) == 3


def test_a_message_out_of_retries_goes_to_the_dead_letter_queue(world):
    before = world.count("default.XQ")
    k = key()
    world.app.doomed.send(k)
    world.wait_mark(k)
    until(lambda: world.count("default.XQ") > before, "the message in the dead-letter queue default.XQ", 20)


def test_a_message_whose_worker_is_killed_mid_actor_runs_again(world):
    long, after = key(), key()
    world.app.slow.send(long, 3.0)
    world.app.record.send(after)
    world.wait_mark(long + ".started")
    world.kill_worker()
    assert world.mark(long + ".done") == []
    world.start_worker()
    world.wait_mark(long + ".done", deadline_s=30)
    world.wait_mark(after)
    assert len(world.mark(long + ".started")) == 2 and len(world.mark(after)) == 1
