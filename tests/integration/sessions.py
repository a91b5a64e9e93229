"""Subprocesses the integration tests start in a session of their own (start_new_session=True:
a worker and the processes it forks, a node and its hosts), so that one signal to the session
reaches every process of it, children the test never saw included."""
from __future__ import annotations

import os
import signal
import subprocess


def kill_session(proc: subprocess.Popen, wait_s: float) -> None:
    """kill -9 of `proc`'s whole session (mid-work, if it works), then reap `proc`."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:  # the session is gone already
        pass
    proc.wait(wait_s)


def stop_session(proc: subprocess.Popen, term_s: float = 20.0, kill_wait_s: float = 30.0) -> None:
    """SIGTERM (a warm shutdown), up to `term_s` for `proc` to exit, then kill -9 of whatever is
    left of its session."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(term_s)
        except subprocess.TimeoutExpired:
            pass
    kill_session(proc, kill_wait_s)
