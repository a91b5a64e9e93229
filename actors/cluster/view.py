"""ClusterView: every host's window on the cluster (a shell; the decisions are membership.py's).

On start, and again when the node host says it restarted (`NodeStarted`: the new node host knows
nothing of this host), it tells its node's cluster actor where this host's tcp mailbox listens
(`HostListening`, so the peers learn it), subscribes (`SubscribeCluster`) and calls
`on_node_started` (the host's registry replica subscribes again). The cluster actor answers with the
`Directory` of every other node's hosts, which goes into this host's runtime (`add_hosts`), and
`NodesUp`, which goes to `on_nodes(up, down)` - the host's own reaction (channels learn which
queues are out of reach; the node core forgets a gone node's transient queues) - after the runtime
has written off the credit its actors had lent to the hosts of nodes that went down (RabbitMQ's
credit_flow:peer_down), so no sender stays blocked on a dead peer.
"""
from __future__ import annotations

from typing import Any, Callable

import structlog

from actors.messages.cluster import Directory, HostListening, NodesUp, SubscribeCluster
from actors.messages.node import NodeStarted
from actors.placement import CLUSTER_NAME, NODE_KIND, WAL_KIND, host_of, kind_of, node_of
from actors.runtime.address import Address

log = structlog.get_logger("warren.cluster")

VIEW_NAME = "cluster-view"


def tell_local_hosts(runtime: Any, node: str) -> None:
    """The node host started: every other host of this node subscribes again (but the WAL's
    process, which keeps no view of the cluster)."""
    for host in runtime.directory:
        if node_of(host) == node and host != runtime.host and kind_of(host) != WAL_KIND:
            runtime.send(Address(host, VIEW_NAME), NodeStarted(), sender=Address(runtime.host, CLUSTER_NAME))

OnNodes = Callable[[list[str], list[str]], None]


class ClusterView:
    def __init__(self, runtime: Any, node: str, on_nodes: OnNodes | None = None,
                 on_node_started: Callable[[], None] | None = None) -> None:
        self.runtime = runtime
        self.node = node
        self.on_nodes = on_nodes
        self.on_node_started = on_node_started
        self.up: list[str] = [node]
        self.down: list[str] = []
        self.address = runtime.spawn(VIEW_NAME, self)

    def start(self) -> None:
        cluster = Address(host_of(self.node, NODE_KIND), CLUSTER_NAME)
        if self.runtime.tcp_endpoint is not None:
            self.runtime.send(cluster, HostListening(self.runtime.host, self.runtime.tcp_endpoint), sender=self.address)
        self.runtime.send(cluster, SubscribeCluster(), sender=self.address)

    def receive(self, sender: Address, msg: Any) -> None:
        kind = type(msg)
        if kind is NodeStarted:
            self.start()
            if self.on_node_started is not None:
                self.on_node_started()
        elif kind is Directory:
            self.runtime.add_hosts(msg.endpoints)
        elif kind is NodesUp:
            newly_down = set(msg.down) - set(self.down)
            self.up, self.down = list(msg.up), list(msg.down)
            if newly_down:
                self.runtime.peers_down({host for host in self.runtime.directory if node_of(host) in newly_down})
            if self.on_nodes is not None:
                self.on_nodes(self.up, self.down)
        else:
            log.warning("cluster_view.unexpected_message", host=self.runtime.host, kind=kind.__name__)
