"""The nemesis: carries a schedule out against the cluster under test, window by window.

A window's faults strike when its start comes (late if the one before overran: a restart waits for
the node to serve), stay for its duration from when they took effect, and are lifted in reverse order: a partition healed, a
killed node started again, a paused node resumed (a killed host was restarted by its supervisor
already). What a fault's target turned out to be (the metadata leader, a queue's leader) is
resolved when the window opens and written to the event log, with every strike and lift and how
long it took, so a run can be read against its availability plot. `heal_all` ends a campaign:
the network whole, every node resumed and running, every node seeing every other.
"""
from __future__ import annotations

import time
from typing import Callable

from tests.faults.checker import Ran
from tests.faults.cluster import FaultCluster
from tests.faults.schedule import Fault, Schedule, Window, grudge_of
from tests.faults.workload import History
from tests.waiting import until

heal_timeout_s = 180.0
LIFT_ORDER = {"partition": 0, "kill-host": 1, "pause": 2, "kill": 3}
poll_s = 0.2


class Nemesis:
    def __init__(self, cluster: FaultCluster, history: History, home: dict[str, str],
                 leader_of: Callable[[str], str | None], say: Callable[[str], None]) -> None:
        self.cluster = cluster
        self.history = history
        self.home = home            # queue -> the node that declared it
        self.leader_of = leader_of  # queue -> its leader's node, if the cluster can tell
        self.events: list[tuple[float, str]] = []
        self.say = say

    def event(self, text: str) -> None:
        t = round(self.history.now(), 2)
        self.events.append((t, text))
        self.say(f"{t:7.1f}  {text}")

    def run(self, schedule: Schedule) -> list[Ran]:
        start = self.history.now()
        ran = []
        for window in schedule.windows:
            self._sleep_until(start + window.start_s)
            undo, what = self.strike(window)
            struck = self.history.now()  # resolving a leader or killing a node takes a moment
            self._sleep_until(struck + window.duration_s)
            lifted = self.history.now()
            for lift in undo:
                lift()
            self.event(f"lifted {what} ({self.history.now() - lifted:.1f} s)")
            ran.append(Ran(window.nemesis, what, struck, lifted))
        return ran

    def strike(self, window: Window) -> tuple[list[Callable[[], None]], str]:
        """Strike the window's faults; their lifts, in the order they must run: the network healed
        before a paused node resumes and before a killed node starts again (a node restarted
        inside a minority cannot reach the metadata majority it needs to serve)."""
        lifts, described = [], []
        for fault in window.faults:
            lift, what = self._strike(fault)
            lifts.append((LIFT_ORDER[fault.kind], lift))
            described.append(what)
        what = " + ".join(described)
        self.event(f"struck {what}")
        return [lift for _, lift in sorted(lifts, key=lambda pair: pair[0])], what

    def _strike(self, fault: Fault) -> tuple[Callable[[], None], str]:
        c = self.cluster
        if fault.kind == "partition":
            grudge = fault.grudge
            what = fault.describe()
            if fault.variant in ("leader", "queue-leader"):
                target = c.metadata_leader() if fault.variant == "leader" else (
                    self.leader_of(fault.queue) or self.home[fault.queue])
                if target is None:
                    return (lambda: None), f"{what}: no leader agreed on, nothing isolated"
                grudge = grudge_of([target], [n for n in c.names if n != target])
                what = f"{what} ({target} alone)"
            c.cut({n: set(away) for n, away in grudge.items()})
            return c.heal, what
        if fault.kind == "kill":
            c.kill(fault.node)
            return (lambda: self._restart(fault.node)), fault.describe()
        if fault.kind == "pause":
            c.pause(fault.node)
            return (lambda: c.resume(fault.node)), fault.describe()
        if fault.kind == "kill-host":
            try:
                pid = c.kill_host(fault.node, fault.variant)
            except (RuntimeError, KeyError, OSError) as e:
                return (lambda: None), f"{fault.describe()}: not done ({e})"
            return (lambda: None), f"{fault.describe()} (pid {pid})"
        raise ValueError(f"unknown fault {fault.kind!r}")

    def _restart(self, name: str) -> None:
        begun = time.monotonic()
        try:
            self.cluster.restart(name)
        except RuntimeError as e:  # it did not serve in time and was stopped: heal_all starts it again
            # the node's log tail (in the error) goes into the report: CI keeps no data dirs
            self.event(f"{name} did not serve within {time.monotonic() - begun:.0f} s of its restart: {e}")
            return
        self.event(f"{name} serving again after {time.monotonic() - begun:.1f} s")

    def heal_all(self) -> None:
        """Undo everything, then wait until every node runs and sees every other."""
        c = self.cluster
        c.heal()
        for name in c.names:
            if name in c.paused:
                c.resume(name)
            if not c.running(name):
                self._restart(name)
        if not until(c.all_running, "the cluster to heal", heal_timeout_s, every_s=poll_s, raises=False):
            raise TimeoutError(f"the cluster did not heal within {heal_timeout_s:.0f} s")
        self.event("healed: every node running and seeing every other")

    def _sleep_until(self, t: float) -> None:
        delay = t - self.history.now()
        if delay > 0:
            time.sleep(delay)  # the schedule's clock: faults are meant to last this long
