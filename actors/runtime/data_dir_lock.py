"""One node per data dir: a lock held while any process of the node lives (PostgreSQL's
postmaster.pid keeps a second postmaster out of a data directory the same way).

The node's main process takes an exclusive flock on `<data_dir>/node.lock` before it starts
anything and writes its node name, pid and start time into it. An flock belongs to the open file,
and every process of the node is forked from the main one and inherits that open file, so the
lock is held until the last of them has exited, not just the main process: a node killed with
kill -9 holds it until its hosts are gone too.

A start that finds the lock held reads who holds it. Its main process still running: a second
node on the same data dir, refused (`DataDirBusy`). Its main process gone: what is left of an
earlier run, on its way out (every process of a node ends within about a second of its main
process, lifeline.py): the start waits for it, says so in the log, and fails after `wait_s`
naming the processes that still hold the lock. So a restart right after kill -9 waits for the
ports and files of the old run rather than failing on a busy port.
"""
from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path

import psutil
import structlog

log = structlog.get_logger("warren.node")

LOCK_FILE = "node.lock"
wait_s_default = 30.0
poll_s = 0.05


class DataDirBusy(RuntimeError):
    pass


def lock_path(data_dir: str | os.PathLike) -> Path:
    return Path(data_dir) / LOCK_FILE


def acquire(data_dir: str | os.PathLike, node: str, wait_s: float = wait_s_default) -> tuple[int, bool]:
    """Take the data dir's lock for this process (and every process forked from it): the
    descriptor, which must stay open for the node's life, and whether an earlier run's processes
    held it first. Those let go of the lock before their sockets: an exiting process's
    descriptors close in order, and the lock's is among its first, so the old run's ports may
    stay bound a moment longer (the caller waits for them)."""
    path = lock_path(data_dir)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    waited_from = None
    try:
        while not _try_lock(fd, fcntl.LOCK_EX):
            holder = _read(path)
            if holder is not None and _main_alive(holder):
                raise DataDirBusy(f"data dir {data_dir} is in use by node {holder.get('node')} "
                                  f"(pid {holder['pid']}): stop it first, or give this node another data dir")
            if waited_from is None:
                waited_from = time.monotonic()
                log.warning("node.waiting_for_old_incarnation", data_dir=str(data_dir), timeout_s=wait_s,
                            old_pid=(holder or {}).get("pid"))
            elif time.monotonic() - waited_from > wait_s:
                raise DataDirBusy(f"data dir {data_dir} is still held after {wait_s:g} s by processes of an "
                                  f"earlier run whose main process has exited: pids {holders(path)}")
            time.sleep(poll_s)  # the old processes are exiting; look again shortly
    except BaseException:
        os.close(fd)
        raise
    if waited_from is not None:
        log.info("node.old_incarnation_gone", waited_s=round(time.monotonic() - waited_from, 2))
    me = psutil.Process()
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({"node": node, "pid": me.pid, "started": me.create_time()}).encode(), 0)
    return fd, waited_from is not None


def held(data_dir: str | os.PathLike) -> dict | None:
    """Who holds the data dir's lock (the node's name and main pid), or None when no process of a
    node lives there. The holder's main process may be gone (its last processes exiting)."""
    path = lock_path(data_dir)
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        if _try_lock(fd, fcntl.LOCK_SH):
            return None  # nobody holds it (ours goes with the descriptor)
        return _read(path) or {}
    finally:
        os.close(fd)


def holders(path: Path) -> list[int]:
    """The processes that have the lock file open (slow: for an error message)."""
    found = []
    for p in psutil.process_iter():
        try:
            if any(f.path == str(path) for f in p.open_files()):
                found.append(p.pid)
        except psutil.Error:
            pass
    return found


def _try_lock(fd: int, kind: int) -> bool:
    try:
        fcntl.flock(fd, kind | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _read(path: Path) -> dict | None:
    try:
        holder = json.loads(path.read_text() or "null")
    except (OSError, ValueError):
        return None  # written part-way by a start that died at once: an old run's, in effect
    return holder if isinstance(holder, dict) and "pid" in holder else None


def _main_alive(holder: dict) -> bool:
    """The holder's main process runs (its pid with its start time: a pid alone may be reused)."""
    try:
        p = psutil.Process(int(holder["pid"]))
        return p.create_time() == holder.get("started") and p.status() != psutil.STATUS_ZOMBIE
    except (psutil.Error, ValueError, TypeError):
        return False
