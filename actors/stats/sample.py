"""One sample of the node: every host's `HostStats` merged, and the values whose rates are shown.

Theory of operation: the collector asks every host for its statistics once per interval and
hands the answers, with the time they were asked for, to `merge`. The sample is what every
listing joins the registry with: a queue the registry has and the sample lacks (declared since
the sample, or its host is restarting) is shown with zero counts, as RabbitMQ shows a queue whose
stats have not been emitted yet. `rate_values` names the objects and values that get rates:
per queue its counters and depths, per channel its counters, per exchange its publish_in and
publish_out (summed over the connection hosts), per vhost and for the node the sums.
Hosts of any node may answer; connection hosts name their node on their rows, and node hosts
answer with their node's facts (`nodes`, by node name). The Raft rows and WAL counters come from
this node's quorum host only (actors/stats/reporters.py).

Queues and Raft members come as changes (actors/stats/deltas.py): `HostTables` keeps each host's
rows and applies each answer to them (`apply`, which says which rows changed), and a sample takes
the tables of the hosts that answered; `rate_values` then names per queue only the changed ones,
the vhosts' and the node's depths being sums over every queue (a loop of additions, the one
O(queues) part of a sample).
"""
from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

from actors.stats.counters import add_into

DEPTHS = ("messages", "messages_ready", "messages_unacknowledged")


@dataclass(frozen=True)
class Sample:
    at_ms: int
    queues: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    connections: list[dict[str, Any]] = field(default_factory=list)
    channels: list[dict[str, Any]] = field(default_factory=list)
    consumers: list[dict[str, Any]] = field(default_factory=list)
    flow: list[dict[str, Any]] = field(default_factory=list)
    totals: dict[str, int] = field(default_factory=dict)
    exchanges: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    raft: list[dict[str, Any]] = field(default_factory=list)  # this node's quorum queue members
    wal: dict[str, int] = field(default_factory=dict)          # this node's WAL counters
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)  # each answering node's facts, by name


@dataclass
class HostTable:
    """One host's queue and Raft rows as its answers built them up."""

    epoch: str = ""
    version: int = -1
    queues: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    raft: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)


class HostTables:
    def __init__(self) -> None:
        self.hosts: dict[str, HostTable] = {}

    def since(self, host: str) -> tuple[str, int]:
        """The (epoch, version) to ask `host` from."""
        table = self.hosts.get(host)
        return ("", -1) if table is None else (table.epoch, table.version)

    def apply(self, a: Any, changed: dict[tuple[str, str], dict[str, Any]], gone: set[tuple[str, str]]) -> None:
        """Apply one host's answer; add the queue rows it changed to `changed`, and the queues it
        no longer holds to `gone`."""
        table = self.hosts.setdefault(a.host, HostTable())
        if a.full or a.epoch != table.epoch:
            old = table.queues
            table.queues = {(q["vhost"], q["name"]): q for q in a.queues}
            table.raft = {(r["vhost"], r["queue"]): r for r in a.raft}
            gone.update(key for key in old if key not in table.queues)
            changed.update(table.queues)
        else:
            for vhost, name in a.gone:
                if table.queues.pop((vhost, name), None) is not None:
                    gone.add((vhost, name))
            for q in a.queues:
                key = (q["vhost"], q["name"])
                table.queues[key] = changed[key] = q
            for vhost, name in a.raft_gone:
                table.raft.pop((vhost, name), None)
            for r in a.raft:
                table.raft[(r["vhost"], r["queue"])] = r
        table.epoch, table.version = a.epoch, a.version

    def keep_only(self, hosts: Iterable[str]) -> None:
        """Forget the hosts no longer sampled (a node that left)."""
        keep = set(hosts)
        for host in [h for h in self.hosts if h not in keep]:
            del self.hosts[host]


def merge(at_ms: int, answers: Iterable[Any], tables: HostTables | None = None) -> Sample:
    """A sample from the hosts' `HostStats` (any order; a host that did not answer is absent),
    their queue and Raft rows from `tables` (after `apply`), or from the answers themselves."""
    sample = Sample(at_ms)
    for a in answers:
        if tables is None:
            for q in a.queues:
                sample.queues[(q["vhost"], q["name"])] = q
            sample.raft.extend(a.raft)
        else:
            table = tables.hosts[a.host]
            sample.queues.update(table.queues)
            sample.raft.extend(table.raft.values())
        sample.connections.extend(a.connections)
        sample.channels.extend(a.channels)
        sample.consumers.extend(a.consumers)
        sample.flow.extend(a.flow)
        add_into(sample.totals, a.totals)
        for x in a.exchanges:
            add_into(sample.exchanges.setdefault((x["vhost"], x["name"]), {}),
                     {"publish_in": x["publish_in"], "publish_out": x["publish_out"]})
        add_into(sample.wal, a.wal)
        if a.node:
            sample.nodes[a.node["name"]] = a.node
    sample.connections.sort(key=lambda c: c["name"])
    sample.channels.sort(key=lambda c: (c["connection"], c["number"]))
    return sample


def rate_values(sample: Sample, changed: Iterable[tuple[str, str]] | None = None) -> dict[Hashable, dict[str, int]]:
    """The values to keep rates of, by object: ("queue", vhost, name) (of the `changed` queues
    only, when given), ("channel", name), ("exchange", vhost, name), ("vhost", vhost) and ("node",)."""
    out: dict[Hashable, dict[str, int]] = {}
    queues = sample.queues
    for key in queues if changed is None else changed:
        q = queues.get(key)
        if q is not None:
            out[("queue", *key)] = {**q.get("message_stats", {}), **{d: q.get(d, 0) for d in DEPTHS}}
    node: dict[str, int] = {}
    vhosts: dict[str, list[int]] = {}
    for (vhost, _), q in queues.items():
        depths = vhosts.get(vhost)
        if depths is None:
            depths = vhosts[vhost] = [0, 0, 0]
        depths[0] += q.get("messages", 0)
        depths[1] += q.get("messages_ready", 0)
        depths[2] += q.get("messages_unacknowledged", 0)
    for vhost, depths in vhosts.items():
        values = dict(zip(DEPTHS, depths))
        out[("vhost", vhost)] = values
        add_into(node, values)
    for ch in sample.channels:
        stats = ch.get("message_stats", {})
        out[("channel", ch["name"])] = dict(stats)
        add_into(out.setdefault(("vhost", ch["vhost"]), {}), stats)
    for (vhost, name), counts in sample.exchanges.items():
        out[("exchange", vhost, name)] = counts
    out[("node",)] = add_into(node, {k: v for k, v in sample.totals.items() if k in _NODE_COUNTERS})
    return out


_NODE_COUNTERS = frozenset(("publish", "confirm", "return_unroutable", "drop_unroutable", "deliver", "deliver_no_ack",
                            "get", "get_no_ack", "get_empty", "ack", "redeliver", "deliver_get"))
