"""Each host's answer to the node's sampling (`CollectStats`, actors/messages/stats.py).

A shell: it reads what the host's actors hold at the moment the request arrives (queue counts and
counters, connections, channels and consumers, the publish chain's flow rows - the same rows
`warrenctl flow` shows: QueueManager.flow_links, actors/reader/admin.py's flow_links) and answers
one `HostStats`. Nothing here runs per message. Queues (and Raft members) are reported as changes
(actors/stats/deltas.py: the rows of those that had inputs since the collector last asked, or are
still settling), so idle queues cost nothing per sample; the flow rows name the queues that had
inputs in the last `deltas.SETTLE_MS` or are in flow, the idle ones being all running with
nothing waiting. Field names are the management API's, so the node only joins and shapes.
A quorum host adds, for its own node's collector only, one row of Raft metrics per member (ra's
names: term, snapshot_index, last_applied, commit_index, last_written_index, commit_latency) and
the WAL's counters, which the Prometheus endpoint shows as rabbitmq_prometheus does.
A node host answers with its node's facts, and a connection host names its node on every row, so
the collector of any node of a cluster shows every node, and where each connection is.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from actors.messages.calls import Reply
from actors.messages.stats import REPORTER_NAME, CollectStats, HostStats
from actors.stats.counters import add_exchange_counts, add_into
from actors.placement import node_of
from actors.stats.deltas import Changes
from actors.reader import admin as conn_admin
from actors.runtime.address import Address
from actors.runtime.clock import monotonic_ms


def _flow(states: dict[str, dict], name: str) -> dict:
    return states.get(name) or {"state": "running", "flow_share": 0.0, "blocked_on": [], "downstream": []}


class QueueHostReporter:
    """The queues of one queue host."""

    def __init__(self, runtime: Any, manager: Any) -> None:
        self.runtime = runtime
        self.manager = manager
        self.address = Address(runtime.host, REPORTER_NAME)

    def receive(self, sender: Address, msg: CollectStats) -> None:
        full, rows, gone, flow = queue_changes(self.manager, msg)
        changes = self.manager.changes
        self.runtime.send(sender, Reply(msg.rid, HostStats(self.runtime.host, rows, [], [], [], flow, {},
                                                           epoch=changes.epoch, version=changes.version, full=full,
                                                           gone=gone)),
                          sender=self.address)


def queue_changes(manager: Any, msg: CollectStats) -> tuple[bool, list[dict], list, list[dict]]:
    """(full, rows, gone, flow rows) of the classic queues a QueueManager holds, for a collector
    that merged `msg.since` (see the module docstring)."""
    changes: Changes = manager.changes
    now = monotonic_ms()
    full, keys, gone = changes.since(msg.epoch, msg.since, now)
    queues = manager.queues  # by actor name: q:VHOST:NAME

    def held(keys: list) -> list:
        return [a for a in (queues.get(f"q:{vhost}:{name}") for vhost, name in keys) if a is not None]
    actors = list(queues.values()) if full else held(keys)
    rows = []
    for actor in actors:
        if not actor.reports:  # a replicated stream's replica: its leader's host reports the stream
            continue
        stats = actor.stats()
        rows.append({**stats, "message_stats": actor.core.counters.as_dict(), "flow": stats["state"]})
        changes.unsettled((actor.core.vhost, actor.core.name), stats["state"] != "running")
    flow = manager.flow_links(held(changes.recent(now)))
    return full, rows, gone, flow


def raft_row(member: Any) -> dict[str, Any]:
    """One quorum queue member's Raft metrics (ra's ra_metrics fields, and its segment files)."""
    core = member.core
    config = core.state.config
    return {"vhost": config.vhost, "queue": config.name, "term": core.term, "snapshot_index": core.snapshot_index,
            "last_applied": core.applied, "commit_index": core.commit, "last_written_index": core.log.written_index(),
            "commit_latency_ms": member.commit_latency_ms, "segments": len(core.log.segments.files)}


class QuorumHostReporter:
    """The quorum queues whose member on this node leads (each queue is counted once, by its
    leader): their counts, and the leader's node; to its own node, every member's Raft metrics
    and the WAL's counters."""

    def __init__(self, runtime: Any, host: Any, node: str) -> None:
        self.runtime = runtime
        self.host = host
        self.node = node
        self.address = Address(runtime.host, REPORTER_NAME)

    def receive(self, sender: Address, msg: CollectStats) -> None:
        host, changes = self.host, self.host.changes
        full, keys, dropped = changes.since(msg.epoch, msg.since, monotonic_ms())
        members = list(host.by_queue.values()) if full else [m for m in map(host.by_queue.get, keys) if m is not None]
        queues, gone = [], list(dropped)
        for member in members:
            status = member.status()
            if status["role"] != "leader":  # counted by its leader's host: gone from this one's rows
                gone.append((status["vhost"], status["queue"]))
                continue
            queues.append({**{k: v for k, v in status.items() if k.startswith(("message", "consumers"))},
                           "vhost": status["vhost"], "name": status["queue"], "leader": self.node,
                           "pid": status["id"],  # RabbitMQ's pid of a quorum queue: its leader's
                           "state": "running", "flow": "running",
                           "message_stats": {"publish": status["published"]}})
        raft: list[dict[str, Any]] = []
        wal: dict[str, int] = {}
        if node_of(sender.host) == self.node:
            raft = [raft_row(member) for member in members]
            wal = host.wal.stats()
        self.runtime.send(sender, Reply(msg.rid, HostStats(self.runtime.host, queues, [], [], [], [], {}, raft=raft,
                                                           wal=wal, epoch=changes.epoch, version=changes.version,
                                                           full=full, gone=gone, raft_gone=list(dropped))),
                          sender=self.address)


def node_facts(name: str, started_s: float, resources: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A node's facts as the management API's node object names them; `started_s`: the node host's
    start on the monotonic clock; `resources`: its memory and disk (the resource monitor's)."""
    return {"name": name, "pid": os.getpid(), "processors": os.cpu_count() or 1,
            "uptime_ms": int((time.monotonic() - started_s) * 1000), **resources()}


class NodeHostReporter:
    """The node's facts (`facts()`: the management API's node fields, the node's name among them)."""

    def __init__(self, runtime: Any, facts: Callable[[], dict[str, Any]]) -> None:
        self.runtime = runtime
        self.facts = facts
        self.address = Address(runtime.host, REPORTER_NAME)

    def receive(self, sender: Address, msg: CollectStats) -> None:
        self.runtime.send(sender, Reply(msg.rid, HostStats(self.runtime.host, [], [], [], [], [], {}, node=self.facts())),
                          sender=self.address)


class ConnectionHostReporter:
    """The connections, channels and consumers of one connection host, and its node-wide totals;
    and its queues when it holds the node's classic queues (`queues`, its QueueManager)."""

    def __init__(self, runtime: Any, ctx: Any, queues: Any = None) -> None:
        self.runtime = runtime
        self.ctx = ctx
        self.queues = queues
        self.address = Address(runtime.host, REPORTER_NAME)

    def receive(self, sender: Address, msg: CollectStats) -> None:
        ctx = self.ctx
        node = node_of(self.runtime.host)
        by_owner = {r.owner: r for r in ctx.readers}
        connections = conn_admin.list_connections(ctx)
        for row in connections:
            reader = by_owner[row["name"]]
            row.update(node=node, connected_at=reader.connected_at, frame_max=ctx.settings.frame_max,
                       channel_max=ctx.settings.channel_max, timeout=ctx.settings.heartbeat,
                       capabilities=dict(reader.opened.capabilities) if reader.opened else {})
        channels = []
        totals = dict(ctx.retired)
        exchanges = {key: list(pair) for key, pair in ctx.retired_exchanges.items()}
        for row in conn_admin.list_channels(ctx):
            reader = by_owner[row["connection"]]
            ch = reader.channels[row["number"]]
            core = ch.core
            f = self.runtime.flow_state(ch.address) or _flow({}, "")  # its own only: not every queue's
            counts = core.message_stats()
            add_into(totals, counts)
            add_exchange_counts(exchanges, core.vhost, core.exchange_counts)
            channels.append({**row, "node": node, "message_stats": counts, "flow_share": f["flow_share"],
                             "messages_unconfirmed": len(core.confirm) if core.confirm is not None else 0,
                             "transactional": core.tx is not None,
                             "messages_uncommitted": len(core.tx) if core.tx is not None else 0,
                             "prefetch_count": core.qos.consumer_limit,
                             "global_prefetch_count": core.qos.channel_limit,
                             "address": str(ch.address)})
        flow = conn_admin.flow_links(ctx)
        consumers = [{**row, "node": node} for row in conn_admin.list_consumers(ctx)]
        totals.update(connections_opened=ctx.connections_opened, channels_opened=ctx.channels_opened,
                      connections=len(connections), channels=len(channels),
                      auth_attempts_succeeded=ctx.login_attempts["succeeded"],
                      auth_attempts_failed=ctx.login_attempts["failed"])
        exchange_rows = [{"vhost": vhost, "name": name, "publish_in": n_in, "publish_out": n_out}
                         for (vhost, name), (n_in, n_out) in exchanges.items()]
        queues: list[dict[str, Any]] = []
        full, gone, epoch, version = True, [], "", 0
        if self.queues is not None:
            full, queues, gone, queue_flow = queue_changes(self.queues, msg)
            flow = flow + queue_flow
            epoch, version = self.queues.changes.epoch, self.queues.changes.version
        self.runtime.send(sender, Reply(msg.rid, HostStats(self.runtime.host, queues, connections, channels, consumers,
                                                           flow, totals, exchanges=exchange_rows, epoch=epoch,
                                                           version=version, full=full, gone=gone)),
                          sender=self.address)
