"""The statistics protocol: the node samples every host for the management API and metrics.

node (collector) -> a host's reporter: `CollectStats(rid)`; the reporter answers `Reply(rid,
HostStats(...))` at once, from what its actors hold (counters, counts, flow states). Rows are
plain dicts with RabbitMQ's field names so they travel as msgpack maps; a host fills only the
lists that are its own (a queue host its queues, a connection host its connections, channels and
consumers). `flow` holds one row per actor on the publish chain (flow/bottleneck.py's `Link`
fields) and `totals` the host's node-wide counters (retired actors included).

Every host that reports has one reporter named `REPORTER_NAME`; the collector addresses hosts as
`Address(host, REPORTER_NAME)`, whichever node they are on.
"""
from __future__ import annotations

from typing import Any

from actors.messages import message

REPORTER_NAME = "stats"


@message
class CollectStats:
    rid: int


@message
class HostStats:
    host: str
    queues: list[dict[str, Any]]
    connections: list[dict[str, Any]]
    channels: list[dict[str, Any]]
    consumers: list[dict[str, Any]]
    flow: list[dict[str, Any]]
    totals: dict[str, int]
