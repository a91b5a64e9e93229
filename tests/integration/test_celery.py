"""A real Celery application (tests/integration/celery_app.py) on warren, its worker a subprocess,
on one node and on a 3-node cluster: classic and quorum task queues, countdown and ETA tasks to
the quorum queue through native delayed delivery (run within a second of their ETA), retries,
groups and chords with a result backend, an acks_late task whose worker is killed -9 mid-task
(it runs again, nothing is lost), and the worker's reconnection while its node restarts.

The tests of a topology share one worker and run in order: the kill and the restart come last.
`python -m bench.celery_run` is the longer run (more tasks, ETA lateness figures).
"""
from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pika
import pytest
from celery import chord, group

from tests.integration.celery_support import CeleryWorld
from tests.integration.workers import key, running
from tests.waiting import until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
result_s = 30.0


@pytest.fixture(scope="module", params=[1, 3], ids=["node", "cluster"])
def world(request, tmp_path_factory):
    with running(CeleryWorld(tmp_path_factory.mktemp(f"celery{request.param}"), request.param)) as w:
        yield w


def test_the_worker_sets_up_native_delayed_delivery(world):
    log = world.worker.log()
    assert "CRITICAL" not in log and "Failed to setup delayed delivery" not in log, log[-3000:]
    with pika.BlockingConnection(pika.URLParameters(world.urls[-1])) as conn:
        ch = conn.channel()
        for level in (0, 13, 27):  # passive: they exist (as quorum queues, or this would be 406)
            ch.queue_declare(f"celery_delayed_{level}", passive=True, durable=True,
                             arguments={"x-queue-type": "quorum"})


def test_tasks_on_the_quorum_and_the_classic_queue(world):
    assert world.task("add").delay(2, 3).get(timeout=result_s) == 5
    assert world.task("on_classic").delay(4).get(timeout=result_s) == 40


def test_countdown_and_eta_tasks_run_within_a_second_of_their_eta(world):
    sent = []
    for countdown in (1, 2, 3):
        sent.append((time.time() + countdown, world.task("ran_at").apply_async((key(),), countdown=countdown)))
    eta = datetime.now(timezone.utc) + timedelta(seconds=2.5)
    sent.append((eta.timestamp(), world.task("ran_at").apply_async((key(),), eta=eta)))
    with pika.BlockingConnection(pika.URLParameters(world.urls[-1])) as conn:
        # countdown 3 = 0b11: its first hop is celery_delayed_1 (2 s), then celery_delayed_0 (1 s)
        held = conn.channel().queue_declare("celery_delayed_1", passive=True).method.message_count
    assert held >= 1
    for due, result in sent:
        ran = result.get(timeout=result_s)
        assert due - 0.05 <= ran <= due + 1.0, (due, ran)


def test_a_failing_task_retries_until_it_succeeds(world):
    name = key()
    assert world.task("flaky").delay(name, 2).get(timeout=result_s) == 3
    assert len(world.mark(name)) == 3


def test_groups_and_chords_with_a_result_backend(world):
    add, tsum = world.task("add"), world.task("tsum")
    assert group(add.clone((i, i)) for i in range(8))().get(timeout=result_s) == [2 * i for i in range(8)]
    assert chord(add.clone((i, i)) for i in range(5))(tsum.clone()).get(timeout=result_s) == 20


def test_an_acks_late_task_runs_again_when_its_worker_is_killed_mid_task(world):
    long, queued = key(), [key() for _ in range(3)]
    results = [world.task("slow").delay(long, 3.0)] + [world.task("slow").delay(k, 0.1) for k in queued]
    world.wait_mark(long + ".started", 1)
    world.worker.kill()
    assert world.mark(long + ".done") == []
    world.start_worker()
    assert [r.get(timeout=result_s) for r in results] == [long, *queued]
    assert len(world.mark(long + ".started")) == 2 and len(world.mark(long + ".done")) == 1
    assert all(len(world.mark(k + ".done")) == 1 for k in queued)


def test_the_worker_reconnects_while_its_node_restarts(world):
    before = world.worker.log().count("Connected to amqp://")
    world.restart_broker()
    until(lambda: world.worker.log().count("Connected to amqp://") > before, lambda: world.worker.log()[-3000:], 60,
          every_s=0.1)
    assert world.worker.proc.poll() is None
    assert world.task("add").delay(20, 22).get(timeout=result_s) == 42
    assert world.task("ran_at").apply_async((key(),), countdown=1).get(timeout=result_s) > 0
