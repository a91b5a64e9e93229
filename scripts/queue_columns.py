"""`warrenctl list_queues` columns: every one RabbitMQ 3.10's `rabbitmqctl list_queues` accepts, and
warren's own.

A row is the queue's registry record (name, vhost, durable, arguments, policies, type, owner) from
the node host, merged with its counters from the queue host that runs it (messages, bytes,
consumers, memory, where its messages are); a quorum queue's counters come from the member that
leads it (its quorum host's report names the leader's node), its `members` from its record and
`online` are those of its members on running nodes. A queue whose host (or leader) does not answer
for it is "down" with zero counts (a classic queue has no leader, members or online: empty).

Columns RabbitMQ has that warren cannot fill yet print empty, as RabbitMQ prints a column that does
not apply: consumer_capacity and consumer_utilisation (no measure of how often a consumer was
ready), disk_reads and disk_writes (the stores do not count them per queue),
head_message_timestamp, message_bytes_persistent; slave_pids and synchronised_slave_pids are empty
in RabbitMQ too for a queue that is not mirrored.
"""
from __future__ import annotations

from typing import Any, Callable

RABBITMQ_COLUMNS = (
    "arguments", "auto_delete", "consumer_capacity", "consumer_utilisation", "consumers", "disk_reads",
    "disk_writes", "durable", "exclusive", "exclusive_consumer_pid", "exclusive_consumer_tag",
    "head_message_timestamp", "leader", "members", "memory", "message_bytes", "message_bytes_persistent",
    "message_bytes_ram", "message_bytes_ready", "message_bytes_unacknowledged", "messages",
    "messages_persistent", "messages_ram", "messages_ready", "messages_ready_ram", "messages_unacknowledged",
    "messages_unacknowledged_ram", "name", "online", "owner_pid", "pid", "policy", "slave_pids", "state",
    "synchronised_slave_pids", "type")
WARREN_COLUMNS = ("vhost", "operator_policy", "effective_policy_definition", "messages_paged_out")
QUEUE_COLUMNS = RABBITMQ_COLUMNS + WARREN_COLUMNS
ZERO_COUNTS = ("messages", "messages_ready", "messages_unacknowledged", "consumers", "memory", "messages_ram",
               "messages_ready_ram", "messages_unacknowledged_ram", "messages_persistent", "messages_paged_out",
               "message_bytes", "message_bytes_ready", "message_bytes_unacknowledged", "message_bytes_ram")


def queue_rows(records: list[dict], stats: list[dict], running: Callable[[], list[str]] | None) -> list[dict]:
    """One row per queue record, with its counters; `running` (the running nodes) is asked only if
    a quorum queue's online members are wanted (None: they are not)."""
    by_queue = {(s.get("vhost", "/"), s["name"]): s for s in stats}
    up = set(running()) if running is not None and any(r.get("type") == "quorum" for r in records) else set()
    rows = []
    for record in records:
        s = by_queue.get((record["vhost"], record["name"]), {})
        row: dict[str, Any] = dict.fromkeys(ZERO_COUNTS, 0)
        row.update(s)
        row.update(record)
        row["state"] = s.get("state", "running") if s else "down"  # running / flow (flow/state.py)
        if record.get("type") == "quorum":
            row.update(leader=s.get("leader", ""), online=[n for n in record["members"] if n in up])
        rows.append(row)
    return rows
