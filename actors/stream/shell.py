"""The stream queue actor: a thin shell around `StreamQueue` (core.py) in a queue host.

It feeds its mailbox to the core and runs the effects. Its one duty of its own is the group
commit of the log: a receive that appended asks for one sync at the end of the event loop's
turn (`call_soon`); the log is flushed to the OS there and the fdatasync runs on a syncing
thread, one in flight per stream, so every publish batch that arrives while one runs shares the
next; only after it returns does `core.synced()` release the confirms and the deliveries it
covers (THE ORDERING RULE, core.py). A consumer cut by the read batch limit is served again on the next turn,
so one consumer reading a long backlog from disk never holds the loop for long.

A replicated stream has such an actor on each member node, on the host of the same kind and
under the same name (`member_address`); they talk to each other through the runtime like any
actors (replication.py), and a replica's sync is what its ack to the leader waits for. Its
epoch state (persist/stream/epochs.py) lives beside its segments.
"""
from __future__ import annotations

import asyncio
import hashlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import structlog

from actors.messages.channel_queue import ChannelDown
from actors.messages.node import Dispose
from actors.placement import host_of, kind_of, node_of
from actors.runtime.address import Address
from actors.runtime.clock import monotonic_ms, now_ms
from actors.runtime.effects import ActorEffects
from actors.stream.core import StreamQueue
from actors.stream.replication import Replication
from effects.interpreter import Interpreter
from metadata import stream as spec
from persist.stream import epochs
from persist.stream.log import StreamLog, make_durable

log = structlog.get_logger("warren.stream")

STREAMS_DIR = "streams"
SYNC_THREADS = 2  # a host's streams share these for their fdatasyncs (the loop never waits on one)
_SYNCS = ThreadPoolExecutor(SYNC_THREADS, thread_name_prefix="stream-sync")


def stream_dir(root: str, host_kind: str, vhost: str, name: str) -> Path:
    """Where a stream's segments live: one directory per stream, named by a digest of its identity
    (names may be 255 bytes of anything); the NAME file inside says whose it is."""
    digest = hashlib.sha1(f"{vhost}\0{name}".encode()).hexdigest()
    return Path(root) / STREAMS_DIR / host_kind / digest


def open_stream(directory: Path, vhost: str, name: str, arguments: dict[str, Any]) -> StreamLog:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "NAME").write_text(f"{vhost}\n{name}\n")
    return StreamLog.open(directory, spec.retention(arguments).segment_bytes)


def member_address(host: str, member: str, vhost: str, name: str) -> Address:
    """The stream's actor on node `member`: on that node's host of the kind of `host` (every node
    of a cluster runs the same host kinds)."""
    return Address(host_of(member, kind_of(host)), f"q:{vhost}:{name}")


def stream_core(host: str, directory: Path, vhost: str, name: str, arguments: dict[str, Any],
                members: tuple[str, ...], now: int) -> StreamQueue:
    """The core of this host's member of a stream (members: its nodes, the declared leader first;
    none for a stream of one member, on this node)."""
    me = node_of(host)
    log = open_stream(directory, vhost, name, arguments)
    rep = Replication(me, tuple(members) or (me,), log, epochs.load(directory),
                      lambda state: epochs.save(directory, state),
                      lambda member: member_address(host, member, vhost, name))
    return StreamQueue(vhost, name, log, arguments, now, rep)


def stream_names(root: str, host_kind: str) -> dict[tuple[str, str], Path]:
    """Every stream directory of this host, by (vhost, name)."""
    base = Path(root) / STREAMS_DIR / host_kind
    found: dict[tuple[str, str], Path] = {}
    if base.exists():
        for d in base.iterdir():
            try:
                vhost, name = (d / "NAME").read_text().split("\n")[:2]
            except (OSError, ValueError):
                continue
            found[(vhost, name)] = d
    return found


class StreamActor:
    def __init__(self, runtime: Any, core: StreamQueue, on_deleted: Callable[[str], None]) -> None:
        self.runtime = runtime
        self.core = core
        self.name = f"q:{core.vhost}:{core.name}"
        self.address = Address(runtime.host, self.name)
        self._on_deleted = on_deleted
        self._actor_effects = ActorEffects(runtime, self.address, on_timer=self._fire)
        self.run = Interpreter(self._actor_effects.handlers())
        self._sync_due = False
        self._syncing = False  # an fdatasync is running on the syncing thread
        self._read_due = False
        self.on_input: Callable[[], None] = lambda: None  # the manager hears of every input (its stats rows)
        self.manual_credit = False
        self.waits_on_store = False

    def start(self) -> None:
        self.run(self.core.start(now_ms=now_ms()))

    @property
    def deleted(self) -> bool:
        return self.core.deleted

    @property
    def reports(self) -> bool:
        """Its stats row is the stream's: it leads (a stream's counts come from one member)."""
        return self.core.rep.leads

    def receive(self, sender: Address, msg: Any) -> None:
        self.on_input()
        core = self.core
        if core.deleted:
            return
        if type(msg) is Dispose:
            core.log.sync()  # what was appended is confirmed before the stream goes
        effects = core.handle(sender, msg, now_ms=now_ms())
        self.run(effects)
        if core.deleted:
            self._actor_effects.cancel_all()
            core.log.delete()
            self._on_deleted(self.name)
            return
        self._schedule()

    def _schedule(self) -> None:
        loop = asyncio.get_running_loop()
        if self.core.unsynced and not self._sync_due and not self._syncing:
            self._sync_due = True
            loop.call_soon(self._sync)
        if not self._read_due and self.core.more_to_read():
            self._read_due = True
            loop.call_soon(self._read)

    def _sync(self) -> None:
        """Flush the log and fdatasync it on the syncing thread; one sync in flight at a time
        (what arrives meanwhile waits for the next, so each sync covers a whole batch)."""
        self._sync_due = False
        core = self.core
        if core.deleted or self._syncing:
            return
        target, fds = core.log.flush()
        core.sync_started()
        self._syncing = True
        done = asyncio.get_running_loop().run_in_executor(_SYNCS, make_durable, fds)
        done.add_done_callback(lambda f: self._synced(target, f))

    def _synced(self, target: int, done: asyncio.Future) -> None:
        self._syncing = False
        done.result()  # a failed fdatasync is fatal for the host, as for every store of warren
        if self.core.deleted:
            return
        self.core.log.commit(target)
        self.run(self.core.synced())
        self._schedule()

    def _read(self) -> None:
        self._read_due = False
        if not self.core.deleted:
            self.run(self.core.read_more())
            self._schedule()

    def _fire(self, name: str) -> None:
        if not self.core.deleted:
            self.run(self.core.on_timer(name, now_ms=now_ms()))
            self._schedule()

    def nodes_down(self, nodes: set[str]) -> None:
        """Channels on lost nodes are gone: their consumers go (nothing is held for them); a lost
        leader is replaced (replication.py)."""
        for channel in self.core.channels():
            if node_of(channel.host) in nodes and not self.core.deleted:
                self.receive(channel, ChannelDown())
        if not self.core.deleted:
            self.run(self.core.nodes_down(nodes))
            self._schedule()

    def nodes_up(self, nodes: set[str]) -> None:
        if not self.core.deleted:
            self.run(self.core.nodes_up(nodes))

    def flow_state(self, now: int) -> str:
        runtime = self.runtime.flow_state(self.address)
        return runtime["state"] if runtime is not None else "running"

    def stats(self) -> dict[str, Any]:
        s = {**self.core.stats(), "pid": str(self.address), "state": self.flow_state(monotonic_ms())}
        return {**s, "durable_storage": True, "messages_ram": 0, "messages_ready_ram": 0,
                "messages_persistent": s["messages"], "messages_paged_out": s["messages"],
                "message_bytes_ram": 0, "messages_unacknowledged_ram": 0}
