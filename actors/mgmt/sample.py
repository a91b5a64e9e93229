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
this node's quorum host only (actors/mgmt/reporters.py).
"""
from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

from actors.mgmt.counters import add_into

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


def merge(at_ms: int, answers: Iterable[Any]) -> Sample:
    """A sample from the hosts' `HostStats` (any order; a host that did not answer is absent)."""
    sample = Sample(at_ms)
    for a in answers:
        for q in a.queues:
            sample.queues[(q["vhost"], q["name"])] = q
        sample.connections.extend(a.connections)
        sample.channels.extend(a.channels)
        sample.consumers.extend(a.consumers)
        sample.flow.extend(a.flow)
        add_into(sample.totals, a.totals)
        for x in a.exchanges:
            add_into(sample.exchanges.setdefault((x["vhost"], x["name"]), {}),
                     {"publish_in": x["publish_in"], "publish_out": x["publish_out"]})
        sample.raft.extend(a.raft)
        add_into(sample.wal, a.wal)
        if a.node:
            sample.nodes[a.node["name"]] = a.node
    sample.connections.sort(key=lambda c: c["name"])
    sample.channels.sort(key=lambda c: (c["connection"], c["number"]))
    return sample


def rate_values(sample: Sample) -> dict[Hashable, dict[str, int]]:
    """The values to keep rates of, by object: ("queue", vhost, name), ("channel", name),
    ("exchange", vhost, name), ("vhost", vhost) and ("node",)."""
    out: dict[Hashable, dict[str, int]] = {}
    node: dict[str, int] = {}
    for (vhost, name), q in sample.queues.items():
        values = {**q.get("message_stats", {}), **{d: q.get(d, 0) for d in DEPTHS}}
        out[("queue", vhost, name)] = values
        add_into(out.setdefault(("vhost", vhost), {}), {d: q.get(d, 0) for d in DEPTHS})
        add_into(node, {d: q.get(d, 0) for d in DEPTHS})
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
