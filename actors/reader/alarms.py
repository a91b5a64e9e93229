"""A connection host's watch on the cluster's resource alarms: the actor that tells the host's
connections what the cluster is short of.

A shell: it asks the node's alarm relay (actors/monitor/relay.py) with `WatchAlarms` and hands
each `Conserve(resource, on)` it answers with to the host context, which keeps the set (a
connection opened later starts from it) and tells every connection (flow/blocking.py decides).
"""
from __future__ import annotations

from typing import Any

import structlog

from actors.messages.alarms import Conserve, WatchAlarms
from actors.runtime.address import Address

log = structlog.get_logger("warren.reader.alarms")

WATCHER_NAME = "alarm_watcher"


class AlarmWatcher:
    def __init__(self, ctx: Any, relay: Address) -> None:
        self.ctx = ctx
        self.relay = relay  # the relay of this host's node
        self.address = Address(ctx.runtime.host, WATCHER_NAME)

    def watch(self) -> None:
        """Watch (again: a restarted node host knows no watcher)."""
        self.ctx.runtime.send(self.relay, WatchAlarms(), sender=self.address)

    def receive(self, sender: Address, msg: Any) -> None:
        if type(msg) is Conserve:
            self.ctx.conserve(msg.resource, msg.on)
        else:
            log.warning("alarm_watcher.unexpected_message", kind=type(msg).__name__, sender=str(sender))
