"""The node host's entry when a management, Prometheus or HTTPS port is configured: the node host
(actors/hosts.py), then the management plugin in it: the sampler, then the HTTP servers.

scripts/node_main.py names this entry only when such a port is set, so a node without them never
loads aiohttp (about 13 MB of the node host's memory). The hosts sampled are every queue and
connection host of the cluster that the runtime's directory names, and every node host (for its
node's facts), so every node answers for the whole cluster; `cluster()` (the cluster actor's
status) says which nodes there are and which run. With `management.ssl.port` (and a certificate)
the API is served over HTTPS too.
"""
from __future__ import annotations

from typing import Any

from actors.hosts import NodeHost, node_host
from actors.placement import NODE_KIND, kind_of
from actors.quorum.names import QUORUM_KIND
from actors.reader import tls
from actors.stats.collector import StatsCollector
from mgmt.server import Management


async def node_host_with_management(runtime: Any, spec: Any) -> Management:
    """The node host, then its management: `spec` is the node host's (actors/hosts.py)."""
    return await start_management(runtime, await node_host(runtime, spec), spec.config)


async def start_management(runtime: Any, host: NodeHost, cfg: dict) -> Management:
    """The sampler and the HTTP servers of the node host `host`, as `cfg` configures them."""
    def hosts() -> list[str]:
        """Every queue, quorum, connection and node host of the cluster: this node's and those the
        directory names (a quorum host reports the queues whose member there leads)."""
        return sorted(h for h in runtime.directory
                      if kind_of(h).startswith(("queue", "conn", QUORUM_KIND)) or kind_of(h) == NODE_KIND)

    collector = StatsCollector(runtime, hosts, int(cfg.get("collect_statistics_interval", 5000)), facts=host.facts)
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
    https = None
    if cfg.get("management_ssl_port") and cfg.get("management_tls"):
        https = (cfg["management_ssl_ip"], cfg["management_ssl_port"],
                 tls.server_context(tls.TlsOptions.from_dict(cfg["management_tls"])))
        listeners.append({"node": node_name, "protocol": "https", "ip_address": https[0], "port": https[1]})
    management = Management(host.node, collector, node_name=node_name, amqp_port=cfg.get("amqp_port", 5672),
                            listeners=listeners, cluster=host.cluster_status)
    await management.start(cfg["management_ip"], cfg.get("management_port", 0), cfg.get("prometheus_port", 0), https)
    return management
