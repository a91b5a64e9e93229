"""One incarnation of a node's control plane, seen from its main process: Thespian's admin, the
admin's logger and the Supervisor (the hosts hang below the Supervisor).

`start` brings up a multiprocTCPBase actor system on the admin port (its own, never the process's
singleton, so a later incarnation gets a fresh one), creates the Supervisor and hands it the node; the
Supervisor's answer names its pid and its parent's, the admin (adopted by the main process, a
child subreaper, once the process Thespian daemonises through has exited); the logger is the
admin's other child. (A warrenctl that asked meanwhile may have made the admin create the
Supervisor first, under its global name: it is the same actor.)
`lost` names whichever of the three is no longer running: the main process watches them, since
nothing else would (the admin dies with its logger; with the admin gone nobody reaches the
Supervisor; with the Supervisor gone the hosts die with it). `event` waits for what the
Supervisor tells the main process (NodeServing, NodeFailed); `stop` stops the hosts and the actor
system, each step bounded by a deadline; `abandon` drops the actor system without asking anything
of a control plane that is broken.
"""
from __future__ import annotations

import threading
import time
from typing import Any

import psutil
from thespian.actors import ActorSystem

from actors.runtime import process_tree
from actors.runtime.control import NodeStopped, StartNode, StopNode, Supervising, supervisor_name
from actors.runtime.supervisor import Supervisor

ask_timeout_s = 10.0
find_timeout_s = 10.0
shutdown_timeout_s = 5.0
poll_s = 0.02


class ControlPlaneError(RuntimeError):
    pass


class ControlPlane:
    def __init__(self, admin_port: int) -> None:
        self.admin_port = admin_port
        self.asys: ActorSystem | None = None
        self.supervisor: Any = None
        self.processes: dict[str, psutil.Process] = {}  # admin, logger, supervisor

    def start(self, start: StartNode) -> None:
        self.asys = ActorSystem("multiprocTCPBase", {"Admin Port": self.admin_port}, transientUnique=True)
        process_tree.reap()  # the admin's daemonising parent, which has exited
        self.supervisor = self.asys.createActor(Supervisor, globalName=supervisor_name)
        reply = self.asys.ask(self.supervisor, start, ask_timeout_s)
        if not isinstance(reply, Supervising):
            raise ControlPlaneError(f"the supervisor did not take the node (answered {reply!r})")
        admin = psutil.Process(reply.admin_pid)
        self.processes = {"admin": admin, "logger": _logger(admin, reply.pid), "supervisor": psutil.Process(reply.pid)}

    def lost(self) -> str | None:
        """Which of admin, logger and supervisor has exited (a zombie counts), if any."""
        for name, p in self.processes.items():
            try:
                if not p.is_running() or p.status() == psutil.STATUS_ZOMBIE:
                    return f"{name} (pid {p.pid})"
            except psutil.NoSuchProcess:
                return f"{name} (pid {p.pid})"
        return None

    def event(self, timeout_s: float) -> Any:
        """The next message the Supervisor sent the main process, or None after `timeout_s`."""
        return self.asys.listen(timeout_s)

    def ask(self, msg: Any, timeout_s: float = ask_timeout_s) -> Any:
        return self.asys.ask(self.supervisor, msg, timeout_s)

    def stop(self, deadline: float) -> bool:
        """Stop the hosts (the Supervisor kills those still running at its deadline), then the actor
        system; False when a step ran out of time."""
        stopped = self._stop_hosts(deadline)
        done = threading.Event()

        def shut_down() -> None:
            try:
                self.asys.shutdown()
            finally:
                done.set()
        # the shutdown asks the admin and waits up to Thespian's 10 s: bounded here by the deadline
        threading.Thread(target=shut_down, name="thespian-shutdown", daemon=True).start()
        return done.wait(max(0.0, min(deadline - time.monotonic(), shutdown_timeout_s))) and stopped

    def _stop_hosts(self, deadline: float) -> bool:
        self.asys.tell(self.supervisor, StopNode())
        while time.monotonic() < deadline:
            if isinstance(self.asys.listen(min(0.2, max(0.0, deadline - time.monotonic()))), NodeStopped):
                return True
            if self.lost():
                return False
        return False

    def abandon(self) -> None:
        """Drop this process's end of the actor system (closed already after a shutdown)."""
        base = getattr(self.asys, "_systemBase", None)
        if base is not None:
            base.transport.close()  # nothing asked of a broken admin
        self.asys = None


def _logger(admin: psutil.Process, supervisor_pid: int) -> psutil.Process:
    """The admin's logger: its one child that is not the Supervisor."""
    deadline = time.monotonic() + find_timeout_s
    while True:
        try:
            others = [p for p in _running(admin.children()) if p.pid != supervisor_pid]
            if len(others) == 1:
                return others[0]
        except psutil.Error:
            pass
        if time.monotonic() > deadline:
            raise ControlPlaneError(f"Thespian's logger was not found below its admin: {_tree(psutil.Process())}")
        time.sleep(poll_s)  # looked while a process was starting or exiting


def _tree(me: psutil.Process) -> list[tuple[int, int, str]]:
    """(pid, ppid, status) of every process below this one, for an error."""
    found = []
    for p in me.children(recursive=True):
        try:
            found.append((p.pid, p.ppid(), p.status()))
        except psutil.Error:
            pass
    return found


def _running(processes: list[psutil.Process]) -> list[psutil.Process]:
    return [p for p in processes if p.status() != psutil.STATUS_ZOMBIE]
