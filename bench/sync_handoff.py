"""What handing a group commit's sync to a worker thread and back costs, without the sync.

A queue host syncs on a worker thread (actors/queue/sync_thread.py) so that its event loop goes on
while fdatasync runs. The round trip (the loop hands the work over, the thread runs it, the loop
hears it is done) costs CPU on both threads and a GIL handover each way; this times it with an
empty job, for the host's ThreadSyncs and for the ThreadPoolExecutor + run_in_executor it
replaced, alternating.

Usage: .venv/bin/python -m bench.sync_handoff [--rounds N] [--repeat N]
"""
from __future__ import annotations

import argparse
import asyncio
import resource
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor

from actors.queue.sync_thread import ThreadSyncs


class EmptyJob:
    """Stands in for DeferredSyncs: one sync to run, which does nothing."""

    def __len__(self) -> int:
        return 1

    def run(self) -> None:
        pass


async def thread_syncs(rounds: int) -> None:
    syncs = ThreadSyncs(disk=None)  # type: ignore[arg-type]  # collect() is never called
    loop = asyncio.get_running_loop()
    for _ in range(rounds):
        done = loop.create_future()
        syncs.run(EmptyJob(), lambda: done.set_result(None))  # type: ignore[arg-type]
        await done


async def executor(rounds: int) -> None:
    pool = ThreadPoolExecutor(max_workers=1)
    loop = asyncio.get_running_loop()
    for _ in range(rounds):
        await loop.run_in_executor(pool, EmptyJob().run)
    pool.shutdown()


def measure(run: Callable[[int], Awaitable[None]], rounds: int) -> tuple[float, float]:
    """Wall and CPU (both threads) microseconds per round trip."""
    before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    asyncio.run(run(rounds))  # type: ignore[arg-type]
    after, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - started
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall / rounds * 1e6, cpu / rounds * 1e6


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=20_000)
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args(argv)
    print("round trip to the sync thread and back, us per round (wall / CPU of both threads)")
    for _ in range(a.repeat):
        for name, run in (("ThreadPoolExecutor", executor), ("ThreadSyncs", thread_syncs)):
            wall, cpu = measure(run, a.rounds)
            print(f"{name:20s} {wall:7.1f} / {cpu:7.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
