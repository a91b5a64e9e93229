"""A host's registry replica: the actor that keeps a read copy of its node's registry current.

A shell only. It subscribes to the node core (when its host starts, and again whenever the node
host says it restarted), applies the `MetadataChanged` records the node publishes (the first one is
the snapshot), and answers the node's `Sync` once everything sent before it is applied - the node
waits for that before it answers an admin command, because that command's client may act on any
host at once. Before applying a change it notes which queue actors the change deletes (a
`QueueDeleted` names its queue's home; a deleted vhost takes its queues; a snapshot takes every
queue it does not hold again), so its host can tell the channels that used them. Connection hosts
route publishes with the replica and pass `on_change` to tell their channels (and
`on_host_restarted`, for the node's notice that a queue host crashed and came back); queue hosts
route dead-lettered messages.
"""
from __future__ import annotations

import asyncio
import os
from typing import Any, Callable

import structlog

from actors.messages.calls import Reply
from actors.messages.node import MetadataChanged, QueueHostRestarted, Subscribe, Sync
from actors.placement import member_hosts, queue_address
from actors.runtime.address import Address
from metadata.changes import QueueDeleted, Reset, VhostDeleted

log = structlog.get_logger("warren.replica")

OnChange = Callable[[Address, list, list[Address]], None]


class RegistryReplica:
    def __init__(self, runtime: Any, name: str, registry: Any, node: Address, on_change: OnChange | None = None,
                 on_host_restarted: Callable[[Address, str], None] | None = None,
                 incarnation: int | None = None) -> None:
        self.runtime = runtime
        self.node = node
        self.on_host_restarted = on_host_restarted
        self.registry = registry
        self.address = Address(runtime.host, name)
        self.on_change = on_change
        self.ready = asyncio.Event()  # set once the snapshot is applied
        # this host process's (a connection host's channels are named by it: actors/reader/shell.py)
        self.incarnation = int.from_bytes(os.urandom(6), "big") if incarnation is None else incarnation

    def subscribe(self) -> None:
        """Ask the node for the snapshot and every later change."""
        self.runtime.send(self.node, Subscribe(self.incarnation), sender=self.address)

    def receive(self, sender: Address, msg: Any) -> None:
        kind = type(msg)
        if kind is Sync:
            self.runtime.send(sender, Reply(msg.rid), sender=self.address)
        elif kind is MetadataChanged:
            gone = self._gone(msg.changes)
            self.registry.apply(msg.changes)
            self.ready.set()
            if self.on_change is not None:
                if any(type(c) is Reset for c in msg.changes):  # a queue the snapshot holds again is not gone
                    gone = [g for g in gone if self.registry.queue(g[0], g[1]) is None]
                self.on_change(sender, msg.changes, [queue_address(home, vhost, name) for vhost, name, home in gone])
        elif kind is QueueHostRestarted:
            if self.on_host_restarted is not None:
                self.on_host_restarted(sender, msg.host)
        else:
            log.warning("replica.unexpected_message", host=self.runtime.host, kind=kind.__name__)

    def _gone(self, changes: list) -> list[tuple[str, str, str]]:
        """(vhost, name, home) of the queues `changes` delete, named before they are applied."""
        gone: list[tuple[str, str, str]] = []
        for change in changes:
            kind = type(change)
            if kind is QueueDeleted:
                gone += [(change.vhost, change.name, h) for h in member_hosts(change.home, change.replicas)]
            elif kind is VhostDeleted or kind is Reset:
                vhost = change.vhost if kind is VhostDeleted else None
                gone += [(q.vhost, q.name, h) for q in self.registry.queues(vhost)
                         for h in member_hosts(q.home, q.replicas)]
        return gone
