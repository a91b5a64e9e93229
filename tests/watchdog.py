"""The suite's last line of defence against a test that hangs past its pytest-timeout.

pytest-timeout's signal method raises in the main thread when a test overruns; an exception raised
where Python swallows it (a `__del__`, a weakref callback, a `finally` that blocks again) leaves
the test blocked for good, and the whole run with it (CI's 90 minutes went that way once). This
watchdog runs beside every test: once the test is `grace_s` past its timeout it prints every
thread's stack on the real terminal (capture suspended), then kills the processes the run started
(nodes, workers, RabbitMQ oracles), which unblocks a client waiting on one of their sockets, so the
test ends, is reported failed, and the run goes on; if the test is still blocked `grace_s` later, it ends the run with
exit status 1 rather than let it hang. The grace is the ini option `watchdog_grace` (seconds)."""
from __future__ import annotations

import os
import sys
import threading
import traceback

import psutil
import pytest

def _timeout_of(item: pytest.Item) -> float:
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        return float(marker.args[0])
    return float(item.config.getini("timeout") or 0)


def _kill_descendants() -> int:
    children = psutil.Process().children(recursive=True)
    for child in children:
        try:
            child.kill()
        except psutil.Error:
            pass
    return len(children)


class Watchdog:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.grace_s = float(config.getini("watchdog_grace"))
        self.fired: set[str] = set()

    def _say(self, text: str) -> None:
        capman = self.config.pluginmanager.getplugin("capturemanager")
        if capman is not None:
            capman.suspend_global_capture(in_=True)
        names = {t.ident: t.name for t in threading.enumerate()}
        stacks = "".join(f"--- thread {names.get(ident, ident)}\n" + "".join(traceback.format_stack(frame))
                         for ident, frame in sys._current_frames().items() if ident != threading.get_ident())
        sys.stderr.write(f"\n\nwatchdog: {text}\n{stacks}")
        sys.stderr.flush()

    def _watch(self, nodeid: str, timeout_s: float, done: threading.Event) -> None:
        grace_s = self.grace_s
        if done.wait(timeout_s + grace_s):
            return
        self.fired.add(nodeid)
        self._say(f"{nodeid} is {grace_s:.0f} s past its {timeout_s:.0f} s timeout; its stacks follow, "
                  "and every process this run started is killed")
        killed = _kill_descendants()
        sys.stderr.write(f"watchdog: killed {killed} processes\n")
        if done.wait(grace_s):
            return
        self._say(f"{nodeid} is still blocked; ending the run")
        os._exit(1)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item):
        timeout_s = _timeout_of(item)
        done = threading.Event()
        if timeout_s > 0:
            threading.Thread(target=self._watch, args=(item.nodeid, timeout_s, done),
                             name="watchdog", daemon=True).start()
        try:
            yield
        finally:
            done.set()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        outcome = yield
        report = outcome.get_result()
        if report.when == "teardown" and item.nodeid in self.fired:
            report.outcome = "failed"
            report.longrepr = f"watchdog: {item.nodeid} hung past its timeout; its processes were killed"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("watchdog_grace", "seconds past a test's timeout before the watchdog steps in",
                  default="60")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(Watchdog(config), "warren-watchdog")
