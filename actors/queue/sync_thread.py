"""Where a queue host's group commit syncs: a worker thread beside the event loop.

The group commit (group_commit.py) collects its syncs in `collect` (the host's RealDisk defers
them, persist/disk.py) and hands them to `run`, which syncs on the one worker thread and calls
`done` back on the event loop. One thread is enough: the group commit has one commit in flight at
a time, and fdatasync releases the GIL, so the loop keeps delivering, taking publishes and writing
the next commit's records meanwhile, however long the disk takes.

A sync that fails leaves the host unable to say what is on disk (after a failed fdatasync the page
cache may have dropped the dirty pages: retrying proves nothing). Its confirms must never leave,
so the process exits and the supervisor restarts the host, whose queues recover from what the
files hold, as after kill -9.
"""
from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager

import structlog

from persist.disk import DeferredSyncs, RealDisk

log = structlog.get_logger("warren.queue")


class ThreadSyncs:
    """The group commit's `Syncs` for a RealDisk (see the module docstring).

    The handoff is a lock the worker waits on and an eventfd the loop watches, not an executor's
    futures, work queue and self-pipe: a round trip to the thread and back costs ~115 us of CPU
    against ~175-210 (`bench/sync_handoff.py`), at several hundred commits a second."""

    def __init__(self, disk: RealDisk) -> None:
        self._disk = disk
        self._go = threading.Lock()  # held while the worker has nothing to do
        self._go.acquire()
        self._job: DeferredSyncs | None = None
        self._done: Callable[[], None] | None = None
        self._error: BaseException | None = None
        self._finished_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._thread: threading.Thread | None = None

    def collect(self) -> AbstractContextManager[DeferredSyncs]:
        return self._disk.deferring()

    def run(self, collected: DeferredSyncs, done: Callable[[], None]) -> None:
        if not len(collected):
            done()  # nothing to wait for (sync_method "none", or nothing was written)
            return
        assert self._job is None, "one commit in flight at a time"
        if self._thread is None:  # on the first commit: the loop it reports to is running
            asyncio.get_running_loop().add_reader(self._finished_fd, self._finished)
            self._thread = threading.Thread(target=self._work, name="group-commit", daemon=True)
            self._thread.start()
        self._job, self._done = collected, done
        self._go.release()

    def _work(self) -> None:
        while True:
            self._go.acquire()
            job = self._job
            assert job is not None
            try:
                job.run()
            except BaseException as error:  # reported on the loop
                self._error = error
            os.eventfd_write(self._finished_fd, 1)

    def _finished(self) -> None:
        try:
            os.eventfd_read(self._finished_fd)
        except BlockingIOError:
            return
        done, error = self._done, self._error
        self._job = self._done = self._error = None
        assert done is not None
        self._finish(done, error)

    @staticmethod
    def _finish(done: Callable[[], None], error: BaseException | None) -> None:
        if error is not None:
            log.critical("queue.sync_failed", error=repr(error), action="exiting: the host recovers from its files")
            os._exit(1)
        done()
