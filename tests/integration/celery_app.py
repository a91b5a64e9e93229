"""A Celery application as a user would write one for RabbitMQ 4, run against warren: its worker
is a subprocess (`python -m celery -A tests.integration.celery_app worker`), configured by the
environment the test gives it, and the test sends it tasks through `make_app` by name.

Configuration that matters (README, "Celery and Dramatiq on warren"): the default queue is a
quorum queue, so Celery sets up native delayed delivery (kombu's celery_delayed_0..27 quorum
queues, at-least-once dead-lettering through topic exchanges) and sends countdown and ETA tasks
through it; the task exchanges are topic exchanges, as native delayed delivery needs; `classic`
is a classic queue beside it. Results go to a file-system backend (chords poll it with
chord_unlock, itself a countdown task). Tasks leave marks in WARREN_CELERY_MARKS so the test can
tell what ran, when and how often. Publishes wait for confirms (`confirm_publish`), so a task
sent on a connection whose node has just restarted is sent again, not lost.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from celery import Celery
from kombu import Exchange, Queue

from tests.integration.workers import Marks

TASKS = "tests.integration.celery_app"


def make_app(broker_url: str, backend_dir: str) -> Celery:
    app = Celery("warren-test", broker=broker_url, backend=f"file://{backend_dir}")
    app.conf.update(
        task_queues=[
            Queue("celery", Exchange("celery", type="topic"), routing_key="celery",
                  queue_arguments={"x-queue-type": "quorum"}),
            Queue("classic", Exchange("classic", type="topic"), routing_key="classic"),
        ],
        task_default_queue="celery",
        task_default_exchange="celery",
        task_default_exchange_type="topic",
        task_default_routing_key="celery",
        task_routes={f"{TASKS}.on_classic": {"queue": "classic", "routing_key": "classic"}},
        # a held ETA task keeps its prefetch slot (with quorum queues Celery cannot raise the
        # prefetch for it): the suite runs one at a time, bench.celery_run --prefetch more
        worker_prefetch_multiplier=int(os.environ.get("WARREN_CELERY_PREFETCH", "1")),
        # publisher confirms: a publish on a connection whose node went away is retried, not lost
        broker_transport_options={"confirm_publish": True},
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,  # a restarting node: keep trying
        result_extended=True,
    )
    return app


app = make_app(os.environ.get("WARREN_CELERY_BROKER", "amqp://guest:guest@127.0.0.1:5672//"),
               os.environ.get("WARREN_CELERY_BACKEND", "/tmp/warren-celery-results"))
MARKS = Marks(Path(os.environ.get("WARREN_CELERY_MARKS", "/tmp/warren-celery-marks")))


@app.task
def add(x: int, y: int) -> int:
    return x + y


@app.task
def on_classic(x: int) -> int:
    return x * 10


@app.task
def tsum(values: list[int]) -> int:
    return sum(values)


@app.task
def ran_at(key: str) -> float:
    """The time the task ran (countdown and ETA tests compare it with the ETA)."""
    now = time.time()
    MARKS.add(key, repr(now))
    return now


@app.task(bind=True, max_retries=5)
def flaky(self, key: str, failures: int) -> int:
    """Fails its first `failures` runs, retrying each time after a second (a countdown retry)."""
    attempt = MARKS.add(key)
    if attempt <= failures:
        raise self.retry(countdown=1)
    return attempt


@app.task(acks_late=True)
def slow(key: str, seconds: float) -> str:
    """Marks its start, works `seconds`, marks its end: killed in between, it must run again."""
    MARKS.add(key + ".started", str(os.getpid()))
    time.sleep(seconds)  # the task's work: the test kills the worker while it is here
    MARKS.add(key + ".done", str(os.getpid()))
    return key
