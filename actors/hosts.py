"""Host entries: what each kind of host process runs (the Supervisor calls them via HostSpec.entry).

- node: the NodeActor with the authoritative registry, and the management HTTP API, web UI and
  Prometheus endpoint when their ports are set (actors/mgmt/).
- queueN: a QueueManager that creates the classic queue actors placed on this host (their group
  commit: actors/queue/group_commit.py), the host's durable storage (persist/classic/host_storage.py:
  message stores, queue indexes) on a RealDisk, and its housekeeping (actors/queue/housekeeping.py:
  memory and paging, GC).
- connN: the AMQP listener (SO_REUSEPORT, so every connection host shares the port; plus an amqps
  listener when tls_port is set), a registry replica (which also answers logins and vhost access),
  and the readers/channels of the connections this host accepted. It subscribes to the
  node and starts listening only once it holds the registry snapshot, so it never routes with an
  empty table.
"""
from __future__ import annotations

import asyncio
import functools
import os
import random
from typing import Any

import psutil
import structlog

from metadata.registry import Registry
from actors.node.core import ADMIN_OPS, CONNECTION_ADMIN_NAME
from actors.node.listings import LISTING_OPS
from actors.node.shell import NodeActor
from actors.placement import NODE, QUEUE_MANAGER_NAME, QUEUE_ROUTER_NAME, ROUTER_NAME, queue_address
from actors.placement import queue_host as queue_host_of
from actors.messages.stats import REPORTER_NAME
from actors.mgmt.reporters import ConnectionHostReporter, QueueHostReporter
from actors.queue.housekeeping import Housekeeping, NodeMemory
from actors.queue.manager import QueueManager
from persist.classic.host_storage import HostStorage
from persist.disk import RealDisk
from actors.reader import admin as conn_admin
from actors.reader import tls
from actors.reader.admin import ConnectionAdmin
from actors.reader.core import Gatekeeper, Settings
from actors.reader.shell import ConnectionHostContext, Reader, tell_channels, tell_channels_host_restarted
from actors.replica import RegistryReplica
from actors.runtime.address import Address
from wire.errors import CONNECTION_FORCED

log = structlog.get_logger("warren.hosts")

subscribe_timeout_s = 30.0


def _host_info(op: str) -> Any:
    """Control ops every host answers."""
    if op == "pid":
        return os.getpid()
    return {"error": f"unknown op {op!r}"}


def node_host(runtime: Any, spec: Any) -> Any:
    cfg = spec.config
    node = NodeActor(runtime, NODE.name, Registry(random.Random()), cfg["queue_hosts"],
                     data_dir=cfg.get("data_dir"), default_user=cfg.get("default_user", "guest"),
                     default_pass=cfg.get("default_pass", "guest"))
    runtime.spawn(NODE.name, node)

    async def control(op: str, args: dict) -> Any:
        if op in ADMIN_OPS:
            return await node.admin(op, args)
        if op in LISTING_OPS:
            return node.listing(op, args)
        return _host_info(op)
    runtime.control = control
    if cfg.get("management_port") or cfg.get("prometheus_port"):
        from actors.mgmt.launch import start_management  # only then: aiohttp costs the node host ~13 MB
        return start_management(runtime, node, cfg)
    return None


def queue_host(runtime: Any, spec: Any) -> None:
    # A registry replica, kept current by the node like a connection host's, routes dead-lettered
    # messages and names the durable queues to recover. Queues are created only by the node, after
    # it has answered this subscription.
    cfg = spec.config
    replica = RegistryReplica(runtime, QUEUE_ROUTER_NAME, Registry())
    runtime.spawn(QUEUE_ROUTER_NAME, replica)
    replica.subscribe()
    storage = None
    if cfg.get("data_dir"):
        storage = HostStorage(RealDisk(cfg["data_dir"]), runtime.host,
                              embed_below=cfg.get("queue_index_embed_msgs_below", 4096),
                              file_size_limit=cfg.get("msg_store_file_size_limit", 16 * 1024 * 1024),
                              placed_here=lambda vhost, name: queue_host_of(vhost, name, cfg["queue_hosts"])
                              == runtime.host)
    manager = QueueManager(runtime, QUEUE_MANAGER_NAME, replica.registry, cfg["queue_hosts"], storage,
                           replica.ready.is_set)
    runtime.spawn(QUEUE_MANAGER_NAME, manager)
    runtime.spawn(REPORTER_NAME, QueueHostReporter(runtime, manager))
    if storage is not None:
        # paging starts at vm_memory_high_watermark_paging_ratio x vm_memory_high_watermark x RAM
        threshold = int(float(cfg.get("vm_memory_high_watermark", 0.4))
                        * float(cfg.get("vm_memory_high_watermark_paging_ratio", 0.5))
                        * psutil.virtual_memory().total)
        Housekeeping(storage, threshold, NodeMemory(cfg["data_dir"]).rss, manager.ensure_recovered).start()

    async def control(op: str, args: dict) -> Any:
        if op == "list_queues":
            return manager.stats()
        if op == "store_summary":
            return storage.summary() if storage is not None and storage.recovered else {"host": runtime.host}
        return _host_info(op)
    runtime.control = control


async def connection_host(runtime: Any, spec: Any) -> None:
    cfg = spec.config
    registry = Registry()
    settings = Settings(frame_max=cfg.get("frame_max", 131072), channel_max=cfg.get("channel_max", 2047),
                        heartbeat=cfg.get("heartbeat", 60))
    # logins and vhost access are answered by this host's replica, fed with hashes by the node
    loopback_users = frozenset(u.strip() for u in str(cfg.get("loopback_users", "guest")).split(",") if u.strip())
    gatekeeper = Gatekeeper(registry.check_login, registry.vhost_access_error, loopback_users)
    ctx = ConnectionHostContext(
        runtime, registry, functools.partial(_place, cfg["queue_hosts"]), settings, gatekeeper,
        vhost_exists=registry.vhost_exists, router_address=Address(runtime.host, ROUTER_NAME),
        consumer_timeout_ms=cfg.get("consumer_timeout", 1800000))
    replica = RegistryReplica(runtime, ROUTER_NAME, registry, tell_channels(ctx), tell_channels_host_restarted(ctx))
    runtime.spawn(ROUTER_NAME, replica)
    runtime.spawn(CONNECTION_ADMIN_NAME, ConnectionAdmin(ctx))
    runtime.spawn(REPORTER_NAME, ConnectionHostReporter(runtime, ctx))
    replica.subscribe()
    await asyncio.wait_for(replica.ready.wait(), subscribe_timeout_s)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Reader(ctx), cfg.get("bind", "127.0.0.1"), cfg["port"],
                                      reuse_port=True, backlog=1024)
    ctx.server = server
    if cfg.get("tls_port"):
        ctx.tls_server = await loop.create_server(
            lambda: Reader(ctx), cfg.get("bind", "127.0.0.1"), cfg["tls_port"], reuse_port=True, backlog=1024,
            ssl=tls.server_context(cfg["tls_certfile"], cfg["tls_keyfile"]))
        log.info("tls_listener.started", host=runtime.host, port=cfg["tls_port"])
    loop.create_task(_tick(ctx))

    listings = {"list_connections": conn_admin.list_connections, "list_channels": conn_admin.list_channels,
                "list_consumers": conn_admin.list_consumers}

    async def control(op: str, args: dict) -> Any:
        if op in listings:
            return listings[op](ctx)
        if op == "close_connection":
            return {"closed": conn_admin.close_connections(ctx, None, args["name"], CONNECTION_FORCED,
                                                           args.get("reason", "Closed via warrenctl"))}
        return _host_info(op)
    runtime.control = control
    log.info("listener.started", host=runtime.host, port=cfg["port"])


def _place(queue_hosts: int, vhost: str, name: str) -> Address:
    return queue_address(vhost, name, queue_hosts)


async def _tick(ctx: ConnectionHostContext) -> None:
    period = 1 / ctx.settings.ticks_per_second
    while True:
        await asyncio.sleep(period)
        for reader in list(ctx.readers):
            reader.tick()
