"""The cluster protocol: how node hosts find each other, watch each other and share where their
hosts listen (actors/cluster/membership.py decides; docs/DESIGN.md §4 describes the processes).

Between node hosts (each node's "cluster" actor, reached on the node's cluster port):
`Hello(node, endpoint, hosts)` says who a node is, where its node host listens and where each of its
other hosts listens; the answer is the peer's own Hello. `Ping`/`Pong` carry liveness.
`JoinRequest(node, endpoint)` asks a member of a cluster to admit a new node; `JoinAnswer` says
whether it was admitted and who the members are.

Inside a node: every host reports where its tcp mailbox listens with `HostListening(host,
endpoint)`; the node host tells its local hosts the cluster's whole `Directory` and which nodes are
up (`NodesUp`) whenever either changes.
"""
from __future__ import annotations

from actors.messages import message


@message
class Hello:
    node: str
    endpoint: str  # the node host's cluster endpoint (tcp://host:cluster_port)
    hosts: dict[str, str]  # the node's other hosts -> their tcp endpoints
    members: list[str]  # the nodes this node believes are in the cluster
    incarnation: int = 0  # this run of the node (a new one each start): a change means it restarted
    downs_of_you: int = 0  # how often this run of the sender saw the receiver down (by its silence)


@message
class Ping:
    node: str
    seq: int


@message
class Pong:
    node: str
    seq: int


@message
class JoinRequest:
    node: str
    endpoint: str


@message
class JoinAnswer:
    admitted: bool
    reason: str
    members: dict[str, str]  # node -> cluster endpoint, the joiner included


@message
class ChangeMembers:
    """To the cluster actor of the node whose member leads the metadata group: add `node`'s member
    (its node host at `endpoint`) to the group, or remove it; answered with a Reply once the change
    is committed."""

    rid: int
    node: str
    endpoint: str
    add: bool


@message
class Introduce:
    """Where the sender's node host listens, to a node about to join (so its Raft member can answer
    the leader before the join's answer names every member)."""

    node: str
    endpoint: str


@message
class HostListening:
    host: str
    endpoint: str


@message
class SubscribeCluster:
    """A host of this node asks for the cluster's Directory and NodesUp, now and on every change."""


@message
class Directory:
    endpoints: dict[str, str]  # every known host of every node -> its tcp endpoint


@message
class NodesUp:
    up: list[str]
    down: list[str]


@message
class ForgetNode:
    """node core -> its membership actor: `node` left the cluster for good (its removal from the
    metadata group is applied here)."""

    node: str
