"""Supervisor: the Thespian actor that starts a node's host processes and restarts them, the shell
of the restart policy in actors/runtime/restarts.py (which decides everything: backoff, the
restart intensity, the gate that holds the AMQP listeners until every host serves).

It creates one HostActor (one OS process) per HostSpec and knows that process's pid from the
moment it is forked (the child that appeared under this process with `createActor`, which
forks before it returns). Exits are found by its own watch, every `watch_interval_s` and at once
when Thespian reports a `ChildActorExited`: waitid(WNOWAIT) on each host's pid says whether it
exited and how, without reaping it, so Thespian still reaps its own children. Supervision does not
depend on Thespian reporting each exit: once it has handed over one child's exit, Thespian reaps
every other child dead by then without a word (of two hosts killed together, the second was
never restarted). A child found dead is reported back to Thespian as a `ChildActorExited` of our
own, which makes it reap the child and forget its address.

It tells the main process `NodeServing` once every host serves and `NodeFailed` when the policy
gives up; on StopNode it stops the hosts, kills those still running at the deadline and answers
`NodeStopped` once none is left. It forwards control asks to the named host and relays the answer;
asked itself ("$supervisor"): "status" (hosts, restarts), "state" (serving, failed, stopping, the
hosts not serving), "node_status" (node_status.py, for `warrenctl status`).
"""
from __future__ import annotations

import os
import signal
import time
from datetime import timedelta
from typing import Any

import psutil
import structlog
from thespian.actors import ActorExitRequest, ActorTypeDispatcher, ChildActorExited, WakeupMessage

from actors.runtime import logs
from actors.runtime.control import (ControlAsk, ControlReply, Forwarded, HostSpec, HostStarted, Listen, Listening,
                                    NodeFailed, NodeServing, NodeStopped, StartHost, StartNode, StopNode,
                                    Supervising)
from actors.runtime.host import HostActor
from actors.runtime.node_status import listeners, node_status
from actors.runtime.restarts import Policy, Supervision
from effects import AllStopped, GiveUp, KillHost, Log, NodeServes, OpenListeners, SpawnHost, StopHost
from effects.interpreter import Interpreter

log = structlog.get_logger("warren.supervisor")

watch_interval_s = 0.2


def now_ms() -> int:
    return int(time.monotonic() * 1000)


def exit_of(pid: int, process: Any = None) -> str | None:
    """How child `pid` ended ("killed by SIGKILL", "exited with status 1"), None while it runs.
    `process`: Thespian's multiprocessing.Process for it, which holds the status once Thespian
    has reaped the child (waitid can no longer tell then)."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        code = getattr(process, "exitcode", None)
        return _ended(code >= 0, abs(code)) if code is not None else "exited"
    if info is None:
        return None
    return _ended(info.si_code == os.CLD_EXITED, info.si_status)


def _ended(exited: bool, status: int) -> str:
    if exited:
        return f"exited with status {status}"
    try:
        return f"killed by {signal.Signals(status).name}"
    except ValueError:
        return f"killed by signal {status}"


def _forked_process(actor: Any, pid: int) -> Any:
    """Thespian's multiprocessing.Process for child `pid` (its actor manager's list of children),
    or None where that internal list is not there."""
    children = getattr(getattr(actor, "_myRef", None), "_child_procs", ())
    return next((c.childProc for c in children if getattr(c.childProc, "pid", None) == pid), None)


class Supervisor(ActorTypeDispatcher):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._specs: dict[str, HostSpec] = {}
        self._hosts: dict[str, Any] = {}  # host name -> its HostActor's address
        self._processes: dict[str, Any] = {}  # host name -> Thespian's Process for it, for its exit status
        self._directory: dict[str, str] = {}
        self._node_pid = 0
        self._node_name = ""
        self._main: Any = None        # the main process's actor system, told NodeServing / NodeFailed
        self._stop_asker: Any = None  # told NodeStopped
        self._core: Supervision | None = None
        self._run = Interpreter({SpawnHost: self._spawn, KillHost: self._kill, StopHost: self._stop_host,
                                 OpenListeners: self._open, NodeServes: self._serves, GiveUp: self._give_up,
                                 AllStopped: self._all_stopped, Log: self._log})

    def receiveMsg_StartNode(self, msg: StartNode, sender: Any) -> None:
        if self._core is not None:
            return
        self._directory = dict(msg.directory)
        self._node_pid = msg.node_pid
        self._node_name = msg.node_name
        self._main = sender
        logs.configure("supervisor", msg.data_dir or None)
        self._specs = {spec.name: spec for spec in msg.specs}
        self._core = Supervision([(s.name, s.listens) for s in msg.specs], Policy(stop_timeout_ms=msg.stop_timeout_ms))
        self.send(sender, Supervising(os.getpid(), os.getppid()))
        self._run(self._core.start(now_ms()))
        self.wakeupAfter(timedelta(seconds=watch_interval_s))

    # -- the policy's effects ------------------------------------------------------------------
    def _spawn(self, e: SpawnHost) -> None:
        before = self._children()
        address = self.createActor(HostActor)  # forks the host's process before it returns
        new = self._children() - before
        pid = new.pop() if len(new) == 1 else 0
        self._hosts[e.host] = address
        self._processes[e.host] = _forked_process(self, pid)
        self.send(address, StartHost(self._specs[e.host], self._directory))
        log.info("supervisor.host_forked", host=e.host, pid=pid)
        self._run(self._core.forked(e.host, pid, now_ms()))

    def _kill(self, e: KillHost) -> None:
        try:
            os.kill(e.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def _stop_host(self, e: StopHost) -> None:
        self.send(self._hosts[e.host], ActorExitRequest())

    def _open(self, e: OpenListeners) -> None:
        self.send(self._hosts[e.host], Listen())

    def _serves(self, e: NodeServes) -> None:
        self.send(self._main, NodeServing())

    def _give_up(self, e: GiveUp) -> None:
        self.send(self._main, NodeFailed(e.host, e.reason))

    def _all_stopped(self, e: AllStopped) -> None:
        if self._stop_asker is not None:
            self.send(self._stop_asker, NodeStopped())

    def _log(self, e: Log) -> None:
        getattr(log, e.level)(e.event, **dict(e.fields))

    # -- what the hosts and Thespian say ---------------------------------------------------------
    def receiveMsg_HostStarted(self, msg: HostStarted, sender: Any) -> None:
        if msg.error is None:
            log.info("supervisor.host_started", host=msg.name, pid=msg.pid)
        self._run(self._core.started(msg.name, msg.pid, msg.error, now_ms()))

    def receiveMsg_Listening(self, msg: Listening, sender: Any) -> None:
        self._run(self._core.opened(msg.name, msg.pid, msg.error, now_ms()))

    def receiveMsg_ChildActorExited(self, msg: ChildActorExited, sender: Any) -> None:
        if self._core is not None:
            self._watch()

    def receiveMsg_WakeupMessage(self, msg: WakeupMessage, sender: Any) -> None:
        self._watch()
        self._run(self._core.tick(now_ms()))
        self.wakeupAfter(timedelta(seconds=watch_interval_s))

    def _watch(self) -> None:
        for name, pid in self._core.processes():
            cause = exit_of(pid, self._processes.get(name))
            if cause is None:
                continue
            # let Thespian reap it and forget its address, if it has not: our handler of this
            # message only looks again, and finds this pid no longer watched
            self.send(self.myAddress, ChildActorExited(self._hosts[name]))
            self._run(self._core.exited(name, pid, cause, now_ms()))

    def _children(self) -> set[int]:
        return {p.pid for p in psutil.Process().children()}

    # -- the main process and warrenctl ----------------------------------------------------------
    def receiveMsg_StopNode(self, msg: StopNode, sender: Any) -> None:
        self._stop_asker = sender
        self._run(self._core.stop(now_ms()))

    def receiveMsg_ControlAsk(self, msg: ControlAsk, sender: Any) -> None:
        if msg.host == "$supervisor":
            self.send(sender, ControlReply(True, self._about_node(msg.op)))
            return
        address = self._hosts.get(msg.host)
        if address is None:
            self.send(sender, ControlReply(False, f"no host {msg.host!r} on this node"))
            return
        if not self._core.running(msg.host):
            self.send(sender, ControlReply(False, f"host {msg.host} is restarting"))
            return
        # the host answers the original asker directly, so slow asks do not queue up here
        self.send(address, Forwarded(msg, sender))

    def _about_node(self, op: str) -> dict:
        core = self._core
        if core is None:
            return {"error": "the supervisor has not started the node yet"}
        if op == "node_status":
            return node_status(self._node_name, self._specs.values(), core.hosts, self._node_pid)
        if op == "state":
            return {"node": self._node_name, "listeners": listeners(self._specs.values()),
                    "serving": core.served and core.failed is None and not core.stopping,
                    "failed": core.failed.reason if core.failed else None, "stopping": core.stopping,
                    "not_serving": core.not_serving()}
        return {"hosts": sorted(self._specs), "restarts": sum(h.restarts for h in core.hosts.values())}
