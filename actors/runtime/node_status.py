"""What `warrenctl status` shows of a node, as its Supervisor sees it: the node's name and ports, how
long it has run, its processes with their PIDs, restarts and memory, and the memory summed once.

The processes are the node's main process and everything below it (process_tree.py keeps Thespian's
admin there): the admin, Thespian's logger, the supervisor, the hosts. Memory is each one's RSS and
PSS; the node's memory is the PSS summed, which counts a page the processes share (the interpreter
and the modules imported before forking) once, where summed RSS counts it once per process.
"""
from __future__ import annotations

import os
import time
from typing import Any, Iterable, Mapping

import psutil

from actors.runtime.control import HostSpec
from actors.runtime.restarts import Host

cluster_port_offset = 20000  # as RabbitMQ's distribution port: the AMQP port + 20000


def amqp_port(specs: Iterable[HostSpec]) -> int | None:
    """The port the node's connection hosts listen on."""
    return next((spec.config["port"] for spec in specs if "port" in spec.config), None)


def cluster_port(specs: Iterable[HostSpec]) -> int | None:
    """The configured cluster port, else the AMQP port + 20000."""
    specs = list(specs)
    configured = next((spec.config["cluster_port"] for spec in specs if spec.config.get("cluster_port")), None)
    port = amqp_port(specs)
    return configured or (port + cluster_port_offset if port else None)


PURPOSES = {"amqp": "AMQP 0-9-1", "amqp/ssl": "AMQP 0-9-1 over TLS", "clustering": "inter-node communication",
            "http": "HTTP API", "http/prometheus": "Prometheus exporter API over HTTP"}


def listeners(specs: Iterable[HostSpec]) -> list[dict]:
    """The node's listeners, as rabbitmq-diagnostics lists them: interface, port, protocol, purpose."""
    found: dict[tuple[str, int], str] = {}
    for spec in specs:
        c = spec.config
        if spec.listens:
            found[(c.get("bind", "127.0.0.1"), c["port"])] = "amqp"
            if c.get("tls_port"):
                found[(c.get("bind", "127.0.0.1"), c["tls_port"])] = "amqp/ssl"
        if c.get("cluster_port") and c.get("tcp_bind", "").endswith(f":{c['cluster_port']}"):  # the node host
            found[(c["tcp_bind"].removeprefix("tcp://").rpartition(":")[0], c["cluster_port"])] = "clustering"
            for key, protocol in (("management_port", "http"), ("prometheus_port", "http/prometheus")):
                if c.get(key):
                    found[(c["management_ip"], c[key])] = protocol
    return [{"interface": ip, "port": port, "protocol": protocol, "purpose": PURPOSES[protocol]}
            for (ip, port), protocol in found.items()]


def node_status(node_name: str, specs: Iterable[HostSpec], hosts: Mapping[str, Host], node_pid: int) -> dict:
    """The status of the node whose supervisor is this process (`hosts`: its restart policy's)."""
    specs = list(specs)
    try:
        main = psutil.Process(node_pid)
        uptime_s = round(time.time() - main.create_time())
    except psutil.Error:
        main, uptime_s = None, None
    names = {os.getpid(): "supervisor", os.getppid(): "admin", node_pid: "main"}
    restarts: dict[int, int] = {}
    for name, record in hosts.items():
        names[record.pid] = name
        restarts[record.pid] = record.restarts
    processes = []
    for process in [main, *_descendants(main)] if main is not None else []:
        memory = _memory(process)
        if memory is None:
            continue  # exited meanwhile
        processes.append({"name": names.get(process.pid, "logger"), "pid": process.pid,
                          "restarts": restarts.get(process.pid), "rss": memory.rss, "pss": memory.pss})
    return {"node": node_name, "pid": node_pid, "amqp_port": amqp_port(specs), "cluster_port": cluster_port(specs),
            "uptime_s": uptime_s, "memory_pss": sum(p["pss"] for p in processes),
            "memory_rss": sum(p["rss"] for p in processes), "processes": processes}


def _descendants(process: psutil.Process) -> list[psutil.Process]:
    try:
        return sorted(process.children(recursive=True), key=lambda p: p.pid)
    except psutil.Error:
        return []


def _memory(process: psutil.Process) -> Any:
    """psutil's full memory info (rss, pss ...), None for a process that is gone."""
    try:
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        return process.memory_full_info()
    except psutil.Error:
        return None
