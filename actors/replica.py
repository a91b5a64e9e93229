"""A host's registry replica: the actor that keeps a read copy of the node's registry current.

A shell only. It subscribes to the node, applies the `MetadataChanged` records the node publishes
(the first one is the snapshot), and answers the node's `Sync` once everything sent before it is
applied — the node waits for that before it answers an admin command, because
that command's client may act on any host at once. Connection hosts route publishes with the
replica and pass `on_change` to tell their channels (and `on_host_restarted`, for the node's notice
that a queue host crashed and came back); queue hosts route dead-lettered messages.
"""
from __future__ import annotations

import asyncio
from typing import Any, Callable

import structlog

from actors.messages.calls import Reply
from actors.messages.node import MetadataChanged, QueueHostRestarted, Subscribe, Sync
from actors.placement import NODE
from actors.runtime.address import Address

log = structlog.get_logger("warren.replica")

OnChange = Callable[[Address, list, list], None]


class RegistryReplica:
    def __init__(self, runtime: Any, name: str, registry: Any, on_change: OnChange | None = None,
                 on_host_restarted: Callable[[Address, str], None] | None = None) -> None:
        self.runtime = runtime
        self.on_host_restarted = on_host_restarted
        self.registry = registry
        self.address = Address(runtime.host, name)
        self.on_change = on_change
        self.ready = asyncio.Event()  # set once the snapshot is applied

    def subscribe(self) -> None:
        """Ask the node for the snapshot and every later change."""
        self.runtime.send(NODE, Subscribe(), sender=self.address)

    def receive(self, sender: Address, msg: Any) -> None:
        kind = type(msg)
        if kind is Sync:
            self.runtime.send(sender, Reply(msg.rid), sender=self.address)
        elif kind is MetadataChanged:
            self.registry.apply(msg.changes)
            self.ready.set()
            if self.on_change is not None:
                self.on_change(sender, msg.changes, msg.gone)
        elif kind is QueueHostRestarted:
            if self.on_host_restarted is not None:
                self.on_host_restarted(sender, msg.host)
        else:
            log.warning("replica.unexpected_message", host=self.runtime.host, kind=kind.__name__)
