"""A node's processes stay under its main process, and none outlives it.

Thespian daemonises its admin process: the process it forks calls setsid, forks the real admin and
exits. Left alone, that first child stays a zombie under the node's main process (nobody waits
for it; Thespian detaches it from multiprocessing) and the admin, with the supervisor, the logger
and the hosts below it, is reparented to PID 1. So the main process declares itself a child
subreaper (Linux's PR_SET_CHILD_SUBREAPER, as service managers do): orphans below it are
reparented to it instead of PID 1, and it reaps what exits. On stop it waits until every
descendant is gone, and after a timeout ends those left by their PIDs (`end_descendants`); a
control plane that broke is ended at once (`kill_descendants`).

A shell module (os, ctypes, psutil); only the node's main process calls it.
"""
from __future__ import annotations

import ctypes
import os
import signal
import time

import psutil
import structlog

log = structlog.get_logger("warren.node")

PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
descendants_exit_timeout_s = 10.0
poll_s = 0.05


def adopt_orphans() -> bool:
    """Make this process the reaper of its descendants' orphans; False where Linux's prctl is missing."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def reap() -> list[int]:
    """Wait for every child that has exited (never blocks); their PIDs."""
    reaped = []
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid == 0:
            return reaped
        reaped.append(pid)


def end_descendants(timeout_s: float = descendants_exit_timeout_s) -> list[int]:
    """Wait, reaping, until no descendant is left, not even a zombie (one whose parent exits before
    reaping it becomes ours: left behind, it would hang under PID 1); after `timeout_s` kill those
    still running, by PID. Returns the PIDs that had to be killed."""
    if _wait_for_none(psutil.Process(), timeout_s):
        return []
    return kill_descendants()


def kill_descendants(timeout_s: float = descendants_exit_timeout_s) -> list[int]:
    """SIGKILL every descendant still running, again and again until none is left, reaping them
    (waiting up to `timeout_s`): one may still be forking while the others die (an admin creating
    an actor), and its child would live on. Returns the PIDs killed."""
    me = psutil.Process()
    killed: list[int] = []
    deadline = time.monotonic() + timeout_s
    while True:
        reap()
        descendants = _descendants(me)
        if not descendants or time.monotonic() > deadline:
            break
        for p in descendants:
            if p.pid not in killed and _running(p):
                killed.append(p.pid)
                try:
                    os.kill(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        time.sleep(poll_s)  # they are dying; look again shortly
    if killed:
        log.warning("node.processes_killed", pids=killed)
    return killed


def _wait_for_none(me: psutil.Process, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        reap()
        if not _descendants(me):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(poll_s)  # they are exiting on their own; look again shortly


def _descendants(process: psutil.Process) -> list[psutil.Process]:
    try:
        return process.children(recursive=True)
    except psutil.Error:
        return []


def _running(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
