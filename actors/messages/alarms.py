"""The alarms protocol: a node's resource alarms reach every node of the cluster, and each node's
connection hosts learn what the cluster is short of (flow/alarms.py decides an alarm, flow/blocking.py
what it does; actors/monitor/relay.py routes them).

Between nodes (each node host's alarm relay, "alarms"): `ResourceAlarm(node, resource, on)` says
that `node`'s alarm for `resource` ("memory" or "disk") is now set (`on`) or cleared. A node's
resource monitor tells its own relay, which passes its node's alarms on to the relays of the other
nodes that are up, and again to a node that comes up, so every node holds the same set of alarms
in force whatever the order of events; `node` says whose alarm it is, never who relayed it.

Inside a node: a connection host's watcher sends `WatchAlarms` to its node's relay, which answers
with one `Conserve(resource, True)` per resource short anywhere in the cluster, then one `Conserve`
whenever a resource goes from no alarm anywhere to some or back (rabbit_alarm's
conserve_resources). A queue host's housekeeping sends `WatchMemory` to its node's resource
monitor, which answers with `MemoryUse(limit_bytes, used_bytes)` now, after every check of the
node's memory and whenever the limit changes (warrenctl set_vm_memory_high_watermark): paging
starts at the paging ratio of the limit, judged by the monitor's reading of the node's memory.
"""
from __future__ import annotations

from actors.messages import message


@message
class ResourceAlarm:
    node: str
    resource: str
    on: bool


@message
class WatchAlarms:
    pass


@message
class Conserve:
    resource: str
    on: bool


@message
class WatchMemory:
    pass


@message
class MemoryUse:
    limit_bytes: int
    used_bytes: int
