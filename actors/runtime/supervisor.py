"""Supervisor: the Thespian actor that starts a node's host processes and restarts them.

It creates one HostActor (one OS process) per HostSpec. Thespian's SIGCHLD handling tells it
`ChildActorExited` when a host process dies - a SIGKILL included (tests/actors check this) - and
it re-creates that host from the same spec. But once it has handed over one child's exit,
Thespian reaps every other child dead by then without a word (`_handleChildExited` ->
`_childExited`): of two hosts killed together (both connection hosts), the second was never
restarted. So the node watch also looks at each host's process and restarts one that is gone
unreported (a `ChildActorExited` for it coming later finds its address replaced, and is
ignored). It forwards control asks to the named host and relays the answer; asked itself ("$supervisor"), it answers with its hosts and restarts, or with
"node_status" the node's status (node_status.py). Every `node_watch_interval_s` it checks the node's main process; if that died
(kill -9), it takes the Thespian admin down with it so no process outlives the node.
"""
from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import psutil
import structlog
from thespian.actors import ActorExitRequest, ActorTypeDispatcher, ChildActorExited, WakeupMessage

from actors.runtime import logs
from actors.runtime.control import (ControlAsk, ControlReply, Forwarded, HostSpec, HostStarted, NodeStopped,
                                    StartHost, StartNode, StopNode)
from actors.runtime.host import HostActor, process_alive
from actors.runtime.node_status import HostRecord, node_status

log = structlog.get_logger("warren.supervisor")

node_watch_interval_s = 0.5


def _take_down_admin() -> None:
    """The node's main process was killed: end Thespian's admin (our parent) and its logger.

    The admin ignores SIGTERM, and nobody is left to ask it to shut down, so this kills them;
    the hosts notice the dead node themselves and exit. Then this process exits too.
    """
    admin = psutil.Process(os.getppid())
    for sibling in admin.children():
        if sibling.pid != os.getpid():
            sibling.kill()
    admin.kill()
    os._exit(0)


def _child_running(pid: int) -> bool:
    """Whether `pid` is a child of this process that runs (once reaped, its pid may be reused)."""
    try:
        process = psutil.Process(pid)
        return process.ppid() == os.getpid() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


class Supervisor(ActorTypeDispatcher):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._specs: dict[str, HostSpec] = {}
        self._hosts: dict[str, Any] = {}  # host name -> HostActor address
        self._directory: dict[str, str] = {}
        self._node_pid = 0
        self._node_name = ""
        self._records: dict[str, HostRecord] = {}  # host name -> its process and restarts
        self._stopping = False
        self.restarts = 0

    def receiveMsg_StartNode(self, msg: StartNode, sender: Any) -> None:
        self._directory = dict(msg.directory)
        self._node_pid = msg.node_pid
        self._node_name = msg.node_name
        logs.configure("supervisor", msg.data_dir or None)
        for spec in msg.specs:
            self._specs[spec.name] = spec
            self._start_host(spec)
        self.wakeupAfter(timedelta(seconds=node_watch_interval_s))
        self.send(sender, "started")

    def _start_host(self, spec: HostSpec) -> None:
        address = self.createActor(HostActor)
        self._hosts[spec.name] = address
        self.send(address, StartHost(spec, self._directory, self._node_pid))

    def receiveMsg_HostStarted(self, msg: HostStarted, sender: Any) -> None:
        if msg.error:
            log.error("supervisor.host_start_failed", host=msg.name, pid=msg.pid, error=msg.error)
        else:
            log.info("supervisor.host_started", host=msg.name, pid=msg.pid)
        self._records.setdefault(msg.name, HostRecord()).pid = msg.pid

    def receiveMsg_ChildActorExited(self, msg: ChildActorExited, sender: Any) -> None:
        name = next((n for n, a in self._hosts.items() if a == msg.childAddress), None)
        if name is None or self._stopping:
            return
        self._restart(name)

    def _restart(self, name: str) -> None:
        self.restarts += 1
        record = self._records.setdefault(name, HostRecord())
        record.restarts += 1
        record.pid = 0  # until the new one's HostStarted: the watch leaves a starting host alone
        log.warning("supervisor.host_exited", host=name, restart=self.restarts)
        self._start_host(self._specs[name])

    def receiveMsg_ControlAsk(self, msg: ControlAsk, sender: Any) -> None:
        if msg.host == "$supervisor":
            if msg.op == "node_status":
                answer = node_status(self._node_name, self._specs.values(), self._records, self._node_pid)
            else:
                answer = {"hosts": sorted(self._hosts), "restarts": self.restarts}
            self.send(sender, ControlReply(True, answer))
            return
        address = self._hosts.get(msg.host)
        if address is None:
            self.send(sender, ControlReply(False, f"no host {msg.host!r} on this node"))
            return
        # the host answers the original asker directly, so slow asks do not queue up here
        self.send(address, Forwarded(msg, sender))

    def receiveMsg_StopNode(self, msg: StopNode, sender: Any) -> None:
        self._stopping = True
        for address in self._hosts.values():
            self.send(address, ActorExitRequest())
        self.send(sender, NodeStopped())

    def receiveMsg_WakeupMessage(self, msg: WakeupMessage, sender: Any) -> None:
        if self._stopping:
            return
        if self._node_pid and not process_alive(self._node_pid):
            log.warning("supervisor.node_gone", node_pid=self._node_pid)
            self._stopping = True
            _take_down_admin()
            return
        for name, record in list(self._records.items()):
            if record.pid and not _child_running(record.pid):  # its exit went unreported
                # Thespian still counts the dead child among ours, and would wait for it to exit
                # when the node stops: tell it (this handler ignores the old address)
                self.send(self.myAddress, ChildActorExited(self._hosts[name]))
                self._restart(name)
        self.wakeupAfter(timedelta(seconds=node_watch_interval_s))
