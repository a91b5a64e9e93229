"""The control plane's vocabulary: host specs and the messages between supervisor and hosts (the
client that asks a host something is actors/runtime/client.py).

Control messages travel through Thespian (pickled, a few hundred per second); no data-path
message ever does. They are defined here, in one importable module, because Thespian unpickles
them in every actor process.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

supervisor_name = "warren-supervisor"  # the Supervisor's Thespian globalName
OPEN_LISTENERS = "open_listeners"  # the control op a host with client listeners opens them on


@dataclass(frozen=True)
class HostSpec:
    """One host process: `entry` is "module:function", called as entry(runtime, spec). A host that
    `listens` (client listeners: the AMQP port) opens them only when its control function is asked
    OPEN_LISTENERS, which the supervisor does once the rest of the node serves."""

    name: str
    entry: str
    config: dict = field(default_factory=dict)
    listens: bool = False


@dataclass(frozen=True)
class StartNode:
    specs: tuple[HostSpec, ...]
    directory: dict
    node_pid: int
    node_name: str = ""
    data_dir: str = ""  # where the node's log file is (actors/runtime/logs.py)
    stop_timeout_ms: int = 30_000  # a stop's deadline for the hosts, then they are killed


@dataclass(frozen=True)
class Supervising:
    """The Supervisor's answer to StartNode: its pid and its parent's, Thespian's admin."""

    pid: int
    admin_pid: int


@dataclass(frozen=True)
class NodeServing:
    """Told by the Supervisor to the main process: every host serves, every listener is open."""


@dataclass(frozen=True)
class NodeFailed:
    """Told by the Supervisor to the main process: a host went past the restart intensity."""

    host: str
    reason: str


@dataclass(frozen=True)
class StartHost:
    spec: HostSpec
    directory: dict


@dataclass(frozen=True)
class HostStarted:
    name: str
    pid: int
    error: str | None = None


@dataclass(frozen=True)
class Listen:
    """Supervisor -> host: open the client listeners now (the control op OPEN_LISTENERS)."""


@dataclass(frozen=True)
class Listening:
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
