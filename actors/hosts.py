"""Host entries: what each kind of host process runs (the Supervisor calls them via HostSpec.entry).

- node: the NodeActor with the authoritative registry.
- queueN: a QueueManager that creates the classic queue actors placed on this host.
- connN: the AMQP listener (SO_REUSEPORT, so every connection host shares the port), a registry
  replica, and the readers/channels of the connections this host accepted. It subscribes to the
  node and starts listening only once it holds the registry snapshot, so it never routes with an
  empty table.
"""
from __future__ import annotations

import asyncio
import functools
import os
import random
from typing import Any

import structlog

from actors.metadata.registry import Registry
from actors.node.actor import NodeActor
from actors.placement import NODE, QUEUE_MANAGER_NAME, ROUTER_NAME, queue_address
from actors.queue.actor import QueueManager
from actors.reader.connection import Settings
from actors.reader.shell import ConnectionHostContext, Reader, RouterActor
from actors.runtime.address import Address

log = structlog.get_logger("warren.hosts")

subscribe_timeout_s = 30.0


def _host_info(op: str) -> Any:
    """Control ops every host answers."""
    if op == "pid":
        return os.getpid()
    return {"error": f"unknown op {op!r}"}


def node_host(runtime: Any, spec: Any) -> None:
    node = NodeActor(runtime, NODE.name, Registry(random.Random()), spec.config["queue_hosts"])
    runtime.spawn(NODE.name, node)

    async def control(op: str, args: dict) -> Any:
        if op == "list_exchanges":
            return [repr(x) for x in node.registry.exchanges(args.get("vhost"))]
        if op == "list_bindings":
            return [repr(b) for b in node.registry.bindings(args.get("vhost"))]
        return _host_info(op)
    runtime.control = control


def queue_host(runtime: Any, spec: Any) -> None:
    manager = QueueManager(runtime, QUEUE_MANAGER_NAME)
    runtime.spawn(QUEUE_MANAGER_NAME, manager)

    async def control(op: str, args: dict) -> Any:
        if op == "list_queues":
            return manager.stats()
        return _host_info(op)
    runtime.control = control


def check_login(user: str, password: str) -> bool:
    """The built-in user until the user store arrives: guest/guest (loopback only, see ConnectionCore)."""
    return user == "guest" and password == "guest"


async def connection_host(runtime: Any, spec: Any) -> None:
    cfg = spec.config
    registry = Registry()
    settings = Settings(frame_max=cfg.get("frame_max", 131072), channel_max=cfg.get("channel_max", 2047),
                        heartbeat=cfg.get("heartbeat", 60))
    ctx = ConnectionHostContext(
        runtime, registry, functools.partial(_place, cfg["queue_hosts"]), settings, check_login,
        vhost_exists=registry.vhost_exists, router_address=Address(runtime.host, ROUTER_NAME))
    ready = asyncio.Event()
    runtime.spawn(ROUTER_NAME, RouterActor(ctx, ready))
    runtime.send(NODE, "subscribe", (), sender=ctx.router_address)
    await asyncio.wait_for(ready.wait(), subscribe_timeout_s)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Reader(ctx), cfg.get("bind", "127.0.0.1"), cfg["port"],
                                      reuse_port=True, backlog=1024)
    ctx.server = server
    loop.create_task(_tick(ctx))

    async def control(op: str, args: dict) -> Any:
        if op == "list_connections":
            return [{"name": r.owner, "user": r.opened.user if r.opened else "",
                     "vhost": r.opened.vhost if r.opened else "", "channels": len(r.channels),
                     "state": "flow" if r.paused else "running"} for r in ctx.readers]
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
