"""The alarm relay: how one node's resource alarms reach every node, and each node's connections.

Theory of operation
-------------------
Each node host runs one relay (rabbit_alarm's process). It holds the cluster's alarms in force as
this node sees them (`ClusterAlarms`, flow/blocking.py, which logs with RabbitMQ's texts) and takes:
- `ResourceAlarm(node, resource, on)`: from this node's resource monitor (`node` is this node), or
  from another node's relay (its own alarm). An alarm of this node is passed on to the relays of
  the other nodes that are up; another node's is only taken, never passed on again, so nothing
  circles. When a resource goes from no alarm anywhere to some, or back, every watcher gets
  `Conserve(resource, on)`;
- `WatchAlarms` from a connection host's watcher: it is answered with one `Conserve(r, True)` per
  resource short now, and told of every change after. A restarted host watches again from the same
  address and is answered again;
- `NodesUp(up, down)` from cluster membership: a node newly up gets this node's own alarms in force
  (it may have missed them, or restarted); a node down takes its alarms with it.

Invariants: a watcher has heard `Conserve(r, True)` exactly when some node's alarm for `r` is in
force here; a ResourceAlarm leaves this relay only for this node's own alarms.

A node that restarts is seen down and up again by membership (its incarnation changed), so the
others drop what it had and it learns theirs; a test (tests/integration/test_cluster_alarms.py)
restarts a node while another's alarm is in force.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, Hashable

from actors.messages.alarms import Conserve, ResourceAlarm, WatchAlarms
from actors.messages.cluster import NodesUp
from actors.messages.runtime import Undelivered
from effects import ConserveResources, Log, Send
from flow.blocking import ClusterAlarms

RelayEffect = Send | Log


class AlarmRelay:
    def __init__(self, node: str, relay_of: Callable[[str], Hashable]) -> None:
        self.node = node
        self.relay_of = relay_of  # a node's name -> its relay's address
        self.cluster = ClusterAlarms()
        self.watchers: dict[Hashable, None] = {}  # in the order they came
        self.peers: set[str] = set()  # the other nodes up

    def receive(self, sender: Hashable, msg: Any) -> list[RelayEffect]:
        kind = type(msg)
        if kind is ResourceAlarm:
            return self._alarm(msg)
        if kind is WatchAlarms:
            self.watchers[sender] = None
            return [Send(sender, Conserve(resource, True)) for resource in sorted(self.cluster.resources())]
        if kind is NodesUp:
            return self._nodes(msg)
        if kind is Undelivered:  # a watcher's host is restarting: it watches again when it is back
            return []
        return [Log("alarms.unexpected_message", "warning", (("kind", kind.__name__),))]

    def local_alarms(self) -> list[str]:
        """The resources this node itself is short of."""
        return [resource for node, resource in self.cluster.alarms() if node == self.node]

    def _alarm(self, msg: ResourceAlarm) -> list[RelayEffect]:
        change = self.cluster.set if msg.on else self.cluster.clear
        out = self._tell_watchers(change(msg.resource, msg.node))
        if msg.node == self.node:
            out += [Send(self.relay_of(peer), msg) for peer in sorted(self.peers)]
        return out

    def _nodes(self, msg: NodesUp) -> list[RelayEffect]:
        out: list[RelayEffect] = []
        for node in msg.down:
            self.peers.discard(node)
            out += self._tell_watchers(self.cluster.node_down(node))
        for node in msg.up:
            if node == self.node or node in self.peers:
                continue
            self.peers.add(node)
            out += [Send(self.relay_of(node), ResourceAlarm(self.node, resource, True))
                    for resource in self.local_alarms()]
        return out

    def _tell_watchers(self, effects: list[Log | ConserveResources]) -> list[RelayEffect]:
        out: list[RelayEffect] = []
        for e in effects:
            if type(e) is ConserveResources:
                out += [Send(watcher, Conserve(e.resource, e.on)) for watcher in self.watchers]
            else:
                out.append(e)
        return out
