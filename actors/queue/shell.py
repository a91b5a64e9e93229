"""The classic queue actor: a thin shell that feeds its mailbox to `ClassicQueue.handle` and
carries out the effects with the runtime's handlers (actors/runtime/effects.py).

The messages are those of actors/messages/channel_queue.py (from channels) and node.py (from the
node); the core answers requests itself, before the deliveries a request caused, so a channel has
sent consume-ok before the first basic.deliver. The shell owns the clock (wall clock ms, as
RabbitMQ stamps expiry and x-death) and the timers the core asks for (one per name; a new
StartTimer replaces the old). Dead-lettered messages leave as plain `Publish` sends to the target
queue actors, without credit or confirms (at-most-once).

Where the ready messages live (persist/classic/host_storage.py hands the pieces out, recovered): a
durable queue in a `DurableBacking` behind `backed.BackedReady`; a durable priority queue in one
such backing per level, behind `priority.PriorityReady`; a non-durable queue in a
`spill.SpillReady` (one per level for a priority queue), which pages through a non-durable backing
only when lazy mode or a RAM target asks. Without a data dir everything stays in RAM. The actor sees
a queue's backings as one `Backing` (flush, lazy mode, stats).

THE ORDERING RULE of durable queues lives in the core (confirms held until `flushed()`); the shell's
part is to set the held confirms aside (`sync_started()`) when the host's message-store actor's
group commit (actors/store/shell.py, actors/queue/group_commit.py) asks for the syncs of
everything this queue wrote (`flush`), and to call `flushed()` only from `synced`, on the store's
`StoreSynced` once those syncs are done. A durable queue that touched its backing in a receive
tells the store (`StoreWrite`, over a credit link); nothing here ever syncs per message.

Pacing: the queue is a `manual_credit` actor, which grants its publishers' credit itself
(`processed_all`: everything received so far). It holds that credit
- while its link to the store is out of credit (400 messages taken in that no sync covers yet,
  RabbitMQ's queue -> msg_store link): a slow disk pushes back on the publishers through credit
  rather than piling up writes, and a disk that keeps up never holds anyone; the store's grant
  (`on_unblocked`) lets the credit go;
- while its `IntakePace` (flow/intake.py) says it is long and its consumers keep up: it counts what
  it took in and delivered after each message and asks; the next message that finds it short again,
  or the hold's own timer after `hold_max_ms`, lets the credit go.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence

import structlog

from actors.messages.channel_queue import ChannelDown, Deliver, Publish
from actors.messages.node import ApplyPolicy
from actors.messages.queue_store import StoreSynced, StoreWrite
from actors.placement import node_of
from actors.queue.core import ClassicQueue
from actors.queue.group_commit import FLOW_TICKS_PER_SECOND, waited
from actors.runtime.address import Address
from actors.runtime.clock import monotonic_ms, now_ms
from actors.runtime.effects import ActorEffects
from actors.runtime.held_credit import HeldCredit
from effects import Send
from effects.interpreter import Interpreter
from flow.intake import IntakePace
from flow.state import FlowState, waiting_state
from persist.classic.durable_queue import BackingStats, DurableBacking
from persist.classic.host_storage import HostStorage
from persist.classic.spill import SpillReady

log = structlog.get_logger("warren.queue")

INDEX_ENTRY_RAM_BYTES = 200  # rough cost of one message's index entry kept in RAM, for `memory`


class Backing(Protocol):
    """What the shell does with a queue's storage (a `DurableBacking`, or `Levels` of them)."""
    durable: bool

    def flush(self) -> Any: ...

    def write_owed(self) -> None: ...

    def write_pending(self) -> None: ...

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

    def write_owed(self) -> None:
        for part in self.parts:
            part.write_owed()  # type: ignore[union-attr]

    def write_pending(self) -> None:
        for part in self.parts:
            part.write_pending()  # type: ignore[union-attr]

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
                 storage: HostStorage | None = None, backing: Backing | None = None,
                 store: Address | None = None, pace: IntakePace | None = None) -> None:
        """`store`: the host's message-store actor, which a durable queue's writes go to."""
        self.runtime = runtime
        self.core = core
        self.name = f"q:{core.vhost}:{core.name}"
        self.address = Address(runtime.host, self.name)
        self._on_deleted = on_deleted
        self._storage = storage
        self.backing = backing
        self._durable = backing is not None and backing.durable
        assert store is not None or not self._durable, "a durable queue confirms only through its store"
        self._store = store if self._durable else None
        self._lazy = core.settings.lazy
        self.store_wait = FlowState(FLOW_TICKS_PER_SECOND, changed_at=monotonic_ms())  # on the group commit
        self._actor_effects = ActorEffects(runtime, self.address, on_timer=self._fire)
        self.run = Interpreter(self._actor_effects.handlers())
        self._pace = pace
        self.manual_credit = pace is not None  # the runtime leaves the publishers' grants to `_pace_intake`
        self._credit = HeldCredit(runtime, self.address, self._hold_ended) if pace is not None else None
        # the store's mark of this queue since its commit last flushed it: None, "lazy" or "now"
        self._noted: str | None = None
        self.on_input: Callable[[], None] = lambda: None  # the manager hears of every input (its stats rows)

    def start(self) -> None:
        self.run(self.core.start(now_ms=now_ms()))

    @property
    def deleted(self) -> bool:
        return self.core.deleted

    reports = True  # its stats row is the queue's (actors/stats/reporters.py)

    def write(self) -> None:
        """The store's commit is about to sync: write what this queue owes the disk."""
        assert self.backing is not None and self._durable
        self.backing.write_owed()

    def flush(self) -> None:
        """The store's commit reached this queue: ask for the syncs that make its writes durable
        and set aside the confirms they cover (released by `synced`, after them)."""
        assert self.backing is not None and self._durable
        self.backing.flush()
        self.core.sync_started()
        self._noted = None  # what this queue writes from now on needs a note of its own

    def synced(self) -> None:
        """The syncs asked for at the last `flush` are done: confirm what they covered."""
        self.on_input()
        self.run(self.core.flushed())

    def on_unblocked(self) -> None:
        """The store granted credit back: the publishers may be let go."""
        if self._pace is not None and not self.core.deleted:
            self._pace_intake(0, ())

    def waited(self, start_ms: int, end_ms: int) -> None:
        """The commit that held this queue's confirms and messages took [start_ms, end_ms)."""
        self.store_wait = waited(self.store_wait, start_ms, end_ms)

    @property
    def waits_on_store(self) -> bool:
        return self._store is not None

    def flow_state(self, now_ms: int) -> str:
        """running / flow: held up by its store (flow/state.py's waiting), or out of credit."""
        if waiting_state(self.store_wait, now_ms) == "flow":
            return "flow"
        runtime = self.runtime.flow_state(self.address)
        return runtime["state"] if runtime is not None else "running"

    def receive(self, sender: Address, msg: Any) -> None:
        if type(msg) is StoreSynced:
            self.synced()  # an input too: synced() tells the manager
            if msg.end_ms > msg.start_ms:
                self.waited(msg.start_ms, msg.end_ms)
            return
        self.on_input()
        core = self.core
        effects = core.handle(sender, msg, now_ms=now_ms())
        if core.deleted:
            self._drop_storage()  # before the effects: the confirms released at delete follow a flush
        elif type(msg) is ApplyPolicy and self.backing is not None and core.settings.lazy != self._lazy:
            self._lazy = core.settings.lazy
            self.backing.set_lazy(self._lazy)
        self.run(effects)
        if core.deleted:
            self._actor_effects.cancel_all()
            self._release_credit()
            self._on_deleted(self.name)
        else:
            taken = len(msg.messages) if type(msg) is Publish else 0
            self._touched(taken)
            if self._pace is not None:
                self._pace_intake(taken, effects)

    def nodes_down(self, nodes: set[str]) -> None:
        """Every channel on a node that went down is gone, as RabbitMQ's queue sees the DOWN of a
        channel on a lost node: its consumers are dropped and what it held is requeued. Its
        ChannelDown would never come."""
        for channel in self.core.channels():
            if node_of(channel.host) in nodes and not self.core.deleted:
                self.receive(channel, ChannelDown())

    def _fire(self, name: str) -> None:
        if not self.core.deleted:
            self.on_input()
            self.run(self.core.on_timer(name, now_ms=now_ms()))
            self._touched()

    def _pace_intake(self, taken: int, effects: Sequence[Any]) -> None:
        """Hold the publishers' credit while the queue is long and its consumers keep up, else
        let it go (flow/intake.py)."""
        pace = self._pace
        assert pace is not None
        delivered = 0
        for e in effects:
            if type(e) is Send and type(e.msg) is Deliver:
                delivered += len(e.msg.messages)
        now = monotonic_ms()
        pace.count(now, taken, delivered)
        paced = pace.hold(now, self.core.messages_ready)
        if self._store is not None and self.runtime.blocked(self.address):
            return  # the store is behind: held until it grants credit back (`on_unblocked`)
        if not paced:
            self._release_credit()
        else:
            assert self._credit is not None
            self._credit.hold(pace.hold_max_ms)

    def _hold_ended(self) -> None:
        if not self.core.deleted:
            self._pace_intake(0, ())

    def _release_credit(self) -> None:
        if self._credit is not None:
            self._credit.release()

    def _touched(self, taken: int = 0) -> None:
        """This queue wrote or holds confirms: tell the store, over the credit link (`taken`: the
        messages it just took in, what the link's credit counts; a receive that only settled
        costs 1, and needs no note when the store's next commit flushes this queue anyway)."""
        if self._store is None:
            return
        confirms = self.core.holds_confirms
        if not confirms:
            # what waits up to the lazy commit's 200 ms waits in the OS, not here: a kill -9 of
            # the host keeps the acks it took in, only a machine crash can bring them back
            assert self.backing is not None
            self.backing.write_pending()
        if not taken and (self._noted == "now" or (self._noted == "lazy" and not confirms)):
            return
        self._noted = "now" if confirms or self._noted == "now" else "lazy"
        self.runtime.send(self._store, StoreWrite(taken, confirms), sender=self.address, credit=max(1, taken))

    def _drop_storage(self) -> None:
        if self._storage is None or self.backing is None:
            return
        if self._store is not None:
            self.backing.flush()  # the store forgets the queue once it is deleted (the manager tells it)
        self._storage.delete_queue(self.core.vhost, self.core.name)

    def stats(self) -> dict[str, Any]:
        """The core's counters plus where the messages are (RabbitMQ's names)."""
        s = {**self.core.stats(), "pid": str(self.address), "state": self.flow_state(monotonic_ms())}
        unacked = s["messages_unacknowledged"]
        s["messages_unacknowledged_ram"] = unacked  # the core holds every unacked message in RAM
        if self.backing is None:
            return {**s, "durable_storage": False, "messages_ram": s["messages"], "messages_ready_ram":
                    s["messages_ready"], "messages_persistent": 0, "messages_paged_out": 0,
                    "message_bytes_ram": s["memory"]}
        b = self.backing.stats()
        return {**s, "durable_storage": self._durable, "messages_ram": b.ram_messages + unacked,
                "messages_ready_ram": b.ram_messages, "messages_persistent": b.persistent,
                "messages_paged_out": b.disk_only_messages, "message_bytes_ram": s["memory"],
                "memory": s["memory"] + b.ram_index_entries * INDEX_ENTRY_RAM_BYTES, "lazy": b.lazy}
