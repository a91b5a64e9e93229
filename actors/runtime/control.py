"""The control plane's vocabulary: host specs, the messages between supervisor and hosts, and
the `control` client that warrenctl and tests use to ask a host something.

Control messages travel through Thespian (pickled, a few hundred per second); no data-path
message ever does. They are defined here, in one importable module, because Thespian unpickles
them in every actor process.
"""
from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Any

supervisor_name = "warren-supervisor"  # the Supervisor's Thespian globalName
admin_probe_timeout_s = 1.0


@dataclass(frozen=True)
class HostSpec:
    """One host process: `entry` is "module:function", called as entry(runtime, spec)."""

    name: str
    entry: str
    config: dict = field(default_factory=dict)


@dataclass(frozen=True)
class StartNode:
    specs: tuple[HostSpec, ...]
    directory: dict
    node_pid: int


@dataclass(frozen=True)
class StartHost:
    spec: HostSpec
    directory: dict
    node_pid: int


@dataclass(frozen=True)
class HostStarted:
    name: str
    pid: int
    error: str | None = None


@dataclass(frozen=True)
class StopNode:
    pass


@dataclass(frozen=True)
class NodeStopped:
    pass


@dataclass(frozen=True)
class ControlAsk:
    host: str
    op: str
    args: dict
    timeout: float = 10.0


@dataclass(frozen=True)
class Forwarded:
    """A ControlAsk passed on by the Supervisor; the host answers `reply_to` directly."""

    ask: ControlAsk
    reply_to: Any


@dataclass(frozen=True)
class ControlReply:
    ok: bool
    value: Any


def _admin_listening(admin_port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", admin_port), timeout=admin_probe_timeout_s):
            return True
    except OSError:
        return False


def control(admin_port: int, host: str, op: str, args: dict, timeout: float = 10) -> Any:
    """Ask `host` of the node whose Thespian admin listens on `admin_port` to run `op`.

    Returns the host's answer; raises ConnectionError if no node is there, TimeoutError if the
    host did not answer in time, RuntimeError carrying the host's error text otherwise.
    """
    # Without this probe ActorSystem() would quietly start a fresh admin on that port.
    if not _admin_listening(admin_port):
        raise ConnectionError(f"no warren node on admin port {admin_port}")
    from thespian.actors import ActorSystem

    from actors.runtime.supervisor import Supervisor

    # transientUnique: a process may talk to several nodes; never the process-wide singleton
    system = ActorSystem("multiprocTCPBase", {"Admin Port": admin_port}, transientUnique=True)
    try:
        supervisor = system.createActor(Supervisor, globalName=supervisor_name)
        reply = system.ask(supervisor, ControlAsk(host, op, dict(args), timeout), timeout + 1)
    finally:
        # close our endpoint only: shutdown() would stop the node's actor system
        system._systemBase.transport.close()
    if reply is None:
        raise TimeoutError(f"host {host!r} did not answer {op!r} within {timeout} s")
    if not reply.ok:
        raise RuntimeError(reply.value)
    return reply.value
