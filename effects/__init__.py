"""The one effect vocabulary: what every pure core returns and every shell carries out.

A core never performs IO. Its inputs return a list of these frozen records and a shell (an actor in
a host process, or the deterministic simulator) carries them out IN LIST ORDER with one
`Interpreter` (effects/interpreter.py): a core that must persist before it sends puts the persist
first. Where an ordering rule needs more than list order, the rule is written down at the effect
that carries it (as Raft's are at its own effects: raft/core.py, raft/driver.py).

Addresses are opaque to cores: a core receives them in messages and hands them back in `Send.to`.
Messages are the typed records of actors/messages (one module per protocol); a core builds them,
the runtime encodes them (actors/runtime/envelope.py), nothing else looks inside.

The vocabulary, by who returns it:
- every core: `Send`, `StartTimer`, `CancelTimer`, `Log`;
- the connection and channel cores (socket side): `Write`, `CloseSocket`, `SetFrameMax`,
  `OpenChannel`, `ToChannel`, `ChannelsDown`, `Opened`, `CloseConnection`, `ChannelFinished`;
- the paging policy (flow/paging.py): `CutRamTargets`, `LiftRamTargets`;
- the heap policy of every host process (flow/heap.py): `TrimHeap`;
- the resource alarms: the memory and disk monitors (flow/alarms.py) `AlarmSet`, `AlarmCleared`;
  the cluster's view of them and each connection's throttle (flow/blocking.py)
  `ConserveResources`, `PauseReading`, `ResumeReading`;
- cluster membership (actors/cluster/membership.py): `SaveClusterFile`;
- the node core (actors/node/core.py): `ProposeCommand`, `AnswerAdmin`;
- the supervisor's restart policy (actors/runtime/restarts.py): `SpawnHost`, `KillHost`, `StopHost`,
  `OpenListeners`, `NodeServes`, `GiveUp`, `AllStopped`.
The Raft core is not here: raft/ declares its own effects (raft/effects.py), as Ra does, and the
shells that run Raft groups translate them (raft/driver.py's ports). This package imports nothing:
every layer but raft/ may use it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Hashable

# -- every core ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Send:
    """Send the typed message `msg` to `to`. `credit` units are taken from the sender's link to
    `to` (credit flow, flow/credit.py); the runtime batches sends per destination host."""

    to: Hashable
    msg: Any
    credit: int = 0


@dataclass(frozen=True, slots=True)
class StartTimer:
    """Call the core's timer input for `name` after `ticks` (the core's unit: ms or ticks)."""

    name: str
    ticks: int


@dataclass(frozen=True, slots=True)
class CancelTimer:
    name: str


@dataclass(frozen=True, slots=True)
class Log:
    """A structured log event the shell passes to structlog (cores do not log themselves)."""

    event: str
    level: str = "info"
    fields: tuple[tuple[str, Any], ...] = ()


# -- the socket side: connection and channel cores -----------------------------------------------


@dataclass(frozen=True, slots=True)
class Write:
    """Frames for the client's socket, in order (one writelines per batch)."""

    chunks: list


@dataclass(frozen=True, slots=True)
class CloseSocket:
    reason: str


@dataclass(frozen=True, slots=True)
class SetFrameMax:
    """The negotiated frame_max: the parser refuses larger frames from now on."""

    frame_max: int


@dataclass(frozen=True, slots=True)
class OpenChannel:
    number: int


@dataclass(frozen=True, slots=True)
class ToChannel:
    """A complete command for channel `number` (its core takes it)."""

    number: int
    command: Any


@dataclass(frozen=True, slots=True)
class ChannelsDown:
    """The connection is ending: every channel releases what it holds, without a word to the client."""


@dataclass(frozen=True, slots=True)
class Opened:
    """connection.open succeeded: what channels of this connection run as."""

    vhost: str
    user: str
    frame_max: int
    capabilities: dict = field(default_factory=dict, hash=False)
    tags: tuple[str, ...] = ()  # the user's tags when it logged in (the channels' impersonator check)


@dataclass(frozen=True, slots=True)
class LoginAttempt:
    """A login was decided (rabbit_core_metrics' auth attempt): counted, and a refusal logged with
    RabbitMQ's text (`reason`, e.g. "PLAIN login refused: user 'bob' - invalid credentials")."""

    user: str
    succeeded: bool
    reason: str = ""


@dataclass(frozen=True, slots=True)
class CloseConnection:
    """A connection-level error found while a channel handled a command (an AmqpError)."""

    error: Any


@dataclass(frozen=True, slots=True)
class ChannelFinished:
    """The channel is over (close-ok sent or received): the shell may forget it."""


# -- the paging policy (flow/paging.py) ---------------------------------------------------------

@dataclass(frozen=True, slots=True)
class CutRamTargets:
    """Set every pageable queue's (every level's) RAM target to `target(its bodies in RAM now)`."""

    factor: float

    def target(self, ram_messages: int) -> int:
        return int(ram_messages * self.factor)


@dataclass(frozen=True, slots=True)
class LiftRamTargets:
    """Remove every pageable queue's RAM target: bodies may stay in RAM again."""


# -- the heap policy (flow/heap.py) ------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class TrimHeap:
    """Give the whole free pages of the process's C heaps back to the OS (glibc's malloc_trim(0))."""


# -- the resource alarms (flow/alarms.py, flow/blocking.py) ------------------------------------

@dataclass(frozen=True, slots=True)
class AlarmSet:
    """`node`'s alarm for `resource` ("memory" or "disk") is now set: tell every node of the cluster,
    this one included (each takes it with `ClusterAlarms.set`). Returned after the Log that explains it."""

    resource: str
    node: str


@dataclass(frozen=True, slots=True)
class AlarmCleared:
    """`node`'s alarm for `resource` is over: tell every node of the cluster (`ClusterAlarms.clear`)."""

    resource: str
    node: str


@dataclass(frozen=True, slots=True)
class ConserveResources:
    """An alarm for `resource` is now in force on some node of the cluster (`on`), or on none any
    more: tell every connection of this node (`ConnectionThrottle.conserve`), as rabbit_alarm tells
    every registered reader."""

    resource: str
    on: bool


@dataclass(frozen=True, slots=True)
class PauseReading:
    """The connection is blocked: stop reading its socket (what was read is still processed, never
    dropped) and pause its heartbeat monitor, so that the silence of a client that is not read does
    not close it. Writing goes on: deliveries, confirms and heartbeats still leave. A `Write` of
    connection.blocked, when there is one, comes after this effect."""


@dataclass(frozen=True, slots=True)
class ResumeReading:
    """The connection is unblocked: read its socket again and resume its heartbeat monitor."""


# -- cluster membership (actors/cluster/membership.py) -------------------------------------------


@dataclass(frozen=True, slots=True)
class SaveClusterFile:
    """Replace the data dir's cluster.json with `data` (atomically, synced) before anything else:
    a restarted node must find the members it knew."""

    data: bytes


# -- the node core ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProposeCommand:
    """Propose the registry command `command` (metadata/commands.py) to the metadata Raft group under
    `key`. The shell hands every entry its node's member applies back to the core (`applied`), in
    log order; the one proposed under `key` resumes whoever proposed it. The shell may propose it
    more than once (a leader that changed): the core acts on the first application it sees."""

    key: Hashable
    command: Any


@dataclass(frozen=True, slots=True)
class AnswerAdmin:
    """Answer the admin command (from warrenctl, through the node host's control function) that
    the shell handed to the core as `ask`: `value` is what the command returns."""

    ask: Hashable
    value: Any


# -- the supervisor's restart policy (actors/runtime/restarts.py) --------------------------------


@dataclass(frozen=True, slots=True)
class SpawnHost:
    """Fork a new process for `host` and tell it to start; the shell reports the pid (`forked`)."""

    host: str


@dataclass(frozen=True, slots=True)
class KillHost:
    """SIGKILL process `pid` of `host` (it failed, or did not stop in time); its exit is reported
    as any other."""

    host: str
    pid: int


@dataclass(frozen=True, slots=True)
class StopHost:
    """Ask process `pid` of `host` to stop cleanly (the node stops)."""

    host: str
    pid: int


@dataclass(frozen=True, slots=True)
class OpenListeners:
    """Tell process `pid` of `host` to open its client listeners; the shell reports `opened`."""

    host: str
    pid: int


@dataclass(frozen=True, slots=True)
class NodeServes:
    """Every host serves, each listener is open: the node is ready (said once per supervisor)."""


@dataclass(frozen=True, slots=True)
class GiveUp:
    """A host went past the restart intensity: the node must stop, naming `host` and `reason`."""

    host: str
    reason: str


@dataclass(frozen=True, slots=True)
class AllStopped:
    """The node is stopping and no host process is left."""


Effect = (Send | StartTimer | CancelTimer | Log | Write | CloseSocket | SetFrameMax | OpenChannel | ToChannel
          | ChannelsDown | Opened | CloseConnection | ChannelFinished | CutRamTargets | LiftRamTargets | TrimHeap
          | AlarmSet | AlarmCleared | ConserveResources | PauseReading | ResumeReading | SaveClusterFile
          | ProposeCommand | AnswerAdmin | SpawnHost | KillHost | StopHost | OpenListeners | NodeServes | GiveUp
          | AllStopped)
