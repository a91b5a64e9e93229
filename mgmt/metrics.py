"""The Prometheus metrics: rabbitmq_prometheus's families, from a sample.

Theory of operation: a scrape reads the latest sample (never asks the hosts itself), so scraping
costs the broker nothing beyond the sampling it already does. `families(view, per_object)` returns
plain tuples (name, type, help, samples); the shell turns them into prometheus_client metric
families. Names, types and labels are rabbitmq_prometheus 3.10's: by default every family is one
aggregated value (`/metrics`); with `per_object` (`/metrics/per-object`) queue families carry
`vhost` and `queue` labels and channel families a `channel` label (warren's channel name where
RabbitMQ puts an Erlang pid). Counter names end in `_total` here; the shell lets the client
library write them.

Global counters come from the channels (retired ones included), so they never go back while the
node runs; queue depths from the queues; the login attempts (`rabbitmq_auth_attempts_*`,
rabbit_core_metrics': a refused login is failed, a refusal at connection.open is not) from the
connection hosts (`amqp091`) and from this node's HTTP API (`http`, each request with credentials). `rabbitmq_identity_info` names the node and cluster as the
Grafana dashboards expect.

Raft families: this node's quorum queue members (as RabbitMQ, whose nodes each show their own
ra servers). The six families of rabbitmq_prometheus 3.10 to 4.1 (`rabbitmq_raft_term_total`,
`rabbitmq_raft_log_*_index`, `rabbitmq_raft_entry_commit_latency_seconds`) per member with `vhost`
and `queue` labels, or aggregated as RabbitMQ does: sums, and the members' mean commit latency.
From RabbitMQ 4.2's ra counters: `rabbitmq_raft_num_segments` per member and its maximum
(`rabbitmq_raft_max_num_segments`, with `rabbitmq_raft_max_commit_latency_seconds`) aggregated,
and the WAL's and the segment writer's counters on both endpoints (`rabbitmq_raft_wal_files`,
`rabbitmq_raft_bytes_written`, `rabbitmq_raft_mem_tables`, `rabbitmq_raft_entries`,
`rabbitmq_raft_segments`, labelled `module` ra_log_wal or ra_log_segment_writer). Those are
counters whose names lack `_total`; prometheus_client would append it to a counter, so they are
written untyped, under RabbitMQ's exact names.

Left out: Erlang VM families, file-descriptor and socket counts, IO and message-store operation
counters, RabbitMQ 4.2's renamed per-member Raft families (`rabbitmq_raft_term`,
`rabbitmq_raft_commit_index` ...: the same values as the 3.10 names above).
"""
from __future__ import annotations

from typing import Any, Callable

from mgmt.shapes import View

Family = tuple[str, str, str, list[tuple[dict[str, str], float]]]
GAUGE, COUNTER, UNTYPED = "gauge", "counter", "untyped"
AMQP = {"protocol": "amqp091"}
HTTP = {"protocol": "http"}
CLASSIC = {"protocol": "amqp091", "queue_type": "rabbit_classic_queue"}

# (family, help, the channel counter it sums, labels)
_GLOBAL = [
    ("rabbitmq_global_messages_received_total", "Total number of messages received from publishers", "publish", AMQP),
    ("rabbitmq_global_messages_confirmed_total", "Total number of messages confirmed to publishers", "confirm", AMQP),
    ("rabbitmq_global_messages_delivered_total", "Total number of messages delivered to consumers", "deliver_get",
     CLASSIC),
    ("rabbitmq_global_messages_delivered_consume_manual_ack_total",
     "Total number of messages delivered to consumers using basic.consume with manual acknowledgment", "deliver",
     CLASSIC),
    ("rabbitmq_global_messages_delivered_consume_auto_ack_total",
     "Total number of messages delivered to consumers using basic.consume with automatic acknowledgment",
     "deliver_no_ack", CLASSIC),
    ("rabbitmq_global_messages_delivered_get_manual_ack_total",
     "Total number of messages delivered to consumers using basic.get with manual acknowledgment", "get", CLASSIC),
    ("rabbitmq_global_messages_delivered_get_auto_ack_total",
     "Total number of messages delivered to consumers using basic.get with automatic acknowledgment", "get_no_ack",
     CLASSIC),
    ("rabbitmq_global_messages_get_empty_total", "Total number of times basic.get operations fetched no message",
     "get_empty", CLASSIC),
    ("rabbitmq_global_messages_redelivered_total", "Total number of messages redelivered to consumers", "redeliver",
     CLASSIC),
    ("rabbitmq_global_messages_acknowledged_total", "Total number of messages acknowledged by consumers", "ack",
     CLASSIC),
    ("rabbitmq_global_messages_unroutable_returned_total",
     "Total number of messages published as mandatory into an exchange and returned to the publisher as unroutable",
     "return_unroutable", AMQP),
    ("rabbitmq_global_messages_unroutable_dropped_total",
     "Total number of messages published as non-mandatory into an exchange and dropped as unroutable",
     "drop_unroutable", AMQP),
]

_QUEUE = [  # (family, help, the queue's field)
    ("rabbitmq_queue_messages_ready", "Messages ready to be delivered to consumers", "messages_ready"),
    ("rabbitmq_queue_messages_unacked", "Messages delivered to consumers but not yet acknowledged",
     "messages_unacknowledged"),
    ("rabbitmq_queue_messages", "Sum of ready and unacknowledged messages - total queue depth", "messages"),
    ("rabbitmq_queue_consumers", "Consumers on a queue", "consumers"),
    ("rabbitmq_queue_process_memory_bytes", "Memory in bytes used by the Erlang queue process", "memory"),
    ("rabbitmq_queue_messages_ram", "Ready and unacknowledged messages stored in memory", "messages_ram"),
    ("rabbitmq_queue_messages_paged_out", "Messages paged out to disk", "messages_paged_out"),
    ("rabbitmq_queue_messages_persistent", "Persistent messages", "messages_persistent"),
]


def _stat(counter: str) -> Callable[[dict[str, Any]], float]:
    """A channel row's message_stats counter (0 until the channel first counts it)."""
    return lambda c: c["message_stats"].get(counter, 0)


_CHANNEL = [  # (family, type, help, value of a channel row)
    ("rabbitmq_channel_consumers", GAUGE, "Consumers on a channel", lambda c: c["consumer_count"]),
    ("rabbitmq_channel_messages_unacked", GAUGE, "Delivered but not yet acknowledged messages",
     lambda c: c["messages_unacknowledged"]),
    ("rabbitmq_channel_messages_unconfirmed", GAUGE, "Published but not yet confirmed messages",
     lambda c: c.get("messages_unconfirmed", 0)),
    ("rabbitmq_channel_prefetch", GAUGE, "Total limit of unacknowledged messages for all consumers on a channel",
     lambda c: c.get("global_prefetch_count", 0)),
    ("rabbitmq_channel_messages_published_total", COUNTER, "Total number of messages published into an exchange "
     "on a channel", _stat("publish")),
    ("rabbitmq_channel_messages_confirmed_total", COUNTER, "Total number of messages published into an exchange "
     "and confirmed on the channel", _stat("confirm")),
    ("rabbitmq_channel_messages_delivered_ack_total", COUNTER, "Total number of messages delivered to consumers in "
     "manual acknowledgement mode", _stat("deliver")),
    ("rabbitmq_channel_messages_delivered_total", COUNTER, "Total number of messages delivered to consumers in "
     "automatic acknowledgement mode", _stat("deliver_no_ack")),
    ("rabbitmq_channel_messages_acked_total", COUNTER, "Total number of messages acknowledged by consumers",
     _stat("ack")),
    ("rabbitmq_channel_messages_redelivered_total", COUNTER, "Total number of messages redelivered to consumers",
     _stat("redeliver")),
    ("rabbitmq_channel_get_ack_total", COUNTER, "Total number of messages fetched with basic.get in manual "
     "acknowledgement mode", _stat("get")),
    ("rabbitmq_channel_get_total", COUNTER, "Total number of messages fetched with basic.get in automatic "
     "acknowledgement mode", _stat("get_no_ack")),
    ("rabbitmq_channel_get_empty_total", COUNTER, "Total number of times basic.get operations fetched no message",
     _stat("get_empty")),
    ("rabbitmq_channel_messages_unroutable_returned_total", COUNTER, "Total number of messages published as "
     "mandatory into an exchange and returned to the publisher as unroutable",
     _stat("return_unroutable")),
    ("rabbitmq_channel_messages_unroutable_dropped_total", COUNTER, "Total number of messages published as "
     "non-mandatory into an exchange and dropped as unroutable",
     _stat("drop_unroutable")),
]

_RAFT = [  # rabbitmq_prometheus 3.10 to 4.1 (ra_metrics): (family, type, help, a member row's field)
    ("rabbitmq_raft_term_total", COUNTER, "Current Raft term number", "term"),
    ("rabbitmq_raft_log_snapshot_index", GAUGE, "Raft log snapshot index", "snapshot_index"),
    ("rabbitmq_raft_log_last_applied_index", GAUGE, "Raft log last applied index", "last_applied"),
    ("rabbitmq_raft_log_commit_index", GAUGE, "Raft log commit index", "commit_index"),
    ("rabbitmq_raft_log_last_written_index", GAUGE, "Raft log last written index", "last_written_index"),
]
_COMMIT_LATENCY = ("rabbitmq_raft_entry_commit_latency_seconds", "Time taken for a log entry to be committed")
QUORUM_SYSTEM = {"ra_system": "quorum_queues"}
_WAL = {"ra_system": "quorum_queues", "module": "ra_log_wal"}
_SEGMENT_WRITER = {"ra_system": "quorum_queues", "module": "ra_log_segment_writer"}
# ra's WAL and segment writer counters: (family, help, [(labels, the WAL counter)])
_WAL_COUNTERS = [
    ("rabbitmq_raft_wal_files", "Number of write-ahead log files created", [(_WAL, "wal_files")]),
    ("rabbitmq_raft_bytes_written", "Number of bytes written",
     [(_WAL, "bytes_written"), (_SEGMENT_WRITER, "segment_bytes")]),
    ("rabbitmq_raft_mem_tables", "Number of in-memory tables handled", [(_SEGMENT_WRITER, "mem_tables")]),
    ("rabbitmq_raft_entries", "Number of entries written", [(_SEGMENT_WRITER, "segment_entries")]),
    ("rabbitmq_raft_segments", "Number of segments written", [(_SEGMENT_WRITER, "segments")]),
]


def raft(members: list[dict[str, Any]], wal: dict[str, int], per_object: bool) -> list[Family]:
    """The Raft and WAL families of this node's quorum queue members and WAL."""
    out: list[Family] = []
    rows = sorted(members, key=lambda r: (r["vhost"], r["queue"]))
    latencies = [r["commit_latency_ms"] / 1000 for r in rows]
    for name, kind, help_, key in _RAFT:
        out.append((name, kind, help_, [({"vhost": r["vhost"], "queue": r["queue"]}, r[key]) for r in rows]
                    if per_object else [({}, sum(r[key] for r in rows))]))
    name, help_ = _COMMIT_LATENCY
    out.append((name, GAUGE, help_, [({"vhost": r["vhost"], "queue": r["queue"]}, s) for r, s in zip(rows, latencies)]
                if per_object else [({}, sum(latencies) / len(latencies) if latencies else 0)]))
    if per_object:
        out.append(("rabbitmq_raft_num_segments", GAUGE, "The number of non-empty segment files.",
                    [({"vhost": r["vhost"], "queue": r["queue"]}, r["segments"]) for r in rows]))
    elif rows:  # RabbitMQ 4.2 leaves them out without quorum queues
        out.append(("rabbitmq_raft_max_num_segments", GAUGE, "The number of non-empty segment files.",
                    [(QUORUM_SYSTEM, max(r["segments"] for r in rows))]))
        out.append(("rabbitmq_raft_max_commit_latency_seconds", GAUGE, "Approximate time taken from an entry "
                    "being written to the log until it is committed.", [(QUORUM_SYSTEM, max(latencies))]))
    if wal:
        out += [(name, UNTYPED, help_, [(labels, wal.get(key, 0)) for labels, key in counters])
                for name, help_, counters in _WAL_COUNTERS]
    return out


def families(view: View, per_object: bool) -> list[Family]:
    s, reg, f = view.sample, view.registry, view.facts
    t = s.totals
    out: list[Family] = [
        ("rabbitmq_identity_info", GAUGE, "RabbitMQ node & cluster identity info",
         [({"rabbitmq_node": view.node, "rabbitmq_cluster": view.node,
            "rabbitmq_cluster_permanent_id": f"warren-{view.node}"}, 1)]),
        ("rabbitmq_build_info", GAUGE, "RabbitMQ & Erlang/OTP version info",
         [({"rabbitmq_version": view.product_version, "prometheus_plugin_version": view.product_version,
            "prometheus_client_version": "", "erlang_version": ""}, 1)]),
        ("rabbitmq_connections", GAUGE, "Connections currently open", [({}, len(s.connections))]),
        ("rabbitmq_channels", GAUGE, "Channels currently open", [({}, len(s.channels))]),
        ("rabbitmq_consumers", GAUGE, "Consumers currently connected", [({}, len(s.consumers))]),
        ("rabbitmq_queues", GAUGE, "Queues available", [({}, len(reg.queues()))]),
        ("rabbitmq_connections_opened_total", COUNTER, "Total number of connections opened",
         [({}, t.get("connections_opened", 0))]),
        ("rabbitmq_connections_closed_total", COUNTER, "Total number of connections closed or terminated",
         [({}, t.get("connections_opened", 0) - t.get("connections", 0))]),
        ("rabbitmq_channels_opened_total", COUNTER, "Total number of channels opened",
         [({}, t.get("channels_opened", 0))]),
        ("rabbitmq_channels_closed_total", COUNTER, "Total number of channels closed",
         [({}, t.get("channels_opened", 0) - t.get("channels", 0))]),
    ]
    http = f.get("http_logins", {})
    counts = [(HTTP, http.get("succeeded", 0), http.get("failed", 0)),
              (AMQP, t.get("auth_attempts_succeeded", 0), t.get("auth_attempts_failed", 0))]
    out += [("rabbitmq_auth_attempts_total", COUNTER, "Total number of authorization attempts",
             [(labels, ok + failed) for labels, ok, failed in counts]),
            ("rabbitmq_auth_attempts_succeeded_total", COUNTER, "Total number of successful authentication attempts",
             [(labels, ok) for labels, ok, _ in counts]),
            ("rabbitmq_auth_attempts_failed_total", COUNTER, "Total number of failed authentication attempts",
             [(labels, failed) for labels, _, failed in counts])]
    if not per_object:  # rabbitmq_prometheus leaves the alarms out of the per-object endpoint
        out += alarms(f)
    out += [
        ("rabbitmq_process_resident_memory_bytes", GAUGE, "Memory used in bytes", [({}, f.get("mem_used", 0))]),
        ("rabbitmq_resident_memory_limit_bytes", GAUGE, "Memory high watermark in bytes",
         [({}, f.get("mem_limit", 0))]),
        ("rabbitmq_disk_space_available_bytes", GAUGE, "Disk space available in bytes",
         [({}, f.get("disk_free", 0))]),
        ("rabbitmq_disk_space_available_limit_bytes", GAUGE, "Free disk space low watermark in bytes",
         [({}, f.get("disk_free_limit", 0))]),
    ]
    out += [(name, COUNTER, help_, [(labels, t.get(counter, 0))]) for name, help_, counter, labels in _GLOBAL]
    queues = sorted(s.queues.items())
    rows = [row for _, row in queues]
    labels = [{"vhost": v, "queue": q} for (v, q), _ in queues] if per_object else []  # shared by the families
    for name, help_, key in _QUEUE:
        values = [row.get(key, 0) for row in rows]
        out.append((name, GAUGE, help_, list(zip(labels, values)) if per_object else [({}, sum(values))]))
    published = [row.get("message_stats", {}).get("publish", 0) for row in rows]
    out.append(("rabbitmq_queue_messages_published_total", COUNTER, "Total number of messages published to queues",
                list(zip(labels, published)) if per_object else [({}, sum(published))]))
    for name, kind, help_, value in _CHANNEL:
        if per_object:
            samples = [({"channel": c["name"]}, value(c)) for c in s.channels]
        else:
            samples = [({}, sum(value(c) for c in s.channels))]
        out.append((name, kind, help_, samples))
    out.append(("rabbitmq_connection_channels", GAUGE, "Channels on a connection",
                [({"channel": c["name"]}, c["channels"]) for c in s.connections] if per_object
                else [({}, sum(c["channels"] for c in s.connections))]))
    out += raft(s.raft, s.wal, per_object)
    return out

def alarms(f: dict[str, Any]) -> list[Family]:
    return [("rabbitmq_alarms_memory_used_watermark", GAUGE, "is 1 if VM memory watermark alarm is in effect",
             [({}, int(bool(f.get("mem_alarm"))))]),
            ("rabbitmq_alarms_free_disk_space_watermark", GAUGE,
             "is 1 if free disk space watermark alarm is in effect", [({}, int(bool(f.get("disk_free_alarm"))))]),
            ("rabbitmq_alarms_file_descriptor_limit", GAUGE, "is 1 if file descriptor limit alarm is in effect",
             [({}, 0)])]


def prometheus_name(name: str, kind: str) -> str:
    """The name to give prometheus_client, which appends `_total` to counters itself."""
    return name[:-len("_total")] if kind == COUNTER and name.endswith("_total") else name
