"""The management API's JSON: registry records joined with the latest sample, in RabbitMQ's shapes.

Theory of operation: a listing is the registry's records (authoritative, current) joined with the
latest sample of the hosts (actors/stats/sample.py, at most one interval old) and the rates between
the last two samples (actors/stats/rates.py). Field names, nesting and the `*_details: {"rate": r}`
pairs are those of RabbitMQ 3.10's management plugin (checked against
tests/mgmt/oracle_shapes.json); `message_stats` appears once an object has counters, as in RabbitMQ.
Values RabbitMQ takes from the Erlang VM (reductions, garbage_collection, backing_queue_status) are
left out. A quorum queue shows `leader` (as its leading member reports it, else the first leader),
`members` (its record's) and `online` (the members, as the sample cannot tell which are down).

Everything here is a function of its arguments: `View` carries what a request sees (registry,
sample, rates, the node's name and facts, and the memo of rows kept between requests).
"""
from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from actors.stats.counters import FIELDS as COUNTERS
from actors.stats.rates import Rates, with_details
from actors.stats.sample import DEPTHS, Sample
from actors.placement import node_of
from metadata.definitions import HASHING_ALGORITHM
from metadata.policies import definition_json
from wire.codec import decimal_parts

API_VERSION = "3.10.8"  # the management API warren answers as (rabbitmqadmin and tools read it)
PRODUCT = "warren"
QUEUE_COUNTERS = ("publish", "deliver", "deliver_no_ack", "get", "get_no_ack", "get_empty", "ack", "redeliver",
                  "deliver_get")
CHANNEL_COUNTERS = COUNTERS + ("deliver_get",)
EXCHANGE_TYPES = (("direct", "AMQP direct exchange, as per the AMQP specification"),
                  ("fanout", "AMQP fanout exchange, as per the AMQP specification"),
                  ("headers", "AMQP headers exchange, as per the AMQP specification"),
                  ("topic", "AMQP topic exchange, as per the AMQP specification"))


@dataclass
class View:
    registry: Any
    sample: Sample
    rates: Rates
    node: str  # e.g. "warren@localhost"
    product_version: str = "0.1.0"
    facts: dict[str, Any] = field(default_factory=dict)  # the node's measured facts (memory, disk, pid ...)
    memo: Any = None  # the kept rows of long listings (memo.RowMemo), when the caller keeps them
    nodes: dict[str, bool] = field(default_factory=dict)  # the cluster's nodes: running or not (this one alone: {})

    def cluster(self) -> dict[str, bool]:
        return self.nodes or {self.node: True}


def printable(value: Any) -> Any:
    """Field-table values as RabbitMQ's management API writes them (rabbit_mgmt_format:amqp_value):
    nested tables and arrays kept, binaries as text or, when not UTF-8, "Not UTF-8, base64 is: ..."
    (76-column lines), a decimal {Scale, Value} as the float "Scale.Value" (its quirk, kept)."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            encoded = base64.b64encode(value).decode()
            return "Not UTF-8, base64 is: " + "\n".join(encoded[i:i + 76] for i in range(0, len(encoded), 76))
    if isinstance(value, dict):
        return {k: printable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [printable(v) for v in value]
    if isinstance(value, Decimal):
        return float("%d.%d" % decimal_parts(value))
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def message_stats(values: dict[str, int], rates: dict[str, float], names: tuple[str, ...]) -> dict:
    return with_details({n: values.get(n, 0) for n in names}, rates)


# ---------------------------------------------------------------- queues
def queue(view: View, rec: Any, *, detail: bool = False, policy: tuple[str, str, dict] | None = None) -> dict:
    """`policy`: the registry's queue_policy(rec), when the caller has it."""
    reg = view.registry
    node = node_of(rec.home) if rec.home else view.node  # a classic queue's node is its home's
    s = view.sample.queues.get((rec.vhost, rec.name))
    policy, operator, effective = policy or reg.queue_policy(rec)
    qtype = rec.arguments.get("x-queue-type")
    qtype = qtype.decode() if isinstance(qtype, bytes) else (qtype or "classic")
    rates = view.rates.rates(("queue", rec.vhost, rec.name))
    depth = {d: (s or {}).get(d, 0) for d in DEPTHS}
    out = {
        "arguments": printable(rec.arguments), "auto_delete": rec.auto_delete, "durable": rec.durable,
        "exclusive": rec.exclusive_owner is not None, "exclusive_consumer_tag": None, "name": rec.name,
        "vhost": rec.vhost, "node": node, "policy": policy or None, "operator_policy": operator or None,
        "effective_policy_definition": printable(effective), "type": qtype,
        "state": ("flow" if s.get("flow") == "flow" else "running") if s is not None else "down",
        "consumers": (s or {}).get("consumers", 0), "memory": (s or {}).get("memory", 0),
        **with_details(depth, rates),
        "messages_ram": (s or {}).get("messages_ram", 0), "messages_ready_ram": (s or {}).get("messages_ready_ram", 0),
        "messages_unacknowledged_ram": depth["messages_unacknowledged"],
        "messages_persistent": (s or {}).get("messages_persistent", 0),
        "messages_paged_out": (s or {}).get("messages_paged_out", 0),
        "message_bytes": (s or {}).get("memory", 0), "message_bytes_ram": (s or {}).get("message_bytes_ram", 0),
        "message_bytes_ready": 0, "message_bytes_unacknowledged": 0, "message_bytes_persistent": 0,
        "message_bytes_paged_out": 0, "head_message_timestamp": None, "single_active_consumer_tag": None,
        "consumer_utilisation": None, "consumer_capacity": 0, "recoverable_slaves": None,
        "idle_since": None,
    }
    if s is not None and s.get("message_stats"):
        out["message_stats"] = message_stats(s["message_stats"], rates, QUEUE_COUNTERS)
    if qtype == "quorum":
        leader = (s or {}).get("leader") or (rec.members[0] if rec.members else node)
        members = list(rec.members) or [node]
        out.update(node=leader, leader=leader, members=members, online=members, messages_dlx=0,
                   message_bytes_dlx=0, single_active_consumer_ctag=None)
        for key in ("exclusive_consumer_tag", "single_active_consumer_tag", "recoverable_slaves", "idle_since",
                    "head_message_timestamp"):
            out.pop(key)
    if qtype == "stream":  # its record's members (a stream declared on one node: its home's); the
        # leader is the member whose row the sample holds (a stream's counts come from its writer)
        members = list(rec.replicas) or [node]
        leader = (s or {}).get("leader") or members[0]
        out.update(node=leader, leader=leader, members=members, online=members if s is not None else [])
    if detail:
        out.update(consumer_details=[consumer(view, c) for c in view.sample.consumers
                                     if c["queue_name"] == rec.name and c["vhost"] == rec.vhost],
                   incoming=[], deliveries=[])
    return out


# ---------------------------------------------------------------- exchanges and bindings
def exchange(view: View, x: Any, *, detail: bool = False, policy: str | None = None) -> dict:
    """`policy`: the name of the exchange's policy, when the caller has it."""
    if policy is None:
        policy = view.registry.exchange_policy_name(x.vhost, x.name)
    out = {"arguments": printable(x.arguments), "auto_delete": x.auto_delete, "durable": x.durable,
           "internal": x.internal, "name": x.name, "type": x.type, "vhost": x.vhost,
           "user_who_performed_action": "rmq-internal" if not x.name or x.name.startswith("amq.") else "",
           "policy": policy or None}
    counts = view.sample.exchanges.get((x.vhost, x.name))
    if counts:  # as RabbitMQ: publish_out only once something was routed on
        shown = {k: n for k, n in counts.items() if n or k == "publish_in"}
        out["message_stats"] = with_details(shown, view.rates.rates(("exchange", x.vhost, x.name)))
    if detail:
        out.update(incoming=[], outgoing=[])
    return out


def properties_key(routing_key: str, arguments: dict) -> str:
    """RabbitMQ's binding id in URLs: the routing key, with a digest of the arguments when there are any."""
    if not arguments:
        return routing_key or "~"
    digest = hashlib.sha256(json.dumps(printable(arguments), sort_keys=True).encode()).digest()[:8]
    return f"{routing_key}~{base64.urlsafe_b64encode(digest).decode().rstrip('=')}"


def binding(vhost: str, source: str, destination: str, kind: str, routing_key: str, arguments: dict) -> dict:
    return {"source": source, "vhost": vhost, "destination": destination, "destination_type": kind,
            "routing_key": routing_key, "arguments": printable(arguments),
            "properties_key": properties_key(routing_key, arguments)}


def bindings(view: View, vhosts: set[str]) -> list[dict]:
    """Every binding in `vhosts`: the default exchange's implicit ones first, as RabbitMQ lists them."""
    reg = view.registry
    out = [binding(q.vhost, "", q.name, "queue", q.name, {}) for q in reg.queues() if q.vhost in vhosts]
    out += [binding(b.vhost, b.source, b.destination, b.destination_kind, b.routing_key, b.arguments)
            for b in reg.bindings() if b.vhost in vhosts]
    return out


# ---------------------------------------------------------------- vhosts, users, permissions, policies
def vhost(view: View, name: str) -> dict:
    rates = view.rates.rates(("vhost", name))
    depth: dict[str, int] = {d: 0 for d in DEPTHS}
    counters: dict[str, int] = {}
    for (v, _), q in view.sample.queues.items():
        if v == name:
            for d in DEPTHS:
                depth[d] += q.get(d, 0)
    for ch in view.sample.channels:
        if ch["vhost"] == name:
            for k, n in ch.get("message_stats", {}).items():
                counters[k] = counters.get(k, 0) + n
    out = {"name": name, "description": "Default virtual host" if name == "/" else "", "tags": [],
           "metadata": {"description": "Default virtual host" if name == "/" else "", "tags": []},
           "default_queue_type": "undefined", "tracing": False,
           "cluster_state": {n: "running" if up else "stopped" for n, up in sorted(view.cluster().items())},
           **with_details(depth, rates)}
    if counters:
        out["message_stats"] = message_stats(counters, rates, CHANNEL_COUNTERS)
    return out


def user(u: Any, limits: dict | None = None) -> dict:
    return {"name": u.name, "password_hash": u.password_hash, "hashing_algorithm": HASHING_ALGORITHM,
            "tags": list(u.tags), "limits": dict(limits or {})}


def topic_permission(t: Any) -> dict:
    return {"user": t.user, "vhost": t.vhost, "exchange": t.exchange, "write": t.write, "read": t.read}


def vhost_limits(vhost: str, limits: dict) -> dict:
    """A vhost's limits row; an empty value prints as RabbitMQ's empty proplist, []."""
    return {"vhost": vhost, "value": dict(limits) if limits else []}


def permission(p: Any) -> dict:
    return {"user": p.user, "vhost": p.vhost, "configure": p.configure, "write": p.write, "read": p.read}


def policy(p: Any) -> dict:
    return {"vhost": p.vhost, "name": p.name, "pattern": p.pattern, "apply-to": p.apply_to,
            "definition": json.loads(definition_json(p)), "priority": p.priority}


# ---------------------------------------------------------------- connections, channels, consumers
def connection(view: View, c: dict) -> dict:
    return {"name": c["name"], "node": c.get("node", view.node), "user": c["user"], "vhost": c["vhost"], "state": c["state"],
            "channels": c["channels"], "peer_host": c["peer_host"], "peer_port": c["peer_port"],
            "host": "127.0.0.1", "port": c.get("port", 0), "protocol": "AMQP 0-9-1", "type": "network",
            "auth_mechanism": "PLAIN", "ssl": c["ssl"], "ssl_protocol": None, "ssl_cipher": None, "ssl_hash": None,
            "ssl_key_exchange": None, "peer_cert_issuer": None, "peer_cert_subject": None,
            "peer_cert_validity": None, "connected_at": c.get("connected_at", 0), "frame_max": c.get("frame_max", 0),
            "channel_max": c.get("channel_max", 0), "timeout": c.get("timeout", 0),
            "client_properties": {"capabilities": c.get("capabilities", {})},
            "user_who_performed_action": c["user"]}


def channel(view: View, ch: dict, connections: dict[str, dict]) -> dict:
    conn = connections.get(ch["connection"], {})
    out = {"name": ch["name"], "node": ch.get("node", view.node), "number": ch["number"], "user": ch["user"], "vhost": ch["vhost"],
           "state": ch["state"], "flow_share": ch.get("flow_share", 0.0),
           "connection_details": {"name": ch["connection"], "peer_host": conn.get("peer_host", ""),
                                  "peer_port": conn.get("peer_port", 0)},
           "consumer_count": ch["consumer_count"], "messages_unacknowledged": ch["messages_unacknowledged"],
           "messages_unconfirmed": ch.get("messages_unconfirmed", 0), "messages_uncommitted":
           ch.get("messages_uncommitted", 0), "acks_uncommitted": 0, "confirm": ch["confirm"],
           "transactional": ch.get("transactional", False), "prefetch_count": ch.get("prefetch_count", 0),
           "global_prefetch_count": ch.get("global_prefetch_count", 0), "pending_raft_commands": 0,
           "user_who_performed_action": ch["user"], "idle_since": None}
    if ch.get("message_stats"):
        out["message_stats"] = message_stats(ch["message_stats"], view.rates.rates(("channel", ch["name"])),
                                             CHANNEL_COUNTERS)
    return out


def consumer(view: View, c: dict) -> dict:
    number = int(c["channel_pid"].rsplit("(", 1)[-1].rstrip(")")) if "(" in c["channel_pid"] else 0
    connection_name = c["channel_pid"].rsplit(" (", 1)[0]
    return {"consumer_tag": c["consumer_tag"], "ack_required": c["ack_required"], "exclusive": False,
            "active": True, "activity_status": "up", "arguments": {}, "prefetch_count": c.get("prefetch_count", 0),
            "queue": {"name": c["queue_name"], "vhost": c["vhost"]},
            "channel_details": {"name": c["channel_pid"], "number": number, "connection_name": connection_name,
                                "node": c.get("node", view.node), "user": c.get("user", ""), "peer_host": c.get("peer_host", ""),
                                "peer_port": c.get("peer_port", 0)}}


# ---------------------------------------------------------------- the node
def overview(view: View, vhosts: set[str], listeners: list[dict]) -> dict:
    reg, sample = view.registry, view.sample
    rates = view.rates.rates(("node",))
    depth = {d: sum(q.get(d, 0) for (v, _), q in sample.queues.items() if v in vhosts) for d in DEPTHS}
    counters = {k: sample.totals.get(k, 0) for k in CHANNEL_COUNTERS}
    return {
        "management_version": API_VERSION, "rabbitmq_version": API_VERSION, "product_version": view.product_version,
        "product_name": PRODUCT, "rates_mode": "basic", "disable_stats": False, "enable_queue_totals": False,
        "cluster_name": view.node, "node": view.node, "erlang_version": "", "erlang_full_version": "",
        "release_series_support_status": "supported", "statistics_db_event_queue": 0,
        "sample_retention_policies": {"global": [600, 3600, 28800, 86400], "basic": [600, 3600], "detailed": [600]},
        "exchange_types": [{"name": n, "description": d, "enabled": True} for n, d in EXCHANGE_TYPES],
        "message_stats": message_stats(counters, rates, CHANNEL_COUNTERS + ("disk_reads", "disk_writes")),
        "queue_totals": with_details(depth, rates),
        "object_totals": {"connections": sum(1 for c in sample.connections if c["vhost"] in vhosts),
                          "channels": sum(1 for c in sample.channels if c["vhost"] in vhosts),
                          "consumers": sum(1 for c in sample.consumers if c["vhost"] in vhosts),
                          "exchanges": sum(1 for x in reg.exchanges() if x.vhost in vhosts),
                          "queues": sum(1 for q in reg.queues() if q.vhost in vhosts)},
        "churn_rates": churn(sample.totals),
        "listeners": listeners, "contexts": [],
    }


def churn(totals: dict[str, int]) -> dict:
    """Connections and channels opened and closed since the node started (queue churn is not counted)."""
    counts = {"connection_created": totals.get("connections_opened", 0),
              "connection_closed": totals.get("connections_opened", 0) - totals.get("connections", 0),
              "channel_created": totals.get("channels_opened", 0),
              "channel_closed": totals.get("channels_opened", 0) - totals.get("channels", 0),
              "queue_created": 0, "queue_declared": 0, "queue_deleted": 0}
    return with_details(counts, {})


def nodes(view: View) -> list[dict]:
    """Every node of the cluster, as /api/nodes lists them."""
    return [node(view, name) for name in sorted(view.cluster())]


def node(view: View, name: str) -> dict:
    """This node from its own facts; another running node from what its node host answered the
    last sample (the churn counters are the sample's, which sums every node's: shown on this
    node only); a stopped node by name."""
    if name == view.node:
        f, totals = view.facts, view.sample.totals
    elif view.cluster().get(name):
        f, totals = view.sample.nodes.get(name, {}), {}
    else:
        return {"name": name, "type": "disc", "running": False}
    sockets = sum(1 for c in view.sample.connections if c.get("node", view.node) == name)
    return {**churn(totals), "name": name, "type": "disc", "running": True, "os_pid": str(f.get("pid", "")),
            "mem_used": f.get("mem_used", 0), "mem_limit": f.get("mem_limit", 0), "mem_alarm": f.get("mem_alarm", False),
            "disk_free": f.get("disk_free", 0), "disk_free_limit": f.get("disk_free_limit", 0),
            "disk_free_alarm": f.get("disk_free_alarm", False), "fd_used": f.get("fd_used", 0),
            "fd_total": f.get("fd_total", 0), "sockets_used": sockets,
            "sockets_total": f.get("fd_total", 0), "proc_used": f.get("processes", 0), "proc_total": 0,
            "processors": f.get("processors", 1), "uptime": f.get("uptime_ms", 0), "run_queue": 0,
            "rates_mode": "basic", "partitions": [], "cluster_links": [], "applications": [],
            "enabled_plugins": ["rabbitmq_management", "rabbitmq_prometheus"], "net_ticktime": 60,
            "mem_calculation_strategy": "rss", "config_files": [], "log_files": [], "db_dir": f.get("data_dir", ""),
            "exchange_types": [{"name": n, "description": d, "enabled": True} for n, d in EXCHANGE_TYPES],
            "auth_mechanisms": [{"name": name, "description": description, "enabled": name in f.get(
                                     "auth_mechanisms", ("PLAIN", "AMQPLAIN"))} for name, description in AUTH_MECHANISMS],
            "contexts": []}


AUTH_MECHANISMS = (("PLAIN", "SASL PLAIN authentication mechanism"),
                   ("AMQPLAIN", "QPid AMQPLAIN mechanism"),
                   ("EXTERNAL", "TLS peer verification-based authentication plugin. Used in combination with the "
                                "EXTERNAL SASL mechanism."))


def definitions(view: View, vhosts: set[str] | None = None) -> dict:
    """Export: RabbitMQ's definitions document (every user-declared durable object)."""
    reg = view.registry
    keep = (lambda v: True) if vhosts is None else (lambda v: v in vhosts)
    durable_q = {(q.vhost, q.name) for q in reg.queues() if q.durable and q.exclusive_owner is None}
    durable_x = {(x.vhost, x.name) for x in reg.exchanges() if x.durable}
    out = {
        "rabbit_version": API_VERSION, "rabbitmq_version": API_VERSION, "product_name": PRODUCT,
        "product_version": view.product_version,
        "users": [user(u, reg.user_limits(u.name)) for u in reg.users()],
        "vhosts": [{"name": v} for v in reg.vhosts() if keep(v)],
        "permissions": [permission(p) for p in reg.permissions() if keep(p.vhost)],
        "topic_permissions": [topic_permission(t) for t in reg.topic_permissions() if keep(t.vhost)],
        "parameters": [{"value": vhost_limits(v, limits)["value"], "vhost": v, "component": "vhost-limits",
                        "name": "limits"} for v, limits in reg.vhost_limits().items() if keep(v)],
        "global_parameters": [],
        "policies": [policy(p) for p in reg.policies(operator=False) if keep(p.vhost)],
        "queues": [{"name": q.name, "vhost": q.vhost, "durable": True, "auto_delete": q.auto_delete,
                    "arguments": printable(q.arguments)} for q in reg.queues()
                   if (q.vhost, q.name) in durable_q and keep(q.vhost)],
        "exchanges": [{"name": x.name, "vhost": x.vhost, "type": x.type, "durable": True,
                       "auto_delete": x.auto_delete, "internal": x.internal, "arguments": printable(x.arguments)}
                      for x in reg.exchanges() if x.durable and x.name and not x.name.startswith("amq.")
                      and keep(x.vhost)],
        "bindings": [{"source": b.source, "vhost": b.vhost, "destination": b.destination,
                      "destination_type": b.destination_kind, "routing_key": b.routing_key,
                      "arguments": printable(b.arguments)} for b in reg.bindings()
                     if keep(b.vhost) and (b.vhost, b.source) in durable_x
                     and (b.vhost, b.destination) in (durable_q if b.destination_kind == "queue" else durable_x)],
    }
    if vhosts is not None:  # a vhost's export has no users or vhosts, as RabbitMQ's
        for key in ("users", "vhosts", "permissions", "topic_permissions", "global_parameters", "product_name",
                    "product_version", "rabbitmq_version"):
            out.pop(key)
    return out
