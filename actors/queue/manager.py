"""QueueManager: the actor in each queue host that creates the classic queue actors placed there.

It builds each queue's core over the right ready list (in RAM; a durable backing, one per priority
level; or a non-durable spill list) from the host's storage, which it recovers once, when the
registry snapshot that names the durable queues has arrived. Its durable queues write to the
host's message-store actor (actors/store/shell.py), spawned here, which owns the group commit
(group_commit.py), whose syncs run on a worker thread (sync_thread.py) when the storage is on a
real disk. Every queue paces its publishers to what it delivers (flow/intake.py). A stream
(x-queue-type stream) gets a StreamActor instead (actors/stream/), over a log directory of its own
under `streams/<host kind>/`; at recovery the directories of streams no longer in the registry go.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from typing import Any, Callable

import structlog

from actors.messages.calls import Reply
from actors.messages.node import CreateQueue
from actors.stats.deltas import Changes
from actors.placement import kind_of, queue_address, stream_member_here
from actors.queue.core import ClassicQueue
from actors.queue.group_commit import GroupCommit
from actors.queue.priority import PriorityReady
from actors.queue.settings import QueueSettings
from actors.queue.shell import Backing, Levels, QueueActor, monotonic_ms, now_ms
from actors.queue.sync_thread import ThreadSyncs
from actors.runtime.address import Address
from actors.store.shell import NAME as STORE_NAME, MsgStoreActor
from actors.stream.shell import StreamActor, stream_core, stream_dir, stream_names
from flow.intake import IntakePace
from metadata import stream
from persist.classic.backed import BackedReady
from persist.classic.host_storage import HostStorage
from persist.disk import RealDisk

log = structlog.get_logger("warren.queue")


class QueueManager:
    """Creates queue actors on this host when the node asks (`CreateQueue`, answered with a Reply).

    `registry` is this host's registry replica (actors/replica.py), used to route dead-lettered
    messages; without one, dead-lettered messages are dropped.
    """

    def __init__(self, runtime: Any, name: str, registry: Any, node: Address | None = None,
                 storage: HostStorage | None = None, registry_ready: Callable[[], bool] = lambda: True) -> None:
        self.runtime = runtime
        self.registry_ready = registry_ready
        self.address = Address(runtime.host, name)
        self.registry = registry
        self.node = node
        self.storage = storage
        self.store: MsgStoreActor | None = None
        if storage is not None:
            disk = storage.disk
            commit = GroupCommit(schedule=lambda commit: asyncio.get_running_loop().call_soon(commit),
                                 later=lambda seconds, due: asyncio.get_running_loop().call_later(seconds, due),
                                 clock=monotonic_ms, syncs=ThreadSyncs(disk) if isinstance(disk, RealDisk) else None)
            self.store = MsgStoreActor(runtime, commit)
            runtime.spawn(STORE_NAME, self.store)
        self.queues: dict[str, QueueActor | StreamActor] = {}
        self._scratch: str | None = None  # streams' directory without a data dir
        # which queues had inputs since each collector last asked (actors/stats/deltas.py)
        self.changes = Changes(os.urandom(6).hex())

    def _deleted(self, name: str) -> None:
        actor = self.queues.pop(name, None)
        if actor is not None:
            self.changes.drop((actor.core.vhost, actor.core.name), monotonic_ms())
        if self.store is not None:
            self.store.forget(name)
        self.runtime.remove(name, gone=True)

    def _place(self, vhost: str, name: str) -> Address:
        return queue_address(self.registry.queue_home(vhost, name), vhost, name)

    def receive(self, sender: Address, msg: CreateQueue) -> None:
        if f"q:{msg.vhost}:{msg.name}" not in self.queues:
            actor = self._create(msg.vhost, msg.name, msg.auto_delete, dict(msg.arguments), msg.durable,
                                 tuple(msg.members))
            key, changes = (msg.vhost, msg.name), self.changes
            actor.on_input = lambda: changes.touch(key, monotonic_ms())
            actor.on_input()
            self.queues[actor.name] = actor
            self.runtime.spawn(actor.name, actor)
            actor.start()
        self.runtime.send(sender, Reply(msg.rid), sender=self.address)

    def _create(self, vhost: str, name: str, auto_delete: bool, arguments: dict,
                durable: bool, members: tuple[str, ...] = ()) -> QueueActor | StreamActor:
        storage = self.storage
        if storage is not None:
            self.ensure_recovered()
        if stream.is_stream(arguments):
            return self._create_stream(vhost, name, arguments, members)
        if storage is None or not storage.recovered:
            assert storage is None or not durable, "a durable queue created before the registry snapshot arrived"
            if storage is not None:
                log.warning("queue.in_ram_only", vhost=vhost, queue=name, reason="storage not recovered yet")
            core = ClassicQueue(vhost, name, auto_delete=auto_delete, arguments=arguments,
                                router=self.registry, place=self._place, now_ms=now_ms(), node=self.node)
            return QueueActor(self.runtime, core, self._deleted, pace=IntakePace())
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
                            place=self._place, now_ms=now_ms(), ready=ready, next_id=next_id, node=self.node,
                            hold_confirms=backing.durable)
        assert self.store is not None
        return QueueActor(self.runtime, core, self._deleted, storage, backing, self.store.address, IntakePace())

    def _stream_root(self) -> str:
        if self.storage is None:  # no data dir: the stream lives as long as this process
            if self._scratch is None:
                self._scratch = tempfile.mkdtemp(prefix="warren-streams-")
            return self._scratch
        return self.storage.disk.root

    def _create_stream(self, vhost: str, name: str, arguments: dict, members: tuple[str, ...]) -> StreamActor:
        host = self.runtime.host
        directory = stream_dir(self._stream_root(), kind_of(host), vhost, name)
        return StreamActor(self.runtime, stream_core(host, directory, vhost, name, arguments, members, now_ms()),
                           self._deleted)

    def ensure_recovered(self) -> None:
        """Recover this host's storage once the registry snapshot is here (it names the durable
        queues to keep; the rest of this host's queue directories are deleted). The node sends that
        snapshot on the same pipe before it creates any queue here."""
        storage = self.storage
        if storage is None or storage.recovered or self.registry is None or not self.registry_ready():
            return
        host = self.runtime.host
        # a replicated stream's members are its replicas (its home's node may hold none since delete_replica)
        here = [q for q in self.registry.queues()
                if q.durable and (stream_member_here(q, host) if q.replicas else q.home == host)]
        storage.recover([(q.vhost, q.name) for q in here if not stream.is_stream(q.arguments)])
        streams = {(q.vhost, q.name) for q in here if stream.is_stream(q.arguments)}
        for key, directory in stream_names(self._stream_root(), kind_of(host)).items():
            if key not in streams:  # deleted while this host was down
                shutil.rmtree(directory, ignore_errors=True)

    def nodes(self, up: list[str], down: list[str]) -> None:
        """The cluster view changed (ClusterView's `on_nodes`): channels on down nodes are gone."""
        gone, back = set(down), set(up)
        for actor in list(self.queues.values()):
            if gone:
                actor.nodes_down(gone)
            if back and isinstance(actor, StreamActor):
                actor.nodes_up(back)

    def touch_all(self) -> None:
        """Every queue's stats row changed (paging moved their messages)."""
        now = monotonic_ms()
        for actor in self.queues.values():
            self.changes.touch((actor.core.vhost, actor.core.name), now)

    def stats(self) -> list[dict]:
        return [a.stats() for a in self.queues.values()]

    def flow_links(self, queues: list[QueueActor] | None = None) -> list[dict]:
        """This host's part of the publish chain for `warrenctl flow` (flow/bottleneck.py's Links):
        each queue (or each of `queues`), with its credit link to the host's message-store actor, and
        that actor (the message store and queue indexes, synced by its group commit)."""
        now = monotonic_ms()
        links = []
        chosen = list(self.queues.values()) if queues is None else queues
        for q in chosen:
            on_store = [str(self.store.address)] if self.store is not None and q.waits_on_store else []
            state = q.flow_state(now)
            runtime = self.runtime.flow_state(q.address) or {}
            blocked_on = runtime.get("blocked_on") or (on_store if state == "flow" else [])
            waited = q.store_wait.flow_share(now) if isinstance(q, QueueActor) else 0.0  # a stream syncs itself
            share = max(waited, runtime.get("flow_share", 0.0))
            links.append({"kind": "queue", "name": str(q.address), "label": f"{q.core.name} (vhost {q.core.vhost})",
                          "state": state, "downstream": on_store, "blocked_on": blocked_on,
                          "flow_share": share, "credit": runtime.get("credit", {})})
        if self.store is not None and any(q.waits_on_store for q in chosen):
            store = str(self.store.address)
            links.append({"kind": "store", "name": store, "label": f"{store} (message store and queue indexes)",
                          "state": "running", "downstream": [], "blocked_on": [],
                          "flow_share": self.store.flow_share(now), "credit": {}})
        return links
