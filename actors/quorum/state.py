"""The quorum queue machine's state, and its snapshot as a plain msgpack-able value.

Theory of operation: `QueueState` is everything a member derives from the log, and nothing else
(no clock, no channel connection, nothing the leader alone knows), so every member holds the same
state after the same entries. The machine updates it IN PLACE, as actors/raft's KvMachine does:
copying a million-message backlog per command is not affordable, and a Raft member keeps no old
states (the shell encodes a snapshot at once; `to_value` copies what it takes).

Invariants (checked by tests/quorum): every live Raft index is in exactly one place - a ready
column, `tracked` (the returns, the consumers' unacked, the dead-letter hold) - and `tracked` is
exactly the union of those three; `unacked`/`unacked_bytes` are the sums over the consumers'
`checked`; a consumer in `waiting` is not in `consumers`. Dict and list orders are part of the
state (they decide ties), so the snapshot keeps them and `from_value` rebuilds them in order.
"""
from __future__ import annotations

from dataclasses import astuple
from typing import Any

from actors.quorum.config import QueueConfig, QueueSettings
from actors.quorum.consumers import Consumer, Key, ServiceQueue
from actors.quorum.deadletter import DeadLetterHold
from actors.quorum.ready import ReadyQueue

SNAPSHOT_VERSION = 1


class QueueState:
    __slots__ = ("config", "now_ms", "tracked", "ready", "consumers", "service", "waiting",
                 "enqueuers", "dlx", "next_msg_id", "unacked", "unacked_bytes", "blocked",
                 "last_active", "msg_timer_at", "queue_timer_at", "delete_requested",
                 "last_message_index", "released_upto", "release_checked")

    def __init__(self, config: QueueConfig) -> None:
        self.config = config
        self.now_ms = config.created_ms  # the latest command time seen: time never goes back
        self.tracked: set[int] = set()
        self.ready = ReadyQueue(self.tracked)
        self.consumers: dict[Key, Consumer] = {}
        self.service = ServiceQueue()
        self.waiting: list[tuple[Key, Consumer]] = []  # single active consumer's queue
        self.enqueuers: dict[str, int] = {}  # publisher -> the next seq it may enqueue
        self.dlx = DeadLetterHold()
        self.next_msg_id = 0  # msg ids are unique over the queue's life, never reused
        self.unacked = 0
        self.unacked_bytes = 0
        self.blocked = False  # reject-publish: over the limit, until below 80% of it again
        self.last_active = config.created_ms  # x-expires: the last time the queue was used
        self.msg_timer_at: int | None = None  # the timers last asked for (effects.Timer)
        self.queue_timer_at: int | None = None
        self.delete_requested = False
        self.last_message_index = 0  # the Raft index of the newest Enqueue/Requeue applied
        self.released_upto = 0       # the last effects.Release given
        self.release_checked = 0     # the index the release cursor was last computed at

    def to_value(self) -> dict[str, Any]:
        config = self.config
        return {
            "version": SNAPSHOT_VERSION,
            "config": [config.name, config.vhost, config.single_active, config.created_ms,
                       list(astuple(config.settings))],
            "now_ms": self.now_ms,
            "ready": self.ready.to_value(),
            "consumers": [[list(k), c.to_value()] for k, c in self.consumers.items()],
            "service": self.service.to_value(),
            "waiting": [[list(k), c.to_value()] for k, c in self.waiting],
            "enqueuers": [[p, seq] for p, seq in self.enqueuers.items()],
            "dlx": self.dlx.to_value(),
            "next_msg_id": self.next_msg_id,
            "blocked": self.blocked,
            "last_active": self.last_active,
            "timers": [self.msg_timer_at, self.queue_timer_at],
            "delete_requested": self.delete_requested,
            "release": [self.last_message_index, self.released_upto, self.release_checked],
        }

    @classmethod
    def from_value(cls, value: dict[str, Any]) -> QueueState:
        if value["version"] != SNAPSHOT_VERSION:
            raise ValueError(f"unknown quorum queue snapshot version {value['version']}")
        name, vhost, single_active, created_ms, settings = value["config"]
        state = cls(QueueConfig(name, vhost, single_active, created_ms, QueueSettings(*settings)))
        state.now_ms = value["now_ms"]
        state.ready = ReadyQueue.from_value(value["ready"], state.tracked)
        state.consumers = {tuple(k): Consumer.from_value(c) for k, c in value["consumers"]}
        state.service = ServiceQueue.from_value(value["service"])
        state.waiting = [(tuple(k), Consumer.from_value(c)) for k, c in value["waiting"]]
        state.enqueuers = {p: seq for p, seq in value["enqueuers"]}
        state.dlx = DeadLetterHold.from_value(value["dlx"])
        state.next_msg_id = value["next_msg_id"]
        state.blocked = value["blocked"]
        state.last_active = value["last_active"]
        state.msg_timer_at, state.queue_timer_at = value["timers"]
        state.delete_requested = value["delete_requested"]
        state.last_message_index, state.released_upto, state.release_checked = value["release"]
        for con in state.consumers.values():
            state.unacked += len(con.checked)
            state.unacked_bytes += sum(entry[1] for entry in con.checked.values())
            state.tracked.update(entry[0] for entry in con.checked.values())
        state.tracked.update(state.dlx.indexes())
        return state
