"""The cluster's open connections per vhost and per user, and channels per user, as one connection
host knows them: the counts the vhost and user limits are checked against (login.py).

Theory of operation: RabbitMQ keeps tracking tables that every node reads (rabbit_connection_tracking,
rabbit_channel_tracking) and its limits count the whole cluster. Here each connection host counts
its own exactly, as its connections open and close (a connection counts from connection.open-ok:
RabbitMQ tracks it from connection_created) and as their channels open and close (a moved
connection leaves one host's counts for the other's). The counts of the vhosts and users that
have a limit (`tracked`, from the registry: LimitTable.tracked_vhosts / tracked_users) are what the
other hosts need: whenever one of them changes here, or the tracked set does, this host tells
every other connection host of the cluster its counts of those keys (`TrackedCounts`, one message
per host at the end of the loop turn, however many changes it holds). A host that starts asks the
others for theirs; the hosts of a node that goes down are forgotten with it (their connections
are gone). A check adds this host's count to the others' last word, so as in RabbitMQ two
connections opened at the same moment on two hosts may both pass a limit of one.

`Tracking` is the pure part (counts in, counts out); `TrackingShell` sends and schedules.
"""
from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from actors.messages.node import TrackedCounts
from actors.placement import kind_of, node_of
from actors.runtime.address import Address

CONN_KIND_PREFIX = "conn"


class Tracking:
    def __init__(self, host: str) -> None:
        self.host = host
        self.vhosts: Counter[str] = Counter()  # this host's open connections per vhost
        self.users: Counter[str] = Counter()  # ... per user
        self.channels: Counter[str] = Counter()  # this host's open channels per user
        self.remote: dict[str, TrackedCounts] = {}  # every other connection host's last word
        self.tracked_vhosts: frozenset[str] = frozenset()
        self.tracked_users: frozenset[str] = frozenset()
        self.changed = False  # a tracked count changed since the last `counts()`

    # ---------------------------------------------------------------- this host's changes
    def opened(self, vhost: str, user: str, n: int = 1) -> None:
        self.vhosts[vhost] += n
        self.users[user] += n
        if vhost in self.tracked_vhosts or user in self.tracked_users:
            self.changed = True

    def closed(self, vhost: str, user: str) -> None:
        self.opened(vhost, user, -1)

    def channel_opened(self, user: str, n: int = 1) -> None:
        self.channels[user] += n
        if user in self.tracked_users:
            self.changed = True

    def channel_closed(self, user: str) -> None:
        self.channel_opened(user, -1)

    def track(self, vhosts: frozenset[str], users: frozenset[str]) -> None:
        """The keys with limits now (after a registry change)."""
        if (vhosts, users) != (self.tracked_vhosts, self.tracked_users):
            self.tracked_vhosts, self.tracked_users = vhosts, users
            self.changed = True

    def counts(self, ask: bool = False) -> TrackedCounts:
        """What the other hosts are told."""
        return TrackedCounts(self.host, {v: self.vhosts[v] for v in self.tracked_vhosts if self.vhosts[v]},
                             {u: self.users[u] for u in self.tracked_users if self.users[u]},
                             {u: self.channels[u] for u in self.tracked_users if self.channels[u]}, ask)

    # ---------------------------------------------------------------- the others
    def heard(self, msg: TrackedCounts) -> None:
        self.remote[msg.host] = msg

    def nodes_down(self, nodes: frozenset[str]) -> None:
        for host in [h for h in self.remote if node_of(h) in nodes]:
            del self.remote[host]

    # ---------------------------------------------------------------- the cluster's counts
    def vhost_connections(self, vhost: str) -> int:
        return self.vhosts[vhost] + sum(c.vhosts.get(vhost, 0) for c in self.remote.values())

    def user_connections(self, user: str) -> int:
        return self.users[user] + sum(c.users.get(user, 0) for c in self.remote.values())

    def user_channels(self, user: str) -> int:
        return self.channels[user] + sum(c.channels.get(user, 0) for c in self.remote.values())


class TrackingShell:
    """Tells the other connection hosts (the runtime's directory, less the nodes that are down)."""

    def __init__(self, runtime: Any, tracking: Tracking, admin_name: str, down_nodes: Any) -> None:
        self.runtime = runtime
        self.tracking = tracking
        self.address = Address(runtime.host, admin_name)
        self._admin_name = admin_name
        self._down_nodes = down_nodes  # () -> the nodes the cluster sees down
        self._scheduled = False

    def peers(self) -> list[str]:
        down = self._down_nodes()
        return sorted(h for h in self.runtime.directory if h != self.runtime.host
                      and kind_of(h).startswith(CONN_KIND_PREFIX) and node_of(h) not in down)

    def start(self) -> None:
        """A host that starts: its counts (none) to every other, who answer with theirs."""
        self._tell(self.tracking.counts(ask=True))

    def receive(self, msg: TrackedCounts) -> None:
        self.tracking.heard(msg)
        if msg.ask:
            self.runtime.send(Address(msg.host, self._admin_name), self.tracking.counts(), sender=self.address)

    def maybe_tell(self) -> None:
        """After something changed: tell the others at the end of this loop turn, if a tracked count moved."""
        if self.tracking.changed and not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._scheduled = False
        if self.tracking.changed:
            self.tracking.changed = False
            self._tell(self.tracking.counts())

    def _tell(self, msg: TrackedCounts) -> None:
        for host in self.peers():
            self.runtime.send(Address(host, self._admin_name), msg, sender=self.address)
