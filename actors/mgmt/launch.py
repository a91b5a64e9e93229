"""Starting the management plugin in the node host: the sampler, then the HTTP servers.

Imported only when a management or Prometheus port is configured, so a node without them never
loads aiohttp (about 13 MB of the node host's memory). The hosts sampled are every queue and
connection host of the cluster that the runtime's directory names, and every node host (for its
node's facts), so every node answers for the whole cluster; `cluster()` (the cluster actor's
status) says which nodes there are and which run.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actors.mgmt.collector import StatsCollector
from actors.placement import NODE_KIND, kind_of
from actors.quorum.names import QUORUM_KIND
from actors.mgmt.server import Management


async def start_management(runtime: Any, node: Any, cfg: dict, facts: Callable[[], dict],
                           cluster: Callable[[], dict]) -> Management:
    """`facts`: this node's facts (reporters.node_facts); `cluster`: ClusterActor.status."""
    def hosts() -> list[str]:
        """Every queue, quorum, connection and node host of the cluster: this node's and those the
        directory names (a quorum host reports the queues whose member there leads)."""
        return sorted(h for h in runtime.directory
                      if kind_of(h).startswith(("queue", "conn", QUORUM_KIND)) or kind_of(h) == NODE_KIND)

    collector = StatsCollector(runtime, hosts, int(cfg.get("collect_statistics_interval", 5000)), facts=facts)
    collector.start()
    node_name = cfg["node_name"]
    listeners = [{"node": node_name, "protocol": "amqp", "ip_address": cfg.get("bind", "127.0.0.1"),
                  "port": cfg.get("amqp_port", 5672)}]
    if cfg.get("management_port"):
        listeners.append({"node": node_name, "protocol": "http", "ip_address": cfg["management_ip"],
                          "port": cfg["management_port"]})
    if cfg.get("prometheus_port"):
        listeners.append({"node": node_name, "protocol": "http/prometheus", "ip_address": cfg["management_ip"],
                          "port": cfg["prometheus_port"]})
    management = Management(node, collector, node_name=node_name, amqp_port=cfg.get("amqp_port", 5672),
                            listeners=listeners, cluster=cluster)
    await management.start(cfg["management_ip"], cfg.get("management_port", 0), cfg.get("prometheus_port", 0))
    return management
