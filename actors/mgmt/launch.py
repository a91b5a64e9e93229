"""Starting the management plugin in the node host: the sampler, then the HTTP servers.

Imported only when a management or Prometheus port is configured, so a node without them never
loads aiohttp (about 13 MB of the node host's memory). Today the hosts sampled are this node's
queue hosts and the connection hosts subscribed to its node actor; a cluster adds the other
nodes' hosts to `hosts`.
"""
from __future__ import annotations

from typing import Any

from actors.mgmt.collector import StatsCollector
from actors.mgmt.server import Management


async def start_management(runtime: Any, node: Any, cfg: dict) -> Management:
    def hosts() -> list[str]:
        return [f"queue{i}" for i in range(cfg["queue_hosts"])] + [sub.host for sub in node.core.connection_hosts()]

    collector = StatsCollector(runtime, hosts, int(cfg.get("collect_statistics_interval", 5000)),
                               data_dir=cfg.get("data_dir"), mem_limit=int(cfg.get("mem_limit_bytes", 0)),
                               disk_free_limit=int(cfg.get("disk_free_limit_bytes", 0)))
    collector.start()
    node_name = f"{cfg.get('node_name', 'warren')}@localhost"
    listeners = [{"node": node_name, "protocol": "amqp", "ip_address": cfg.get("bind", "127.0.0.1"),
                  "port": cfg.get("amqp_port", 5672)}]
    if cfg.get("management_port"):
        listeners.append({"node": node_name, "protocol": "http", "ip_address": cfg["management_ip"],
                          "port": cfg["management_port"]})
    if cfg.get("prometheus_port"):
        listeners.append({"node": node_name, "protocol": "http/prometheus", "ip_address": cfg["management_ip"],
                          "port": cfg["prometheus_port"]})
    management = Management(node, collector, node_name=node_name, amqp_port=cfg.get("amqp_port", 5672),
                            listeners=listeners)
    await management.start(cfg["management_ip"], cfg.get("management_port", 0), cfg.get("prometheus_port", 0))
    return management
