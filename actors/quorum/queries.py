"""The shells' reads of a quorum queue's state (actors/quorum/machine.py): they change nothing.

Theory of operation: the member, its front and management read the applied state between
entries: how to requeue deliveries (`requeue_plan`), what a consumer holds (`checked_out`), the
counts (`stats`) and the consumers (`consumer_list`). Every member answers alike from the same
state; none of these is part of applying an entry.
"""
from __future__ import annotations

from typing import Any

from actors.quorum.effects import Delivered
from actors.quorum.machine import holders
from actors.quorum.state import QueueState


def requeue_plan(state: QueueState, channel: str, tag: str,
                 msg_ids: tuple[int, ...]) -> tuple[tuple[int, int], ...] | None:
    """How to requeue these deliveries: None means propose `Return` (a delivery limit is set:
    back near the head); otherwise (msg_id, raft index) of those still unacked, for the shell to
    read and propose as `Requeue`s (unlimited: to the back). An empty `tag` means any consumer
    of `channel` (as in `Settle`)."""
    if state.config.settings.delivery_limit is not None:
        return None
    index = {i: con.checked[i][0] for _key, con, ids in holders(state, channel, tag, msg_ids)
             for i in ids if i in con.checked}
    return tuple((i, index[i]) for i in msg_ids if i in index)


def checked_out(state: QueueState, channel: str, tag: str) -> tuple[Delivered, ...]:
    """A consumer's unacked deliveries, (msg_id, index, delivery count) by msg_id: what a channel
    that missed a Deliver (Deliver.delivered_before) re-reads."""
    con = state.consumers.get((channel, tag))
    if con is None:
        return ()
    return tuple((i, e[0], e[3]) for i, e in sorted(con.checked.items()))


def stats(state: QueueState) -> dict[str, int]:
    """Counts for list_queues and management; `messages` counts held dead-letters too."""
    ready, dlx = state.ready, state.dlx
    return {
        "messages_ready": len(ready),
        "messages_unacknowledged": state.unacked,
        "messages_dead_lettered": len(dlx),
        "messages": len(ready) + state.unacked + len(dlx),
        "message_bytes_ready": ready.bytes,
        "message_bytes_unacknowledged": state.unacked_bytes,
        "message_bytes_dead_lettered": dlx.bytes,
        "consumers": sum(1 for con in state.consumers.values() if not con.once) + len(state.waiting),
        "publishers": len(state.enqueuers),
        # what the publishers the state still knows enqueued (their next sequence numbers less one)
        "published": sum(state.enqueuers.values()) - len(state.enqueuers),
    }


def consumer_list(state: QueueState) -> list[dict[str, Any]]:
    """One row per consumer (basic.get's one-message consumers and cancelled ones left out), with
    RabbitMQ's activity status: up (competing), single_active or waiting."""
    single = state.config.single_active
    rows = []
    for key, con, active in ([(k, v, True) for k, v in state.consumers.items()]
                             + [(k, v, False) for k, v in state.waiting]):
        if con.once:
            continue
        rows.append({"channel": key[0], "tag": key[1], "active": active,
                     "activity_status": ("single_active" if active else "waiting") if single else "up",
                     "ack_required": con.ack, "prefetch": con.prefetch, "priority": con.priority,
                     "exclusive": con.exclusive, "unacked": len(con.checked)})
    return rows
