"""The per-host actor runtime: mailboxes over ZeroMQ, local hand-over, credit flow.

Theory of operation
-------------------
One `Runtime` runs in each host process on an asyncio loop. Actors are plain objects with
`receive(sender, msg)`, where `msg` is a typed message of actors/messages; they are addressed by
`Address(host, name)`.

`send` never blocks and never does IO. It appends the item to the outbox of the destination
*host* and, on the first send of a loop iteration, schedules `_flush` with `call_soon`. The flush
turns each remote outbox into ONE envelope (envelope.py) sent as ONE ZeroMQ frame per destination
host (zmq_links.py): over ipc:// to a host of the same node, over tcp:// with CURVE to a host of
another node (curve.py). One PUSH socket per destination host keeps order per (source host,
destination host) across all actors - the rest of the system relies on that. (A directory of bare
tcp:// endpoints runs every hop over tcp without CURVE: the Raft and quorum test launchers start
their hosts so.) The local outbox is dispatched by the same flush, i.e. on a later loop iteration
than the send and in send order, handing over the same Python object; what those local actors
send locally in turn is handed over in the same flush, a few rounds deep (`dispatch_local`, which
a reader also calls once it has acted on a read), never from inside an actor's `receive`.

Receiving: every PULL socket is drained on readiness (zmq_links.py), and each item of each frame
is dispatched in order. Ordering rule: a remote batch is dispatched item by item, so an actor sees
the messages of one envelope in send order.

Credit (flow/credit.py): `send(..., credit=n)` consumes n on the link sender->destination in the
sender's ledger. After the receiver's `receive` returns, the runtime marks n processed in the
receiver's ledger - unless the actor has `manual_credit = True` and calls `processed` itself. Grants
travel back as `Credit` messages, batched like everything else. Credit is never lost:
messages for a dead or unknown actor, messages whose `receive` crashed, and everything a removed
actor had received but not yet granted are credited back to their senders. Nor is a link kept
for good: a removed actor's runtime tells each actor it sent to with credit (`Credit` with
`link_closed`, behind all it sent), and that actor's ledger drops the link, once it has processed
what it took over it.

Between nodes: a host given `remote=` (a tcp endpoint to bind and the cluster's CURVE keys) also
binds a tcp PULL socket, a CURVE server that admits only the cluster, beside its ipc one, and its
PUSH sockets towards tcp endpoints are CURVE clients. `add_hosts` learns (or changes) where other
hosts listen; a host whose endpoint changed (its node restarted on another port) gets a new PUSH
socket. A restarting host, of this node or another, gets what was sent to it meanwhile (a PUSH
socket keeps its queue while it reconnects). What is sent to a host whose endpoint is not known
yet (a node that has just started learns its peers' endpoints from the cluster a moment after its
hosts begin to send) is held, in order, and leaves once `add_hosts` learns it; after `PARK_S` it
is given up as if its actor did not exist (`Undelivered`, credit back), so nothing waits for good.
`partition(nodes)` (the control op "partition") is fault injection for tests: frames to and from
those nodes' hosts are dropped, as a network partition loses them.

Raw frames: a protocol whose bulk must not pass through the envelope (a quorum host's WAL batches,
actors/messages/wal.py: an envelope would copy its records twice more and decode them for nothing)
sends frames of its own layout with `send_raw`; their first byte is `RAW_FRAME`, which starts no
msgpack value, and the receiving host hands them whole to its `raw_handler`. They go out at once,
not with the turn's flush, so they keep their order among themselves but not with the envelopes
of the same turn (their protocol must not need it); only to a host of this node.

A `receive` (or `on_unblocked`) that raises is logged with its traceback and the actor is removed;
the host keeps running.
A message for an actor that does not exist is answered with `Undelivered(msg)`, so a sender
waiting for a reply or a confirm learns that it will not come; `gone` says the actor was removed
for good (`remove(name, gone=True)`: a deleted queue), not lost with a host that restarted, so a
sender whose view of the metadata lags can tell a deletion from a crash.
"""
from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Protocol

import structlog

from actors.messages.runtime import RAW_FRAME, Credit, Undelivered
from actors.runtime import envelope, memory_probe
from actors.runtime.address import Address
from actors.runtime.clock import monotonic_ms
from actors.runtime.curve import CurveKeys
from actors.runtime.zmq_links import Links
from flow.credit import CreditLedger
from flow.state import FlowState

log = structlog.get_logger("warren.runtime")

# a local hand-over whose actor sends locally again is carried on in the same flush this many
# times: a publish goes reader -> queue -> consumer's channel -> socket in one loop turn
local_rounds = 4
ticks_per_second = 1000  # flow-state ticks are milliseconds of the monotonic clock

# Deleted actors remembered per host: far more than can be deleted while one metadata change
# travels to the channels, which is the only time a message reaches a deleted actor.
GONE_REMEMBERED = 4096
# How long what is sent to a host of unknown endpoint waits for `add_hosts` to learn it.
PARK_S = 30.0


class Actor(Protocol):
    def receive(self, sender: Address, msg: Any) -> None: ...


class Runtime:
    """All actors of one host process and their mailboxes."""

    def __init__(self, host: str, directory: dict[str, str], *, credit_initial: int = 400,
                 credit_more_after: int = 200, remote: tuple[str, CurveKeys] | None = None) -> None:
        """`remote`: (tcp endpoint to bind, the cluster's CURVE keys) for a host other nodes reach."""
        self.host = host
        self.directory = dict(directory)
        self.remote = remote
        self.tcp_endpoint: str | None = None  # where other nodes reach this host, once bound
        self.credit_initial = credit_initial
        self.credit_more_after = credit_more_after
        self.control: Callable[[str, dict], Awaitable[Any]] | None = None
        self.raw_handler: Callable[[bytes], None] | None = None  # raw frames (see the module docstring)
        self.frames_sent = 0
        self.frames_received = 0
        self._actors: dict[str, Actor] = {}
        self._ledgers: dict[str, CreditLedger] = {}
        self._flow: dict[str, FlowState] = {}
        # names removed for good, oldest first; bounded, for they only matter while the news of
        # the removal is on its way to senders
        self._gone: dict[str, None] = {}
        # credit received by manual_credit actors and not yet marked processed, per sender
        self._pending: dict[str, dict[Address, int]] = {}
        # senders removed while such an actor still had credit of theirs pending: their links
        # close once it has processed that (`_sender_closed`)
        self._closing: dict[str, set[Address]] = {}
        self._outbox: dict[str, list[envelope.Item]] = {}
        self._parked: dict[str, list[envelope.Item]] = {}  # for hosts whose endpoint is not known yet
        self._flush_scheduled = False
        self._dispatching = False  # local actors are being handed their messages (no nesting)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._links: Links | None = None
        self._frame_bytes: dict[str, int] = {}  # size of the last frame per host: the next one's hint
        self._cut_off: tuple[str, ...] = ()  # host name prefixes of the nodes partitioned away (fault injection)

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        """Bind this host's endpoint and start draining it."""
        self._loop = asyncio.get_running_loop()
        self._links = Links(self._loop, self.host, self._frame_arrived,
                            self.remote[1] if self.remote is not None else None)
        self._links.bind(self.directory[self.host])
        if self.remote is not None:
            self.tcp_endpoint = self._links.bind(self.remote[0], curve=True)
        log.debug("runtime.started", host=self.host, endpoint=self.directory[self.host], tcp=self.tcp_endpoint)

    def add_hosts(self, endpoints: dict[str, str]) -> None:
        """Learn where hosts listen (other nodes' hosts, or a restarted node's new ports)."""
        for host, endpoint in endpoints.items():
            if host == self.host or self.directory.get(host) == endpoint:
                continue
            self.directory[host] = endpoint
            if self._links is not None:
                self._links.forget(host)
            parked = self._parked.pop(host, None)
            if parked:
                log.info("runtime.host_learned", host=self.host, to=host, held=len(parked))
                self._send_frame(host, parked)

    def peers_down(self, hosts: set[str]) -> None:
        """`hosts` are down (their nodes), or restarted (their actors lost what they had taken in):
        every local actor forgets its links to actors there, so no credit stays lent to a peer
        that will never grant it back (credit_flow:peer_down)."""
        for name, ledger in list(self._ledgers.items()):
            was_blocked = ledger.blocked()
            for link in ledger.links():
                if link.host in hosts:
                    ledger.forget(link)
            pending = self._pending.get(name)
            if pending:
                for link in [link for link in pending if link.host in hosts]:
                    del pending[link]
            if was_blocked and not ledger.blocked():
                me = Address(self.host, name)
                for link, n in ledger.release_deferred():
                    self._send_credit(me, link, n)
                self._observe(name, ledger)
                on_unblocked = getattr(self._actors.get(name), "on_unblocked", None)
                if on_unblocked is not None:
                    on_unblocked()

    async def close(self) -> None:
        """Flush what was sent, then close every socket."""
        if self._flush_scheduled:
            self._flush()
        self._closed = True
        if self._links is not None:
            self._links.close()
            self._links = None

    # -- actors ------------------------------------------------------------------------------
    def spawn(self, name: str, actor: Actor) -> Address:
        if name in self._actors:
            raise ValueError(f"actor {name!r} already exists on {self.host}")
        self._actors[name] = actor
        self._gone.pop(name, None)
        self._ledgers[name] = CreditLedger(self.credit_initial, self.credit_more_after)
        self._flow[name] = FlowState(ticks_per_second, changed_at=monotonic_ms())
        return Address(self.host, name)

    def remove(self, name: str, *, gone: bool = False) -> None:
        """Forget an actor; hand back all credit it still owed its senders. `gone`: removed for
        good, as messages still on their way to it will be told (`Undelivered.gone`)."""
        if self._actors.pop(name, None) is None:
            return
        if gone:
            self._gone[name] = None
            if len(self._gone) > GONE_REMEMBERED:
                del self._gone[next(iter(self._gone))]
        me = Address(self.host, name)
        ledger = self._ledgers.pop(name)
        for link, n in ledger.owed():
            self._send_credit(me, link, n)
        for link, n in self._pending.pop(name, {}).items():
            if n:
                self._send_credit(me, link, n)
        # behind everything it sent, on the same FIFO per host: its receivers drop the link
        for link in ledger.outgoing():
            self._enqueue(link.host, (name, link.name, Credit(0, link_closed=True), 0))
        self._closing.pop(name, None)
        del self._flow[name]

    def actor(self, name: str) -> Actor | None:
        return self._actors.get(name)

    # -- sending -----------------------------------------------------------------------------
    def send(self, to: Address, msg: Any, *, sender: Address, credit: int = 0) -> None:
        """Queue a message; it leaves with this loop iteration's batch for `to.host`."""
        assert sender.host == self.host, (sender, self.host)
        if credit:
            ledger = self._ledgers.get(sender.name)
            if ledger is not None and ledger.sent(to, credit):
                self._observe(sender.name, ledger)
        self._enqueue(to.host, (sender.name, to.name, msg, credit))

    def blocked(self, actor: Address) -> bool:
        """Whether any credit-controlled outgoing link of `actor` is out of credit."""
        ledger = self._ledgers.get(actor.name)
        return ledger is not None and ledger.blocked()

    def processed(self, actor: Address, sender: Address, n: int) -> None:
        """`actor` finished n messages from `sender` (for actors with `manual_credit = True`)."""
        assert actor.host == self.host, (actor, self.host)
        pending = self._pending.get(actor.name)
        settled = False  # nothing of `sender`'s is pending any more
        if pending is not None and sender in pending:
            left = pending[sender] - n
            if left > 0:
                pending[sender] = left
            else:
                del pending[sender]
                settled = True
        ledger = self._ledgers.get(actor.name)
        if ledger is None:
            self._send_credit(actor, sender, n)
            return
        for link, amount in ledger.processed(sender, n):
            self._send_credit(actor, link, amount)
        closing = self._closing.get(actor.name) if settled else None
        if closing and sender in closing:
            closing.discard(sender)
            if not closing:
                del self._closing[actor.name]
            ledger.sender_closed(sender)

    def processed_all(self, actor: Address) -> None:
        """`actor` (a `manual_credit` one) finished everything it has received so far."""
        pending = self._pending.pop(actor.name, None)
        for sender, n in (pending or {}).items():
            self.processed(actor, sender, n)

    def flow_states(self) -> dict[str, dict]:
        """Per local actor: running/flow/blocked, timestamps, the links it is blocked on, those it
        sends to with credit (`downstream`) and the credit left on each."""
        now = monotonic_ms()
        return {name: self._flow_state(name, now) for name in self._flow}

    def flow_state(self, actor: Address) -> dict | None:
        """One local actor's entry of `flow_states` (None for an actor that is not here)."""
        return self._flow_state(actor.name, monotonic_ms()) if actor.name in self._flow else None

    def _flow_state(self, name: str, now: int) -> dict:
        ledger = self._ledgers[name]
        state = self._flow[name].as_dict(now)
        state["blocked_on"] = sorted(str(link) for link in ledger.blocked_links())
        state["downstream"] = sorted(str(link) for link in ledger.links())
        state["credit"] = {str(link): credit for link, credit in ledger.credits().items()}
        return state

    async def ask(self, op: str, args: dict) -> Any:
        """A control ask: built-in ops, else the host entry's `control` handler."""
        if op == "ping":
            return {"host": self.host, "actors": len(self._actors)}
        if op == "flow_states":
            return self.flow_states()
        if op == "directory":
            return dict(self.directory)
        if op == "memory":  # a diagnostic: what this process's tables hold (memory_probe.py)
            return memory_probe.probe(self, args)
        if op == "partition":
            self.partition(args.get("nodes", ()))
            return {"partitioned_from": sorted(args.get("nodes", ()))}
        if self.control is None:
            return {"error": f"unknown control op {op!r} on host {self.host}"}
        return await self.control(op, args)

    def partition(self, nodes: Any) -> None:
        """Fault injection (tests, the fault suite): drop every frame to and from the hosts of
        `nodes` (hosts are named NODE:KIND) until called again without them, as a network that
        loses everything between two nodes would."""
        self._cut_off = tuple(f"{node}:" for node in nodes)
        if self._cut_off:
            log.warning("runtime.partitioned", host=self.host, nodes=sorted(nodes))

    # -- internals ---------------------------------------------------------------------------
    def _enqueue(self, host: str, item: envelope.Item) -> None:
        outbox = self._outbox.get(host)
        if outbox is None:
            self._outbox[host] = [item]
        else:
            outbox.append(item)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            assert self._loop is not None, "Runtime.start() must run before send()"
            self._loop.call_soon(self._flush)

    def send_queued(self) -> None:
        """Send now what is queued for other hosts, rather than at the end of the loop turn.
        For a callback about to block the loop (a WAL's write and sync): what the turn's input
        produced (credit grants, a leader's AppendEntries) need not wait for it. Local messages
        still wait for the turn's flush: dispatching them here would run actors inside the
        callback. Each host's items keep their order, so every link stays FIFO. Once the host
        has stopped they go nowhere, as with the turn's flush (a WAL flush scheduled before the
        stop still runs)."""
        if self._closed:
            return
        outbox = self._outbox
        for host in [h for h in outbox if h != self.host]:
            self._send_frame(host, outbox.pop(host))

    def _send_credit(self, frm: Address, to: Address, amount: int) -> None:
        self._enqueue(to.host, (frm.name, to.name, Credit(amount), 0))

    def _flush(self) -> None:
        self._flush_scheduled = False
        outboxes, self._outbox = self._outbox, {}
        if self._closed:  # what a callback sent while the host stopped goes nowhere
            return
        for host, items in outboxes.items():
            if host != self.host:
                self._send_frame(host, items)
        local = outboxes.get(self.host)
        if local:
            self._dispatch_all(self.host, local)
            self.dispatch_local()

    def dispatch_local(self) -> None:
        """Hand local actors what was sent to them so far, now, and what that sends them in turn
        (up to `local_rounds` times), rather than on the loop's next turn; what goes to other hosts
        still leaves with the turn's flush, in one frame per host. For a callback that has
        finished with its own state (a reader after a read): each loop turn between a publish and
        its delivery costs ~10 us here. Does nothing while local actors are being handed messages:
        what they send waits for that hand-over's next round, so every link stays FIFO."""
        if self._dispatching or self._closed:
            return
        outbox = self._outbox
        for _ in range(local_rounds):
            local = outbox.pop(self.host, None)
            if not local:
                return
            self._dispatch_all(self.host, local)

    def _send_frame(self, host: str, items: list[envelope.Item]) -> None:
        if self._cut_off and host.startswith(self._cut_off):
            return
        endpoint = self.directory.get(host)
        if endpoint is None:
            self._park(host, items)
            return
        assert self._links is not None
        self._links.send(host, endpoint, self._encode(host, items))
        self.frames_sent += 1

    def _park(self, host: str, items: list[envelope.Item]) -> None:
        parked = self._parked.get(host)
        if parked is None:
            parked = self._parked[host] = []
            log.info("runtime.host_not_known_yet", host=self.host, to=host)
            assert self._loop is not None
            self._loop.call_later(PARK_S, self._give_up_parked, host, parked)
        parked.extend(items)

    def _give_up_parked(self, host: str, parked: list[envelope.Item]) -> None:
        """`host` was not learned in PARK_S: what waited for it goes back to its senders as it
        would from a host where its actor does not exist."""
        if self._closed or self._parked.get(host) is not parked:
            return  # learned (and sent) meanwhile
        del self._parked[host]
        log.error("runtime.unknown_host", host=self.host, to=host, undelivered=len(parked), after_s=PARK_S)
        back = []
        for sender, target, msg, credit in parked:
            kind = type(msg)
            if kind is Credit:
                continue
            if credit:
                back.append((target, sender, Credit(credit), 0))
            if kind is not Undelivered:
                back.append((target, sender, Undelivered(msg, False), 0))
        self._dispatch_all(host, back)

    def _encode(self, host: str, items: list[envelope.Item]) -> memoryview:
        frame = envelope.encode(self.host, items, self._frame_bytes.get(host, 0))
        self._frame_bytes[host] = len(frame)
        return frame

    def send_raw(self, host: str, frame: bytes) -> None:
        """One raw frame (its first byte RAW_FRAME) to `host`, a host of this node, now."""
        assert frame[0] == RAW_FRAME and self._links is not None
        if self._cut_off and host.startswith(self._cut_off):
            return
        self._links.send(host, self.directory[host], frame)
        self.frames_sent += 1

    def _frame_arrived(self, frame: Any) -> None:
        """A frame from another host (bytes, or anything with the buffer protocol)."""
        self.frames_received += 1
        if frame[0] == RAW_FRAME:
            if self.raw_handler is None:
                log.warning("runtime.raw_frame_unexpected", host=self.host, size=len(frame))
            else:
                self.raw_handler(frame)
            return
        try:
            source, items = envelope.decode(frame)
        except Exception:
            log.exception("runtime.bad_frame", host=self.host, size=len(frame))
            return
        self._dispatch_all(source, items)

    def _dispatch_all(self, source: str, items: list[envelope.Item]) -> None:
        if self._cut_off and source.startswith(self._cut_off):
            return
        nested, self._dispatching = self._dispatching, True
        try:
            for sender, target, msg, credit in items:
                self._dispatch(Address(source, sender), target, msg, credit)
        finally:
            self._dispatching = nested

    def _dispatch(self, sender: Address, target: str, msg: Any, credit: int) -> None:
        if type(msg) is Credit:
            if msg.link_closed:
                self._sender_closed(target, sender)
            else:
                self._credit_arrived(target, sender, msg.amount)
            return
        actor = self._actors.get(target)
        me = Address(self.host, target)
        if actor is None:
            log.warning("runtime.unknown_actor", host=self.host, actor=target, kind=type(msg).__name__,
                        sender=str(sender))
            if credit:
                self._send_credit(me, sender, credit)
            if type(msg) is not Undelivered:  # tell the sender, so nothing waits for a dead actor's answer
                self._enqueue(sender.host, (target, sender.name, Undelivered(msg, target in self._gone), 0))
            return
        manual = credit and getattr(actor, "manual_credit", False)
        if manual:  # pending before `receive`, which may already say it is done with it
            pending = self._pending.setdefault(target, {})
            pending[sender] = pending.get(sender, 0) + credit
        try:
            actor.receive(sender, msg)
        except Exception:
            log.exception("actor.crashed", actor=str(me), kind=type(msg).__name__, sender=str(sender))
            self.remove(target)  # hands back what is pending, this message's credit included
            if credit and not manual:
                self._send_credit(me, sender, credit)
            return
        if not credit or manual:
            return  # a manual actor that removed itself handed its pending credit back then
        if self._actors.get(target) is not actor:  # removed itself while handling the message
            self._send_credit(me, sender, credit)
        else:
            self.processed(me, sender, credit)

    def _sender_closed(self, target: str, sender: Address) -> None:
        """`sender` was removed: `target` forgets its link from it, at once or, for a manual_credit
        actor that has not yet processed all it took from it, once it has."""
        ledger = self._ledgers.get(target)
        if ledger is None:
            return
        if sender in self._pending.get(target, ()):
            self._closing.setdefault(target, set()).add(sender)
            return
        ledger.sender_closed(sender)

    def _credit_arrived(self, target: str, granter: Address, amount: int) -> None:
        ledger = self._ledgers.get(target)
        if ledger is None:
            return  # the actor is gone; so is its need for credit
        if not ledger.bumped(granter, amount):
            return
        me = Address(self.host, target)
        for link, n in ledger.release_deferred():
            self._send_credit(me, link, n)
        self._observe(target, ledger)
        on_unblocked = getattr(self._actors[target], "on_unblocked", None)
        if on_unblocked is None:
            return
        try:
            on_unblocked()
        except Exception:
            log.exception("actor.crashed", actor=str(me), kind="on_unblocked")
            self.remove(target)

    def _observe(self, name: str, ledger: CreditLedger) -> None:
        flow = self._flow.get(name)
        if flow is not None:
            self._flow[name] = flow.observe(ledger.blocked(), max(monotonic_ms(), flow.changed_at))
