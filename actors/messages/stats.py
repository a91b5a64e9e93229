"""The statistics protocol: the node samples every host for the management API and metrics.

node (collector) -> a host's reporter: `CollectStats(rid)`; the reporter answers `Reply(rid,
HostStats(...))` at once, from what its actors hold (counters, counts, flow states). Rows are
plain dicts with RabbitMQ's field names so they travel as msgpack maps; a host fills only the
lists that are its own (a queue host its queues, a connection host its connections, channels and
consumers). `flow` holds one row per actor on the publish chain (flow/bottleneck.py's `Link`
fields) and `totals` the host's node-wide counters (retired actors included). `exchanges` holds a
connection host's publish_in / publish_out per exchange (its channels', retired ones included).
A quorum host answers its own node's collector with `raft` (one row per member on the host: its
indexes, term, commit latency and segment files) and `wal` (the node's WAL counters); other
nodes' collectors get neither, as rabbitmq_prometheus shows a node's own Raft members only.
A node host answers with `node`: the node's facts as the management API's node object names them
(name, pid, uptime, memory and disk with their limits and alarms), so every node can show the
whole cluster's nodes.

Queue rows (and Raft rows) come as changes (actors/stats/deltas.py): the collector asks `since`
the `version` of the last answer of that host it merged (with its `epoch`); the answer holds the
rows of the queues that changed since, the keys (vhost, name) of those `gone` since, and `full`
when it holds every row instead (the first answer, or the host restarted). Other lists are whole.

Every host that reports has one reporter named `REPORTER_NAME`; the collector addresses hosts as
`Address(host, REPORTER_NAME)`, whichever node they are on.
"""
from __future__ import annotations

from dataclasses import field
from typing import Any

from actors.messages import message

REPORTER_NAME = "stats"


@message
class CollectStats:
    rid: int
    epoch: str = ""  # the epoch of the host's last answer this collector merged ("": none)
    since: int = -1  # that answer's version


@message
class HostStats:
    host: str
    queues: list[dict[str, Any]]
    connections: list[dict[str, Any]]
    channels: list[dict[str, Any]]
    consumers: list[dict[str, Any]]
    flow: list[dict[str, Any]]
    totals: dict[str, int]
    exchanges: list[dict[str, Any]] = field(default_factory=list)
    raft: list[dict[str, Any]] = field(default_factory=list)
    wal: dict[str, int] = field(default_factory=dict)
    node: dict[str, Any] = field(default_factory=dict)
    epoch: str = ""  # the reporter's (one per host process)
    version: int = 0  # ask since this next time
    full: bool = True  # `queues` and `raft` are every row, not changes
    gone: list[Any] = field(default_factory=list)  # (vhost, name) of queues gone since
    raft_gone: list[Any] = field(default_factory=list)  # (vhost, name) of members gone since
