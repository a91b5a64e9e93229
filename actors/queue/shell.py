"""The classic queue actor: a thin shell that feeds mailbox messages to `ClassicQueue` and sends
what its effects say. Message kinds (from channels unless noted):

publish (batch) | consume (rid, tag, ack_required, credit, exclusive, args) | cancel (rid, tag) |
grant ((tag, n), ...) | settle (acked, requeued, discarded) | get (rid, ack_required) |
channel_down () | purge (rid,) | stats (rid,), delete (rid, if_unused, if_empty) and
policy (settings dict, policy key names) from the node.

Replies use actors/replies.py. A reply to a call is sent before the deliveries that call caused, so
the channel has answered consume-ok before the first basic.deliver. The shell owns the clock (wall
clock ms, as RabbitMQ stamps expiry and x-death) and the timers the core asks for (asyncio
call_later; one per name, a new StartTimer replaces the old). Dead-lettered messages leave as plain
`publish` sends to the target queue actors, without credit or confirms (at-most-once).

Where the ready messages live (storage.py hands the pieces out, recovered): a durable queue in a
`DurableBacking` behind `backed.BackedReady`; a durable priority queue in one such backing per
level, behind `priority.PriorityReady`; a non-durable queue in a `spill.SpillReady` (one per level
for a priority queue), which pages through a non-durable backing only when lazy mode or a RAM target
asks. Without a data dir everything stays in RAM. The actor sees a queue's backings as one `Backing`
(flush, lazy mode, stats). ORDERING RULE for durable queues: their `confirm`s are held, and leave only from `flush()`, which the host's group commit calls after the
fdatasync that covers everything this queue wrote in the loop turn (see storage.py). A queue that
touched its backing in a turn marks itself for that commit; nothing here ever syncs per message.
A non-durable queue's confirms leave at once: nothing of it is ever synced.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, Protocol, Sequence

import structlog

from actors.effects import CancelTimer, Send, StartTimer
from actors.placement import NODE, queue_address
from persist.classic.backed import BackedReady
from actors.queue.core import ClassicQueue
from actors.queue.effects import AutoDelete, Confirmed, ConsumerCancelled, Deliver, Rejected
from actors.queue.priority import PriorityReady
from actors.queue.settings import QueueSettings
from persist.classic.spill import SpillReady
from persist.classic.host_storage import HostStorage
from actors.replies import err, ok
from actors.runtime.address import Address
from persist.classic.durable_queue import BackingStats, DurableBacking
from wire.errors import AmqpError

log = structlog.get_logger("warren.queue")

INDEX_ENTRY_RAM_BYTES = 200  # rough cost of one message's index entry kept in RAM, for `memory`


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Backing(Protocol):
    """What the shell does with a queue's storage (a `DurableBacking`, or `Levels` of them)."""
    durable: bool

    def flush(self) -> Any: ...

    def set_lazy(self, lazy: bool) -> None: ...

    def stats(self) -> BackingStats: ...


class Levels:
    """Several backings (priority levels) or `SpillReady`s (non-durable) seen as one `Backing`."""

    def __init__(self, parts: Sequence[DurableBacking | SpillReady], durable: bool) -> None:
        self.parts = list(parts)
        self.durable = durable

    def flush(self) -> None:
        assert self.durable, "non-durable queues are never part of the group commit"
        for part in self.parts:
            part.flush()  # type: ignore[union-attr]

    def set_lazy(self, lazy: bool) -> None:
        for part in self.parts:
            part.set_lazy(lazy)

    def stats(self) -> BackingStats:
        s = [part.stats() for part in self.parts]
        return BackingStats(sum(b.ready for b in s), sum(b.unacked for b in s), sum(b.ram_messages for b in s),
                            sum(b.ram_bytes for b in s), sum(b.ram_index_entries for b in s),
                            sum(b.disk_only_messages for b in s), any(b.lazy for b in s),
                            sum(b.persistent for b in s))


class QueueActor:
    def __init__(self, runtime: Any, core: ClassicQueue, on_deleted: Callable[[str], None],
                 storage: HostStorage | None = None, backing: Backing | None = None) -> None:
        self.runtime = runtime
        self.core = core
        self.name = f"q:{core.vhost}:{core.name}"
        self.address = Address(runtime.host, self.name)
        self._on_deleted = on_deleted
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._deleted = False
        self._storage = storage
        self.backing = backing
        self._durable = backing is not None and backing.durable  # confirms wait for the group commit
        self._lazy = core.settings.lazy
        self._held: dict[Address, int] = {}  # channel -> highest confirm seq waiting for the flush

    def flush(self) -> None:
        """The group commit reached this queue: make its writes durable, THEN confirm them."""
        assert self.backing is not None and self._durable
        self.backing.flush()
        held, self._held = self._held, {}
        for channel, upto in held.items():
            self._send(channel, "confirm", upto)

    def _send(self, to: Address, kind: str, body: Any) -> None:
        self.runtime.send(to, kind, body, sender=self.address)

    def _effects(self, effects: list) -> None:
        for e in effects:
            if isinstance(e, Deliver):
                self._send(e.channel, "deliver", (e.consumer_tag, e.messages))
            elif isinstance(e, Confirmed):
                if not self._durable:
                    self._send(e.channel, "confirm", e.upto)
                elif e.upto > self._held.get(e.channel, 0):
                    self._held[e.channel] = e.upto
            elif isinstance(e, Send):
                self._send(e.to, e.kind, e.body)
            elif isinstance(e, Rejected):
                self._send(e.channel, "rejected", e.seqs)
            elif isinstance(e, ConsumerCancelled):
                self._send(e.channel, "cancelled", e.consumer_tag)
            elif isinstance(e, AutoDelete):
                self._send(NODE, "autodelete", (self.core.vhost, self.core.name))
            elif isinstance(e, StartTimer):
                self._cancel_timer(e.name)
                self._timers[e.name] = asyncio.get_running_loop().call_later(
                    max(e.ticks, 0) / 1000, self._fire, e.name)
            elif isinstance(e, CancelTimer):
                self._cancel_timer(e.name)

    def _cancel_timer(self, name: str) -> None:
        handle = self._timers.pop(name, None)
        if handle is not None:
            handle.cancel()

    def _fire(self, name: str) -> None:
        self._timers.pop(name, None)
        if not self._deleted:
            self._effects(self.core.on_timer(name, now_ms=now_ms()))
            self._touched()

    def _touched(self) -> None:
        if self._durable and self._storage is not None and not self._deleted:
            self._storage.mark(self)

    def start(self) -> None:
        self._effects(self.core.start(now_ms=now_ms()))

    def receive(self, sender: Address, kind: str, body: Any) -> None:
        self._receive(sender, kind, body)
        if self._durable:
            self._touched()

    def stats(self) -> dict[str, Any]:
        """The core's counters plus where the messages are (RabbitMQ's names)."""
        s = self.core.stats()
        unacked = s["messages_unacknowledged"]
        if self.backing is None:
            return {**s, "durable_storage": False, "messages_ram": s["messages"], "messages_ready_ram":
                    s["messages_ready"], "messages_persistent": 0, "messages_paged_out": 0,
                    "message_bytes_ram": s["memory"]}
        b = self.backing.stats()
        return {**s, "durable_storage": self._durable, "messages_ram": b.ram_messages + unacked,
                "messages_ready_ram": b.ram_messages, "messages_persistent": b.persistent,
                "messages_paged_out": b.disk_only_messages, "message_bytes_ram": s["memory"],
                "memory": s["memory"] + b.ram_index_entries * INDEX_ENTRY_RAM_BYTES, "lazy": b.lazy}

    def _receive(self, sender: Address, kind: str, body: Any) -> None:
        core = self.core
        now = now_ms()
        if kind == "publish":
            self._effects(core.publish(sender, body, now_ms=now))
        elif kind == "settle":
            acked, requeued, discarded = body
            self._effects(core.settle(sender, acked=acked, requeued=requeued, discarded=discarded, now_ms=now))
        elif kind == "grant":
            for tag, n in body:
                self._effects(core.grant(sender, tag, n, now_ms=now))
        elif kind == "consume":
            rid, tag, ack_required, credit, exclusive, args = body
            res = core.consume(sender, tag, ack_required=ack_required, credit=credit, exclusive=exclusive,
                               arguments=args, now_ms=now)
            if isinstance(res, AmqpError):
                self._send(sender, "reply", (rid, err(res)))
                return
            self._send(sender, "reply", (rid, ok()))
            self._effects(res)
        elif kind == "cancel":
            rid, tag = body
            effects = core.cancel(sender, tag, now_ms=now)
            self._send(sender, "reply", (rid, ok()))
            self._effects(effects)
        elif kind == "get":
            rid, ack_required = body
            message, remaining, effects = core.get(sender, ack_required=ack_required, now_ms=now)
            self._send(sender, "reply", (rid, ok((message, remaining))))
            self._effects(effects)
        elif kind == "channel_down":
            self._effects(core.channel_down(sender, now_ms=now))
        elif kind == "purge":
            self._send(sender, "reply", (body[0], ok(core.purge())))
        elif kind == "stats":
            effects = core.touch(now_ms=now)  # the node asks on every redeclare: a use, for x-expires
            self._send(sender, "reply", (body[0], ok((core.message_count, core.consumer_count))))
            self._effects(effects)
        elif kind == "policy":
            self._effects(core.apply_policy(body, now_ms=now))
            if self.backing is not None and core.settings.lazy != self._lazy:
                self._lazy = core.settings.lazy
                self.backing.set_lazy(self._lazy)
        elif kind == "delete":
            rid, if_unused, if_empty = body
            res = core.delete(if_unused=if_unused, if_empty=if_empty)
            if isinstance(res, AmqpError):
                self._send(sender, "reply", (rid, err(res)))
                return
            count, effects = res
            self._effects(effects)
            if self._storage is not None and self.backing is not None:
                if self._durable:
                    self.flush()  # what was confirmable is confirmed; the messages go with the queue
                    self._storage.forget(self)
                self._storage.delete_queue(core.vhost, core.name)
            self._send(sender, "reply", (rid, ok(count)))
            self._deleted = True
            for name in list(self._timers):
                self._cancel_timer(name)
            self._on_deleted(self.name)
        else:
            log.warning("queue.unknown_kind", queue=self.name, kind=kind)


class QueueManager:
    """Creates queue actors on this host when the node asks (create (rid, vhost, name, auto_delete, args)).

    `registry` is this host's replica (actors/queue/replica.py), used to route dead-lettered
    messages; without one, dead-lettered messages are dropped.
    """

    def __init__(self, runtime: Any, name: str, registry: Any = None, queue_hosts: int = 1,
                 storage: HostStorage | None = None, registry_ready: Callable[[], bool] = lambda: True) -> None:
        self.runtime = runtime
        self.registry_ready = registry_ready
        self.address = Address(runtime.host, name)
        self.registry = registry
        self.queue_hosts = queue_hosts
        self.storage = storage
        self.queues: dict[str, QueueActor] = {}

    def _deleted(self, name: str) -> None:
        self.queues.pop(name, None)
        self.runtime.remove(name)

    def _place(self, vhost: str, name: str) -> Address:
        return queue_address(vhost, name, self.queue_hosts)

    def receive(self, sender: Address, kind: str, body: Any) -> None:
        if kind != "create":
            log.warning("qmgr.unknown_kind", kind=kind)
            return
        rid, vhost, name, auto_delete, arguments, durable = body
        if f"q:{vhost}:{name}" not in self.queues:
            actor = self._create(vhost, name, auto_delete, dict(arguments), durable)
            self.queues[actor.name] = actor
            self.runtime.spawn(actor.name, actor)
            actor.start()
        self.runtime.send(sender, "reply", (rid, ok()), sender=self.address)

    def _create(self, vhost: str, name: str, auto_delete: bool, arguments: dict, durable: bool) -> QueueActor:
        storage = self.storage
        if storage is not None:
            self.ensure_recovered()
        if storage is None or not storage.recovered:
            assert storage is None or not durable, "a durable queue created before the registry snapshot arrived"
            if storage is not None:
                log.warning("queue.in_ram_only", vhost=vhost, queue=name, reason="storage not recovered yet")
            core = ClassicQueue(vhost, name, auto_delete=auto_delete, arguments=arguments,
                                router=self.registry, place=self._place, now_ms=now_ms())
            return QueueActor(self.runtime, core, self._deleted)
        max_priority = arguments.get("x-max-priority")
        if not (isinstance(max_priority, int) and max_priority > 0):
            max_priority = None
        lazy = QueueSettings.from_arguments(arguments).lazy
        ready: Any
        backing: Backing
        next_id = 1
        if not durable:
            spills = storage.open_transient_queue(vhost, name, lazy=lazy, max_priority=max_priority)
            ready = spills[0] if max_priority is None else PriorityReady(max_priority, spills)
            backing = Levels(spills, durable=False)
        elif max_priority is None:
            backing, next_id = storage.open_queue(vhost, name, lazy=lazy)
            ready = BackedReady(backing)
        else:
            levels, next_id = storage.open_priority_queue(vhost, name, max_priority, lazy=lazy)
            ready = PriorityReady(max_priority, [BackedReady(b) for b in levels])
            backing = Levels(levels, durable=True)
        core = ClassicQueue(vhost, name, auto_delete=auto_delete, arguments=arguments, router=self.registry,
                            place=self._place, now_ms=now_ms(), ready=ready, next_id=next_id)
        return QueueActor(self.runtime, core, self._deleted, storage, backing)

    def ensure_recovered(self) -> None:
        """Recover this host's storage once the registry snapshot is here (it names the durable
        queues to keep; the rest of this host's queue directories are deleted). The node sends that
        snapshot on the same pipe before it creates any queue here."""
        storage = self.storage
        if storage is None or storage.recovered or self.registry is None or not self.registry_ready():
            return
        host = self.runtime.host
        storage.recover([(q.vhost, q.name) for q in self.registry.queues()
                         if q.durable and self._place(q.vhost, q.name).host == host])

    def stats(self) -> list[dict]:
        return [a.stats() for a in self.queues.values()]
