"""Every process of a node ends with the node's main process, however that ends (kill -9 too), and
every host ends with the supervisor that forked it.

The main process makes a pipe before anything forks (`anchor`) and holds its write end; nothing is
ever written to it. Every process forked below it (Thespian's admin, its daemonising parent, the
logger, the supervisor, the hosts: all forks of the main process, so all run the at-fork hook
registered here) closes its inherited copy of the write end and starts a thread that blocks
reading the read end. When the main process is gone, by any signal, the kernel closes the last
write end, the read returns end-of-file, and the thread ends its process at once, as PostgreSQL's
backends watch the postmaster through a pipe. A pipe, not PR_SET_PDEATHSIG, because the admin's
parent is the short-lived process Thespian daemonises through, not the main process.

A host also dies with its parent, the supervisor (`die_with_parent`): PR_SET_PDEATHSIG, which
the kernel delivers when the thread that forked the process ends (the supervisor forks from its
only thread, so when the supervisor ends), and a check that the parent did not die before the
call (a host the supervisor forked just as it died would otherwise never learn of it). Those
hosts' replacements are started by the main process with a new supervisor.

The hook also puts SIGTERM and SIGINT back to their defaults in the children: the main process's
handlers (which only set its stop event) mean nothing in them, and made Thespian's admin, which
sets no handler of its own for them, ignore SIGTERM. Thespian's actors set theirs after the fork.

A shell module (os, signal, threading, ctypes); only run_node calls `anchor`.
"""
from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import threading

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
main_gone_exit_status = 0  # nobody waits for this status: the main process is gone

_read_fd: int | None = None
_write_fd: int | None = None  # held by the main process only


def anchor() -> None:
    """Make the pipe every process forked from here on watches (idempotent)."""
    global _read_fd, _write_fd
    if _read_fd is not None:
        return
    _read_fd, _write_fd = os.pipe()  # not inheritable: an exec'd program keeps neither end
    os.register_at_fork(after_in_child=_in_child)


def _in_child() -> None:
    global _write_fd
    if _write_fd is not None:
        os.close(_write_fd)
        _write_fd = None  # the number may be reused in this process: never close it again
    try:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
    except ValueError:  # forked from a thread other than the main one: no handlers to reset there
        pass
    threading.Thread(target=_watch, args=(_read_fd,), name="lifeline", daemon=True).start()


def _watch(fd: int) -> None:
    try:
        while os.read(fd, 1):
            pass
    finally:
        os._exit(main_gone_exit_status)


def forked_by() -> int:
    """The pid of the process that forked this one, as multiprocessing recorded it before the fork:
    `os.getppid()` asked later names whoever adopted the process once that parent was gone."""
    parent = multiprocessing.parent_process()
    return parent.pid if parent is not None else os.getppid()


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when `parent` (the process that forked it) ends; exit now if it has."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # no prctl: not Linux
        pass
    if os.getppid() != parent:
        os._exit(0)
