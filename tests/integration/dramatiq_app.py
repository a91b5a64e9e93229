"""Dramatiq actors on its RabbitMQ broker (pika), run against warren by tests/integration/test_dramatiq.py:
the worker is a subprocess (`python -m dramatiq tests.integration.dramatiq_app`), the broker URL
comes from WARREN_DRAMATIQ_BROKER, and every actor leaves marks in WARREN_DRAMATIQ_MARKS.

What Dramatiq declares: per queue `Q` (durable, x-dead-letter-exchange "" and
x-dead-letter-routing-key `Q.XQ`), its delay queue `Q.DQ` (delayed messages and retries wait
there, held by the worker until their eta) and its dead-letter queue `Q.XQ` (x-message-ttl 7 days,
where messages out of retries go).
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import dramatiq
from dramatiq.brokers.rabbitmq import RabbitmqBroker

from tests.integration.workers import Marks

broker = RabbitmqBroker(url=os.environ.get("WARREN_DRAMATIQ_BROKER", "amqp://guest:guest@127.0.0.1:5672/%2F"),
                        confirm_delivery=True)
dramatiq.set_broker(broker)
MARKS = Marks(Path(os.environ.get("WARREN_DRAMATIQ_MARKS", "/tmp/warren-dramatiq-marks")))


@dramatiq.actor(max_retries=0)
def record(key: str) -> None:
    MARKS.add(key, repr(time.time()))


@dramatiq.actor(max_retries=4, min_backoff=200, max_backoff=400)
def flaky(key: str, failures: int) -> None:
    """Raises on its first `failures` runs: Dramatiq retries it through the delay queue."""
    if MARKS.add(key) <= failures:
        raise RuntimeError(f"failing on purpose ({key})")
    MARKS.add(key + ".ok")


@dramatiq.actor(max_retries=0)
def doomed(key: str) -> None:
    """Always fails, with no retries: the message goes to the dead-letter queue."""
    MARKS.add(key)
    raise RuntimeError("doomed")


@dramatiq.actor(max_retries=0, time_limit=60_000)
def slow(key: str, seconds: float) -> None:
    MARKS.add(key + ".started", str(os.getpid()))
    time.sleep(seconds)  # the actor's work: the test kills the worker while it is here
    MARKS.add(key + ".done", str(os.getpid()))
