"""What a resource alarm does: the cluster's set of alarms in force, and each connection's answer to it.

Theory of operation
-------------------
`ClusterAlarms` is rabbit_alarm's `alarmed_nodes` on one node: the (node, resource) alarms in
force anywhere in the cluster, fed by every node's `AlarmSet` / `AlarmCleared` (flow/alarms.py)
and by a node going down, which takes its alarms with it. It logs each change with RabbitMQ's
text, and when a resource goes from no alarm anywhere to some (or back) it returns
`ConserveResources(resource, on)` for every connection of the node: an alarm on any node blocks
publishers on every node.

`ConnectionThrottle` is the resource half of rabbit_reader's throttle, for one connection. It
keeps the resources the cluster is short of (`blocked_by`). While that set is empty nothing
happens. While it is not, the connection is shown as `blocking`: it is still read, so a consumer
keeps receiving and acking, which is what lets an alarm clear. The first publish it reads
(a content header or body frame, handed on to its channel as usual: nothing read is dropped)
blocks it: `PauseReading`, then connection.blocked ("low on memory", "low on disk" or both,
"low on disk & memory") if the client announced the `connection.blocked` capability. When the
last alarm clears: `ResumeReading`, then connection.unblocked if connection.blocked was sent. A
connection that was blocked and then unblocked is `running` again, and the next alarm leaves it
`blocking` until it publishes again.

Invariants: `state` is `blocked` only while `blocked_by` is not empty; connection.blocked and
connection.unblocked alternate on the wire, one of each per blocked period, and only to a client
that announced the capability; a change of reason while blocked sends nothing (as RabbitMQ).

Left out: credit flow, the other reason rabbit_reader stops reading (flow/credit.py decides it,
the reader shell combines the two), and the `flow` state (flow/state.py).
"""
from __future__ import annotations

from effects import ConserveResources, Log, PauseReading, ResumeReading, Write
from wire.frames import method_frame
from wire.methods import ConnectionBlocked, ConnectionUnblocked

ConnectionState = str  # "running" | "blocking" | "blocked"
CAPABILITY = "connection.blocked"

_SET_BANNER = ("\n\n**********************************************************\n"
               "*** Publishers will be blocked until this alarm clears ***\n"
               "**********************************************************\n")


class ClusterAlarms:
    """The resource alarms in force across the cluster, as one node sees them."""

    __slots__ = ("_alarms",)

    def __init__(self) -> None:
        self._alarms: set[tuple[str, str]] = set()  # (node, resource)

    def resources(self) -> frozenset[str]:
        """The resources some node is short of: what a connection opened now starts blocked by."""
        return frozenset(resource for _node, resource in self._alarms)

    def alarms(self) -> list[tuple[str, str]]:
        """(node, resource) pairs in force, sorted (rabbitmqctl's alarms list)."""
        return sorted(self._alarms)

    def set(self, resource: str, node: str) -> list[Log | ConserveResources]:
        if (node, resource) in self._alarms:
            return []
        was_short = resource in self.resources()
        self._alarms.add((node, resource))
        out: list[Log | ConserveResources] = [
            Log(f"{resource} resource limit alarm set on node {node}.{_SET_BANNER}", "warning")]
        if not was_short:
            out.append(ConserveResources(resource, True))
        return out

    def clear(self, resource: str, node: str) -> list[Log | ConserveResources]:
        if (node, resource) not in self._alarms:
            return []
        return [Log(f"{resource} resource limit alarm cleared on node {node}", "warning"),
                *self._remove(resource, node)]

    def node_down(self, node: str) -> list[Log | ConserveResources]:
        """A node left the cluster: its alarms go with it."""
        out: list[Log | ConserveResources] = []
        for down, resource in sorted(self._alarms):
            if down == node:
                out.append(Log(f"{resource} resource limit alarm cleared for dead node {node}", "warning"))
                out += self._remove(resource, node)
        return out

    def _remove(self, resource: str, node: str) -> list[Log | ConserveResources]:
        self._alarms.discard((node, resource))
        if resource in self.resources():
            return []
        return [Log(f"{resource} resource limit alarm cleared across the cluster", "warning"),
                ConserveResources(resource, False)]


class ConnectionThrottle:
    """One connection's answer to the cluster's alarms (see the module docstring). Built at
    connection.open with what the cluster is short of then and whether the client announced the
    `connection.blocked` capability."""

    __slots__ = ("blocked_by", "announced", "blocked", "_notified")

    def __init__(self, resources: frozenset[str] = frozenset(), *, announced: bool = False) -> None:
        self.blocked_by: set[str] = set(resources)
        self.announced = announced
        self.blocked = False  # reading is paused
        self._notified = False  # connection.blocked is the last of the two the client was sent

    @classmethod
    def for_client(cls, resources: frozenset[str], capabilities: dict) -> ConnectionThrottle:
        """From the client's capabilities table (connection.start-ok's client-properties)."""
        return cls(resources, announced=capabilities.get(CAPABILITY) is True)

    def state(self) -> ConnectionState:
        if self.blocked:
            return "blocked"
        return "blocking" if self.blocked_by else "running"

    def published(self) -> list[PauseReading | Write]:
        """The connection read a publish (a content header or body frame)."""
        if not self.blocked_by or self.blocked:
            return []
        self.blocked = True
        out: list[PauseReading | Write] = [PauseReading()]
        if not self._notified:
            self._notified = True
            if self.announced:
                reason = "low on " + " & ".join(sorted(self.blocked_by))
                out.append(Write([method_frame(0, ConnectionBlocked(reason))]))
        return out

    def conserve(self, resource: str, on: bool) -> list[ResumeReading | Write]:
        """The cluster's alarm for `resource` is now in force (`on`) or over (ConserveResources)."""
        if on:
            self.blocked_by.add(resource)
            return []
        self.blocked_by.discard(resource)
        if self.blocked_by or not self.blocked:
            return []
        self.blocked = False
        out: list[ResumeReading | Write] = [ResumeReading()]
        if self._notified:
            self._notified = False
            if self.announced:
                out.append(Write([method_frame(0, ConnectionUnblocked())]))
        return out
