"""The supervisor's restart policy, a pure core: which host process to start, kill or open, when
the node serves, and when it gives up (OTP's one_for_one supervisor with a restart intensity).

Theory of operation. The shell (actors/runtime/supervisor.py) feeds in what it sees, each with
the time as monotonic milliseconds: `start`, `forked` (the pid of a process it made for
`SpawnHost`), `started` (the host's HostStarted), `opened` (its answer to `OpenListeners`),
`exited` (the shell's own watch saw the pid end: supervision never waits for Thespian to report
a child's exit), `tick`, `stop`. Each returns the effects to carry out. A host is in one phase:

    spawning -> starting -> [started ->] [opening ->] serving
         any phase with a process --exit--> down --backoff--> spawning
    starting/opening --error--> failing (killed; its exit follows) --exit--> down

Every exit of a host outside a stop, at start or later, whatever ended it, is a restart: counted
per host, logged with its cause, and run after a backoff that grows with the restarts in the
last `period_ms` (`backoff_ms[k-1]` for the k-th). A host with more than `intensity` restarts in
`period_ms` makes the node give up (`GiveUp`, naming the host and the last cause it gave: the
error it reported, else how its process ended); nothing is restarted after that.

The gate: until the node has served once, a host with client listeners waits in `started` and
none opens until every host has started, so a client never reaches a node part of which is
missing; `NodeServes` follows once every host serves. After that a listening host that
restarted opens as soon as it has started.

Invariants: a host has at most one process: `SpawnHost` is returned only from `down`, entered only
once the old process's exit was seen (two incarnations would share sockets and data files).
Answers about a pid that is not the host's current one (from a process already replaced) are
ignored. On `stop`, each host with a process gets `StopHost`; those still running after
`stop_timeout_ms` get `KillHost`; `AllStopped` once none is left.

Left out: one_for_all and rest_for_one among hosts (a host's peers find out through their links,
and each recovers what it owns); the node's main process restarts the control plane above the
supervisor with an `Intensity` of its own (actors/runtime/node_process.py).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Iterable

from effects import AllStopped, GiveUp, KillHost, Log, NodeServes, OpenListeners, SpawnHost, StopHost

# the phases; a host has a process (pid) in starting, started, opening, serving, failing, stopping
SPAWNING, STARTING, STARTED, OPENING, SERVING, FAILING, DOWN, STOPPING, STOPPED = (
    "spawning", "starting", "started", "opening", "serving", "failing", "down", "stopping", "stopped")


class Intensity:
    """Restarts within a sliding `period_ms`: the delay before the next, or None past `limit`."""

    def __init__(self, limit: int, period_ms: int, backoff_ms: tuple[int, ...]) -> None:
        assert limit >= 1 and period_ms > 0 and backoff_ms
        self.limit = limit
        self.period_ms = period_ms
        self.backoff_ms = backoff_ms
        self._times: deque[int] = deque()

    def restart(self, now_ms: int) -> int | None:
        self._times.append(now_ms)
        while self._times[0] <= now_ms - self.period_ms:
            self._times.popleft()
        n = len(self._times)
        if n > self.limit:
            return None
        return self.backoff_ms[min(n, len(self.backoff_ms)) - 1]

    def recent(self) -> int:
        return len(self._times)


@dataclass(frozen=True)
class Policy:
    intensity: int = 5             # restarts of one host within period_ms before the node gives up
    period_ms: int = 30_000
    backoff_ms: tuple[int, ...] = (0, 250, 500, 1000, 2000)
    stop_timeout_ms: int = 30_000  # a stop's deadline: then the hosts still running are killed


@dataclass
class Host:
    name: str
    listens: bool
    intensity: Intensity
    phase: str = DOWN
    pid: int = 0
    restarts: int = 0
    restart_at_ms: int = 0
    cause: str = ""  # why its last process failed or ended


class Supervision:
    def __init__(self, hosts: Iterable[tuple[str, bool]], policy: Policy = Policy()) -> None:
        """`hosts`: (name, whether it has client listeners), in start order."""
        self.policy = policy
        self.hosts = {name: Host(name, listens, Intensity(policy.intensity, policy.period_ms, policy.backoff_ms))
                      for name, listens in hosts}
        self.served = False          # every host served once: the gate is open
        self.failed: GiveUp | None = None
        self.stopping = False
        self._stop_deadline_ms = 0
        self._killed_at_deadline = False
        self._said_stopped = False

    # -- what the shell asks ------------------------------------------------------------------
    def processes(self) -> list[tuple[str, int]]:
        """(host, pid) of every host process the shell must watch."""
        return [(h.name, h.pid) for h in self.hosts.values() if h.pid]

    def running(self, name: str) -> bool:
        """Whether `name` has a process that can be asked something."""
        h = self.hosts.get(name)
        return h is not None and h.pid != 0 and h.phase not in (FAILING, STOPPING)

    def not_serving(self) -> list[str]:
        return [h.name for h in self.hosts.values() if h.phase != SERVING]

    # -- inputs ----------------------------------------------------------------------------------
    def start(self, now_ms: int) -> list:
        out: list = []
        for h in self.hosts.values():
            out += self._spawn(h)
        return out

    def forked(self, name: str, pid: int, now_ms: int) -> list:
        h = self.hosts[name]
        if h.phase != SPAWNING:
            return []
        if not pid:
            return self._gone(h, "its process did not appear", now_ms)
        h.pid, h.phase = pid, STARTING
        if self.stopping:  # forked just before the stop: stopped like the others
            h.phase = STOPPING
            return [StopHost(name, pid)]
        return []

    def started(self, name: str, pid: int, error: str | None, now_ms: int) -> list:
        h = self.hosts[name]
        if h.pid != pid or h.phase != STARTING:
            return []
        if error:
            return self._fail(h, "supervisor.host_start_failed", error)
        if h.listens and not self.served:
            h.phase = STARTED
            return self._open_gate()
        return self._open_or_serve(h)

    def opened(self, name: str, pid: int, error: str | None, now_ms: int) -> list:
        h = self.hosts[name]
        if h.pid != pid or h.phase != OPENING:
            return []
        if error:
            return self._fail(h, "supervisor.listeners_failed", error)
        h.phase = SERVING
        return self._serves()

    def exited(self, name: str, pid: int, cause: str, now_ms: int) -> list:
        h = self.hosts[name]
        if h.pid != pid or not pid:
            return []
        h.pid = 0
        if h.phase == STOPPING:
            h.phase = STOPPED
            return self._all_stopped()
        if h.phase != FAILING:  # a failing host's cause is the error it reported, not the kill
            h.cause = cause
        return self._gone(h, cause, now_ms)

    def tick(self, now_ms: int) -> list:
        out: list = []
        if self.stopping:
            if now_ms >= self._stop_deadline_ms and not self._killed_at_deadline:
                self._killed_at_deadline = True
                for h in self.hosts.values():
                    if h.pid:
                        out.append(Log("supervisor.host_killed", "warning", (
                            ("host", h.name), ("pid", h.pid),
                            ("reason", f"still running {self.policy.stop_timeout_ms} ms after the stop"))))
                        out.append(KillHost(h.name, h.pid))
            return out
        if self.failed is None:
            for h in self.hosts.values():
                if h.phase == DOWN and now_ms >= h.restart_at_ms:
                    out += self._spawn(h)
        return out

    def stop(self, now_ms: int) -> list:
        if self.stopping:
            return []
        self.stopping = True
        self._stop_deadline_ms = now_ms + self.policy.stop_timeout_ms
        out: list = []
        for h in self.hosts.values():
            if h.pid:
                h.phase = STOPPING
                out.append(StopHost(h.name, h.pid))
            elif h.phase != SPAWNING:  # a spawning host is stopped once its pid is known
                h.phase = STOPPED
        return out + self._all_stopped()

    # -- steps -----------------------------------------------------------------------------------
    def _spawn(self, h: Host) -> list:
        h.phase, h.pid = SPAWNING, 0
        return [SpawnHost(h.name)]

    def _fail(self, h: Host, event: str, error: str) -> list:
        h.phase, h.cause = FAILING, error
        return [Log(event, "error", (("host", h.name), ("pid", h.pid), ("error", error))), KillHost(h.name, h.pid)]

    def _gone(self, h: Host, cause: str, now_ms: int) -> list:
        """The host has no process any more: restart it, or give up (or, in a stop, it is stopped)."""
        if self.stopping:
            h.phase = STOPPED
            return self._all_stopped()
        h.phase = DOWN
        if self.failed is not None:
            return []
        h.restarts += 1
        delay = h.intensity.restart(now_ms)
        if delay is None:
            reason = (f"host {h.name} exited {h.intensity.recent()} times within "
                      f"{self.policy.period_ms / 1000:g} s; the last time: {h.cause or cause}")
            self.failed = GiveUp(h.name, reason)
            return [Log("supervisor.giving_up", "error", (("host", h.name), ("reason", reason))), self.failed]
        h.restart_at_ms = now_ms + delay
        out = [Log("supervisor.host_exited", "warning", (("host", h.name), ("cause", cause),
                                                        ("restarts", h.restarts), ("restart_in_ms", delay)))]
        return out + (self._spawn(h) if delay == 0 else [])

    def _open_or_serve(self, h: Host) -> list:
        if h.listens:
            h.phase = OPENING
            return [OpenListeners(h.name, h.pid)]
        h.phase = SERVING
        return self._serves()

    def _open_gate(self) -> list:
        """Before the node first serves: once every host has started, open the held listeners."""
        if any(h.phase not in (STARTED, SERVING) for h in self.hosts.values()):
            return []
        out: list = []
        for h in self.hosts.values():
            if h.phase == STARTED:
                out += self._open_or_serve(h)
        return out

    def _serves(self) -> list:
        if self.served:
            return []
        if any(h.phase != SERVING for h in self.hosts.values()):
            return self._open_gate()  # a host without listeners may have been the last to start
        self.served = True
        return [Log("supervisor.node_serving", fields=(("hosts", list(self.hosts)),)), NodeServes()]

    def _all_stopped(self) -> list:
        if self._said_stopped or not all(h.phase == STOPPED for h in self.hosts.values()):
            return []
        self._said_stopped = True
        return [AllStopped()]
