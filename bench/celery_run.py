"""The longer Celery run (issue 34): the test suite's application (tests/integration/celery_app.py)
on one node or a 3-node cluster, with more tasks than the suite sends. Prints; not a test.

    .venv/bin/python -m bench.celery_run [--nodes 1|3] [--tasks N] [--countdowns N] [--kills N] [--prefetch N]

1. `--tasks` add tasks through the quorum queue, sent at once: tasks/s from the first send to
   the last result (one solo worker, results in the file backend).
2. `--countdowns` countdown tasks (1 to 8 s, spread) and as many ETA tasks, through native delayed
   delivery: each one's lateness (ran - due) as min / p50 / p99 / max; the bar is 0 <= late <= 1 s.
   Celery truncates a countdown to whole seconds for the routing key, so an ETA task arrives up to
   a second early and the worker holds it, unacked, in its prefetch slot: with `--prefetch 1` the
   tasks due at one moment run one after the other.
3. `--kills` rounds of an acks_late task whose worker is killed -9 mid-task, then started again:
   how long until it has run to the end, and whether every task queued behind it ran once.
Exits non-zero when a task is lost or a countdown runs early or more than a second late.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

from tests.integration.celery_support import CeleryWorld

result_s = 60.0


def _key() -> str:
    return uuid.uuid4().hex[:12]


def throughput(world: CeleryWorld, tasks: int) -> float:
    add = world.task("add")
    start = time.monotonic()
    results = [add.delay(i, i) for i in range(tasks)]
    assert [r.get(timeout=result_s) for r in results] == [2 * i for i in range(tasks)]
    return tasks / (time.monotonic() - start)


def lateness(world: CeleryWorld, count: int) -> tuple[list[float], list[float]]:
    """(countdown tasks' lateness, ETA tasks' lateness)."""
    ran_at = world.task("ran_at")
    sent = []
    for i in range(count):
        countdown = 1 + (i * 7) // max(1, count - 1)
        sent.append((time.time() + countdown, ran_at.apply_async((_key(),), countdown=countdown)))
        eta = datetime.now(timezone.utc) + timedelta(seconds=1.5 + (i * 6.5) / max(1, count))
        sent.append((eta.timestamp(), ran_at.apply_async((_key(),), eta=eta)))
    late = [r.get(timeout=result_s) - due for due, r in sent]
    return sorted(late[0::2]), sorted(late[1::2])


def kill_round(world: CeleryWorld) -> tuple[float, bool]:
    slow = world.task("slow")
    long, queued = _key(), [_key() for _ in range(5)]
    results = [slow.delay(long, 2.0)] + [slow.delay(k, 0.05) for k in queued]
    world.wait_mark(long + ".started", 1)
    world.worker.kill()
    start = time.monotonic()
    world.start_worker()
    assert [r.get(timeout=result_s) for r in results] == [long, *queued]
    took = time.monotonic() - start
    once = all(len(world.mark(k + ".done")) == 1 for k in queued) and len(world.mark(long + ".done")) == 1
    return took, once


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, choices=(1, 3), default=1)
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--countdowns", type=int, default=40)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--prefetch", type=int, default=100, help="the worker's worker_prefetch_multiplier")
    args = parser.parse_args()
    os.environ["WARREN_CELERY_PREFETCH"] = str(args.prefetch)
    root = Path(tempfile.mkdtemp(prefix="celery-run-"))
    world = CeleryWorld(root, args.nodes)
    ok = True
    try:
        started = time.monotonic()
        world.start_worker()
        print(f"nodes {args.nodes}: worker ready (28 delayed-delivery quorum queues declared) in "
              f"{time.monotonic() - started:.1f} s")
        print(f"throughput: {throughput(world, args.tasks):.0f} tasks/s ({args.tasks} add tasks, solo worker)")
        for kind, late in zip(("countdown", "ETA"), lateness(world, args.countdowns)):
            q = statistics.quantiles(late, n=100)
            print(f"{kind} lateness over {len(late)} tasks: min {late[0]:.3f} s, p50 {q[49]:.3f} s, "
                  f"p99 {q[98]:.3f} s, max {late[-1]:.3f} s")
            ok &= late[0] >= -0.05 and late[-1] <= 1.0
        for i in range(args.kills):
            took, once = kill_round(world)
            print(f"kill -9 round {i + 1}: the killed task and the 5 behind it done {took:.1f} s after the "
                  f"restart; each ran to the end once: {once}")
            ok &= once
    finally:
        world.stop()
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
