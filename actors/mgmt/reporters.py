"""Each host's answer to the node's sampling (`CollectStats`, actors/messages/stats.py).

A shell: it reads what the host's actors hold at the moment the request arrives (queue counts and
counters, connections, channels and consumers, the runtime's flow states) and answers one
`HostStats`. Nothing here runs per message; the cost is one pass over the host's actors per
sample. Field names are the management API's, so the node only joins and shapes.
"""
from __future__ import annotations

from typing import Any

from actors.messages.calls import Reply
from actors.messages.stats import REPORTER_NAME, CollectStats, HostStats
from actors.mgmt.counters import add_into
from actors.reader import admin as conn_admin
from actors.runtime.address import Address


def _flow(states: dict[str, dict], name: str) -> dict:
    return states.get(name) or {"state": "running", "flow_share": 0.0, "blocked_on": [], "downstream": []}


class QueueHostReporter:
    """The queues of one queue host."""

    def __init__(self, runtime: Any, manager: Any) -> None:
        self.runtime = runtime
        self.manager = manager
        self.address = Address(runtime.host, REPORTER_NAME)

    def receive(self, sender: Address, msg: CollectStats) -> None:
        states = self.runtime.flow_states()
        queues, flow = [], []
        for name, actor in list(self.manager.queues.items()):
            f = _flow(states, name)
            queues.append({**actor.stats(), "message_stats": actor.core.counters.as_dict(), "flow": f["state"]})
            flow.append({"kind": "queue", "name": str(actor.address), "state": f["state"],
                         "downstream": f["downstream"], "blocked_on": f["blocked_on"], "flow_share": f["flow_share"]})
        self.runtime.send(sender, Reply(msg.rid, HostStats(self.runtime.host, queues, [], [], [], flow, {})),
                          sender=self.address)


class ConnectionHostReporter:
    """The connections, channels and consumers of one connection host, and its node-wide totals."""

    def __init__(self, runtime: Any, ctx: Any) -> None:
        self.runtime = runtime
        self.ctx = ctx
        self.address = Address(runtime.host, REPORTER_NAME)

    def receive(self, sender: Address, msg: CollectStats) -> None:
        ctx = self.ctx
        states = self.runtime.flow_states()
        by_owner = {r.owner: r for r in ctx.readers}
        connections = conn_admin.list_connections(ctx)
        for row in connections:
            reader = by_owner[row["name"]]
            row.update(connected_at=reader.connected_at, frame_max=ctx.settings.frame_max,
                       channel_max=ctx.settings.channel_max, timeout=ctx.settings.heartbeat,
                       capabilities=dict(reader.opened.capabilities) if reader.opened else {})
        channels, flow = [], []
        totals = dict(ctx.retired)
        for row in connections:
            reader = by_owner[row["name"]]
            flow.append({"kind": "connection", "name": reader.owner, "state": row["state"],
                         "downstream": [str(ch.address) for ch in reader.channels.values()],
                         "blocked_on": [str(ch.address) for ch in reader.channels.values()
                                        if self.runtime.blocked(ch.address)], "flow_share": 0.0})
        for row in conn_admin.list_channels(ctx):
            reader = by_owner[row["connection"]]
            ch = reader.channels[row["number"]]
            core = ch.core
            f = _flow(states, ch.address.name)
            counts = core.message_stats()
            add_into(totals, counts)
            channels.append({**row, "message_stats": counts, "state": f["state"], "flow_share": f["flow_share"],
                             "messages_unconfirmed": len(core.confirm) if core.confirm is not None else 0,
                             "transactional": core.tx is not None,
                             "messages_uncommitted": len(core.tx) if core.tx is not None else 0,
                             "prefetch_count": core.qos.consumer_limit,
                             "global_prefetch_count": core.qos.channel_limit,
                             "address": str(ch.address)})
            flow.append({"kind": "channel", "name": str(ch.address), "state": f["state"],
                         "downstream": f["downstream"], "blocked_on": f["blocked_on"], "flow_share": f["flow_share"]})
        consumers = conn_admin.list_consumers(ctx)
        totals.update(connections_opened=ctx.connections_opened, channels_opened=ctx.channels_opened,
                      connections=len(connections), channels=len(channels))
        self.runtime.send(sender, Reply(msg.rid, HostStats(self.runtime.host, [], connections, channels, consumers,
                                                           flow, totals)), sender=self.address)
