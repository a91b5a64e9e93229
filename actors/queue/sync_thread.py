"""Where a queue host's group commit syncs: a worker thread beside the event loop.

The group commit (group_commit.py) collects its syncs in `collect` (the host's RealDisk defers
them, persist/disk.py) and hands them to `run`, which syncs on the one worker thread and calls
`done` back on the event loop. One thread is enough: the group commit has one commit in flight at
a time, and fdatasync releases the GIL, so the loop keeps delivering, taking publishes and writing
the next commit's records meanwhile.

A sync that fails leaves the host unable to say what is on disk (after a failed fdatasync the page
cache may have dropped the dirty pages: retrying proves nothing). Its confirms must never leave,
so the process exits and the supervisor restarts the host, whose queues recover from what the
files hold, as after kill -9.
"""
from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager

import structlog

from persist.disk import DeferredSyncs, RealDisk

log = structlog.get_logger("warren.queue")


class ThreadSyncs:
    """The group commit's `Syncs` for a RealDisk (see the module docstring)."""

    def __init__(self, disk: RealDisk) -> None:
        self._disk = disk
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="group-commit")

    def collect(self) -> AbstractContextManager[DeferredSyncs]:
        return self._disk.deferring()

    def run(self, collected: DeferredSyncs, done: Callable[[], None]) -> None:
        if not len(collected):
            done()  # nothing to wait for (sync_method "none", or nothing was written)
            return
        future = asyncio.get_running_loop().run_in_executor(self._thread, collected.run)
        future.add_done_callback(lambda f: _finished(f, done))


def _finished(future: asyncio.Future, done: Callable[[], None]) -> None:
    error = future.exception()
    if error is not None:
        log.critical("queue.sync_failed", error=repr(error), action="exiting: the host recovers from its files")
        os._exit(1)
    done()
