"""The reader: one asyncio Protocol per AMQP connection, and the channel actors it owns.

A shell only. Bytes go through wire.InboundParser; the events go to the ConnectionCore; commands for a
channel go to that channel's ChannelCore (through its ChannelActor, actors/channel/shell.py); effects
come back and are carried out by an Interpreter: frames are written with one `writelines` per
batch, messages leave through the runtime (which batches them per destination host). Everything one `data_received` produced is flushed together, so a burst of
publishes becomes one message per destination queue.

Flow control, from the socket to the queues: publishes are credit-controlled runtime sends. When any
channel of the connection is out of credit towards a queue, the reader stops reading the socket
(TCP back-pressure on the publisher) and resumes when the runtime reports the channel unblocked;
its `FlowState` records the time it spent so (`flow`). Towards the client, `pause_writing` marks the
socket unwritable; channels then stop topping up flow credit for their consumers, so queues stop
delivering until the socket drains.

Resource alarms: from connection.open, the connection's `ConnectionThrottle` (flow/blocking.py)
hears every change of what the cluster is short of (`conserve`, from the host's alarm watcher,
alarms.py) and the first publish read while it is short of something (a content header or body
frame, `published`); its `PauseReading` stops reading the socket too, and connection.blocked goes
to a client that announced the capability. The socket is read while neither credit nor an alarm
holds it; while it is not read, the heartbeat monitor does not count the client's silence.

Moves: a connection adopted through the acceptor may move to another connection host of the node
while it runs, to sit with its queue (actors/reader/mover.py decides and moves at a quiet point;
the reader stops reading for it, `hold`, and lets its channels go once it is gone, `moved_away`).
A reader made with `moved` takes such a connection over: no handshake, its channels as they were,
then what the old host had read and not acted on.

Access: the connection core decides logins and opens with the host's Gatekeeper (login.py); the
shell brings it the facts (the peer's address, the TLS session's verified certificate), counts the
login attempts RabbitMQ's Prometheus endpoint counts (`LoginAttempt`) and logs each refusal at
error level with RabbitMQ's text, and keeps the host's connection and channel counts that the
limits are checked against (tracking.py) as connections open, close and move.

Fairness between the connections of one host: the reader is a BufferedProtocol, so each read's size
is this connection's share of the host (`flow/read_share.py`): 32 KiB while other connections are
sending too; alone, about 128 of the commands it sends (1 KiB publishes: ~135 KiB), at most 256 KiB.
"""
from __future__ import annotations

import asyncio
import ipaddress
import os
import random
import time
from typing import Any, Callable

import structlog

from actors.channel import handover
from actors.channel.core import CLOSED, ChannelCore, consumer_timeout_default_ms
from actors.channel.publish_checks import MAX_MESSAGE_SIZE_DEFAULT, effective_max_message_size
from actors.channel.shell import ChannelActor
from actors.messages.node import ConnectionClosed, QueueHostRestarted, QueuesGone
from actors.stats.counters import add_exchange_counts, add_into
from actors.reader.core import ConnectionCore, Settings
from actors.reader.handover import MovedConnection
from actors.reader.login import Peer
from actors.reader.tracking import Tracking
from actors.reader.mover import Motion, Mover
from actors.runtime.address import Address
from effects import (ChannelsDown, CloseSocket, LoginAttempt, Opened, OpenChannel, PauseReading, ResumeReading,
                     SetFrameMax, ToChannel, Write)
from effects.interpreter import Interpreter
from flow.blocking import ConnectionThrottle
from flow.read_share import ReadBudget, ReadShare
from flow.state import FlowState
from metadata.access import may_impersonate
from wire.errors import INTERNAL_ERROR, AmqpError
from wire import methods as m
from wire.inbound import Command, InboundParser

log = structlog.get_logger("warren.reader")

FLOW_TICKS_PER_SECOND = 1000


def is_loopback(peer: Any) -> bool:
    try:
        return ipaddress.ip_address(peer[0]).is_loopback
    except (TypeError, ValueError, IndexError):
        return False


class Reader(asyncio.BufferedProtocol):
    def __init__(self, host: "ConnectionHostContext", on_lost: Callable[[], None] | None = None,
                 moved: MovedConnection | None = None) -> None:
        """`on_lost`: called once the connection is gone (the acceptor's count of what it serves);
        only such a connection may move between hosts (actors/reader/mover.py). `moved`: the
        state of a running connection another host sent with its socket."""
        self.host = host
        self._on_lost = on_lost
        self._mover = host.mover if on_lost is not None else None
        self._moved = moved
        self.motion: Motion | None = None  # the mover's record of this connection
        self.held = False  # reading stopped for a move waiting for its quiet point
        self.bytes_in = 0
        self.owner = host.next_owner()
        self.transport: asyncio.Transport | None = None
        self.parser = InboundParser(host.settings.frame_max)
        self.read_budget = ReadBudget()  # how much it reads while alone on the host
        self.core: ConnectionCore | None = None
        self.channels: dict[int, ChannelActor] = {}
        self.opened: Opened | None = None
        self.writable = True
        self.paused = False  # by credit: a channel is out of credit towards a queue
        self.throttle: ConnectionThrottle | None = None  # from connection.open: the resource alarms
        self.reading = True  # what the transport was last told
        self.flow = FlowState(FLOW_TICKS_PER_SECOND, changed_at=host.flow_now())
        self.closed = False
        self.tracked = False  # counted among the host's open connections (tracking.py)
        self.connected_at = 0  # ms since the epoch, as the management API reports it
        self._apply = Interpreter({
            ToChannel: self._to_channel, Write: self.write, OpenChannel: self._open_channel,
            ChannelsDown: lambda _: self._channels_down(), CloseSocket: self._close_socket, Opened: self._opened,
            SetFrameMax: self._set_frame_max, PauseReading: lambda _: self._alarm_blocked(True),
            ResumeReading: lambda _: self._alarm_blocked(False), LoginAttempt: self._login_attempt})

    # ------------------------------------------------------------------ asyncio callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.connected_at = time.time_ns() // 1_000_000
        peer = transport.get_extra_info("peername")
        tls = transport.get_extra_info("ssl_object")  # a TLS session, its handshake done
        self.core = ConnectionCore(self.host.settings, check_login=self.host.check_login,
                                   peer_is_loopback=is_loopback(peer), vhost_exists=self.host.vhost_exists,
                                   peer=Peer(is_loopback(peer), tls is not None,
                                             tls.getpeercert(binary_form=True) if tls is not None else None))
        self.host.readers.add(self)
        if self._moved is None:
            log.info("connection.accepted", owner=self.owner, peer=str(peer))
        else:
            self._resume(self._moved)

    def _resume(self, moved: MovedConnection) -> None:
        """Take over a running connection another host moved here: as it was there, then on from
        what that host had read and not acted on."""
        self._moved = None
        self.connected_at = moved.connected_at
        self.motion = Motion(self.host.settings.ticks_per_second, moved=True)
        self.parser.resume()
        self._apply(self.core.resume(moved.user, moved.vhost, moved.frame_max, moved.channel_max, moved.heartbeat,
                                     moved.client_properties, [c.number for c in moved.channels], moved.tags))
        for c in moved.channels:
            self._open_channel(OpenChannel(c.number))
            handover.resume(self.channels[c.number].core, c)
        log.info("connection.resumed", owner=self.owner, was=moved.was, channels=len(moved.channels), leftover=len(moved.leftover))
        if moved.leftover:
            self.data_received(moved.leftover)

    def get_buffer(self, sizehint: int) -> memoryview:
        # the host's one read buffer (the loop reads one socket at a time and copies out below),
        # cut to this connection's share of the host (flow/read_share.py)
        host = self.host
        return host.read_buffer[:host.read_share.size(self, host.clock(), self.read_budget.size())]

    def buffer_updated(self, nbytes: int) -> None:
        host = self.host
        host.read_share.read(self, host.clock())
        self.bytes_in += nbytes
        self.data_received(bytes(host.read_buffer[:nbytes]))
        host.runtime.dispatch_local()  # the channels' sends to local queues, and what they cause, now

    def data_received(self, data: bytes) -> None:
        core = self.core
        mover = self._mover
        try:
            events = self.parser.receive_data(data)
            self.read_budget.read(len(data), len(events))
            for i, event in enumerate(events):
                if (mover is not None and type(event) is Command and type(event.method) is m.BasicConsume
                        and mover.before_consume(self, events[i:])):
                    return
                self._apply(core.receive(event))
                if self.closed:
                    return
            throttle = self.throttle
            if throttle is not None and throttle.blocked_by and not throttle.blocked and self._published(events):
                self._apply(throttle.published())
            self.flush_all()
        except Exception:  # a bug must cost this connection only, never the host
            self.internal_error()

    def internal_error(self) -> None:
        log.exception("connection.internal_error", owner=self.owner)
        if self.closed:
            return
        try:
            self._apply(self.core.channel_error(AmqpError(INTERNAL_ERROR, "internal error", connection=True)))
            self.flush_all()
        finally:
            self._shutdown("internal error")

    def _published(self, events: list) -> bool:
        """Whether this read held a publish's content (RabbitMQ blocks on its header or body frame)."""
        return self.parser.content_pending() or any(type(e) is Command and e.header is not None for e in events)

    def conserve(self, resource: str, on: bool) -> None:
        """The cluster's alarm for `resource` is now in force, or over (the host's alarm watcher)."""
        if self.throttle is not None and not self.closed:
            self._apply(self.throttle.conserve(resource, on))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed:
            self._shutdown("client closed the socket" if exc is None else str(exc))
        self.host.readers.discard(self)
        if self._on_lost is not None:
            self._on_lost()

    def pause_writing(self) -> None:
        self.writable = False

    def resume_writing(self) -> None:
        self.writable = True
        self.flush_all()

    # ------------------------------------------------------------------ effects
    def write(self, e: Write) -> None:
        if self.transport is not None and not self.closed:
            self.transport.writelines(e.chunks)
            self.core.sent()
            if self.held:  # a move waits for its quiet point: after this flush may be one
                asyncio.get_running_loop().call_soon(self._mover.try_move, self)

    def _to_channel(self, e: ToChannel) -> None:
        ch = self.channels.get(e.number)
        if ch is not None:
            ch.core.command(e.command)
            if ch.core.state == CLOSED:  # free the number now: the client may reopen it next
                ch.flush()

    def _close_socket(self, e: CloseSocket) -> None:
        self.flush_all()
        self._shutdown(e.reason)

    def _opened(self, e: Opened) -> None:
        self.opened = e
        self.throttle = ConnectionThrottle.for_client(frozenset(self.host.resources), e.capabilities)
        self.tracked = True
        self.host.tracking.opened(e.vhost, e.user)
        self.host.counts_changed()
        log.info("connection.opened", owner=self.owner, user=e.user, vhost=e.vhost)

    def _login_attempt(self, e: LoginAttempt) -> None:
        """Counted as rabbit_core_metrics counts auth attempts; a refusal logged as rabbit_reader
        logs it ("Error on AMQP connection ... state: starting" and the reason)."""
        self.host.login_attempts["succeeded" if e.succeeded else "failed"] += 1
        if not e.succeeded:
            peer = self.transport.get_extra_info("peername") if self.transport is not None else None
            local = self.transport.get_extra_info("sockname") if self.transport is not None else None
            log.error("connection.login_refused", owner=self.owner, user=e.user, state="starting",
                      connection=f"{_endpoint(peer)} -> {_endpoint(local)}", reason=e.reason)

    def _set_frame_max(self, e: SetFrameMax) -> None:
        self.parser.frame_max = e.frame_max

    def channel_error(self, error: Any) -> None:
        """A channel found a connection-level error: the connection closes with it."""
        self._apply(self.core.channel_error(error))

    def _open_channel(self, e: OpenChannel) -> None:
        number = e.number
        o = self.opened
        host = self.host
        name = host.next_channel_name()
        address = Address(host.runtime.host, name)
        core = ChannelCore(number, vhost=o.vhost, owner=self.owner, router=host.registry,
                           place=host.place, node=host.node, frame_max=o.frame_max,
                           capabilities=o.capabilities, rng=host.rng, user=o.user, address=address,
                           parse_address=Address.parse, consumer_timeout_ms=host.consumer_timeout_ms,
                           ticks_per_second=host.settings.ticks_per_second,
                           max_message_size=host.max_message_size, impersonator=may_impersonate(o.tags))
        host.tracking.channel_opened(o.user)
        host.counts_changed()
        core.nodes_down(host.down_nodes)
        actor = ChannelActor(self, core, address, host.runtime)
        self.host.runtime.spawn(name, actor)
        self.channels[number] = actor

    def forget_channel(self, ch: ChannelActor) -> None:
        if self.channels.get(ch.core.number) is ch:
            del self.channels[ch.core.number]
            self.host.tracking.channel_closed(ch.core.user)
            self.host.counts_changed()
            self.core.channel_finished(ch.core.number)
            add_into(self.host.retired, ch.core.message_stats())  # node-wide totals never go back
            add_exchange_counts(self.host.retired_exchanges, ch.core.vhost, ch.core.exchange_counts)
        self.host.runtime.remove(ch.address.name)

    def _channels_down(self) -> None:
        for ch in list(self.channels.values()):
            ch.core.connection_closed()
            ch.flush()
            self.forget_channel(ch)

    def flush_all(self) -> None:
        for ch in list(self.channels.values()):
            ch.flush()
        self._check_blocked()

    def _check_blocked(self) -> None:
        if self.paused or self.transport is None or self.closed:
            return
        runtime = self.host.runtime
        if any(runtime.blocked(ch.address) for ch in self.channels.values()):
            self._credit_blocked(True)

    def maybe_resume(self) -> None:
        if not self.paused or self.closed:
            return
        runtime = self.host.runtime
        if not any(runtime.blocked(ch.address) for ch in self.channels.values()):
            self._credit_blocked(False)

    def _credit_blocked(self, blocked: bool) -> None:
        self.paused = blocked
        now = self.host.flow_now()
        self.flow = self.flow.observe(blocked, max(now, self.flow.changed_at))
        self._update_reading()

    def _alarm_blocked(self, blocked: bool) -> None:
        now = self.host.flow_now()
        self.flow = self.flow.alarm(blocked, max(now, self.flow.changed_at))
        self._update_reading()

    def hold(self, held: bool) -> None:
        """Stop reading for a move, or read again (the mover's)."""
        self.held = held
        self._update_reading()

    def moved_away(self) -> None:
        """The connection went to another host with its socket: let its channels go as a closed
        connection's would, tell nobody else, and drop this host's copy of the descriptor."""
        self._channels_down()
        self._untrack()
        self.closed = True
        self.transport.abort()

    def _untrack(self) -> None:
        if self.tracked:
            self.tracked = False
            self.host.tracking.closed(self.opened.vhost, self.opened.user)
            self.host.counts_changed()

    def _update_reading(self) -> None:
        """Read the socket while neither credit nor an alarm holds this connection, nor a move."""
        reading = not self.paused and not self.held and not (self.throttle is not None and self.throttle.blocked)
        if reading == self.reading or self.transport is None or self.closed:
            return
        self.reading = reading
        if reading:
            self.transport.resume_reading()
        else:
            self.transport.pause_reading()

    def tick(self) -> None:
        if self.core is not None and not self.closed:
            self._apply(self.core.tick(reading=self.reading))
            if self._mover is not None and self.opened is not None and not self.closed:
                self._mover.tick_reader(self)
        for ch in list(self.channels.values()):
            if self.closed:
                return
            ch.core.tick()
            ch.flush()

    def _shutdown(self, reason: str) -> None:
        if self.closed:
            return
        self._channels_down()
        self._untrack()
        self.closed = True
        if self.transport is not None:
            self.transport.close()
        self.host.runtime.send(self.host.node, ConnectionClosed(self.owner), sender=self.host.router_address)
        log.info("connection.closed", owner=self.owner, reason=reason)


class ConnectionHostContext:
    """What every reader of one connection host shares."""

    def __init__(self, runtime: Any, registry: Any, place: Callable[[str, str], Address], settings: Settings,
                 check_login: Callable[[str, str], bool], vhost_exists: Callable[[str], bool],
                 router_address: Address, node: Address, seed: int | None = None,
                 consumer_timeout_ms: int | None = consumer_timeout_default_ms,
                 max_message_size: int = MAX_MESSAGE_SIZE_DEFAULT, incarnation: int | None = None,
                 tracking: Tracking | None = None) -> None:
        self.runtime = runtime
        self.node = node  # this node's node core
        self.down_nodes: frozenset[str] = frozenset()  # the nodes the cluster sees down, for new channels
        self.max_message_size = effective_max_message_size(max_message_size)
        self.consumer_timeout_ms = consumer_timeout_ms
        self.registry = registry
        self.place = place
        self.settings = settings
        self.check_login = check_login
        self.vhost_exists = vhost_exists
        self.router_address = router_address
        self.rng = random.Random(seed)
        self.readers: set[Reader] = set()
        self.retired: dict[str, int] = {}  # message counters of the channels that are gone
        self.retired_exchanges: dict[tuple[str, str], list[int]] = {}  # and their exchange counts
        self.read_share = ReadShare()
        self.read_buffer = memoryview(bytearray(self.read_share.solo_bytes))
        self.clock = time.monotonic  # what the event loop's clock reads too
        self.resources: set[str] = set()  # what the cluster is short of (resource alarms in force)
        self.mover: Mover | None = None  # set by the host when connections may move between hosts
        # the cluster's connections and channels, for the limits (the Gatekeeper reads it)
        self.tracking = tracking if tracking is not None else Tracking(runtime.host)
        self.counts_changed: Callable[[], None] = lambda: None  # the host tells the others (tracking.py)
        self.login_attempts = {"succeeded": 0, "failed": 0}  # rabbit_core_metrics' auth attempts
        self._owners = 0
        self._channels = 0
        # names connections and channels; the node's replica subscribes with it, so the node can tell
        # this process's channels from an earlier one's (quorum queues give those back)
        self.incarnation = int.from_bytes(os.urandom(6), "big") if incarnation is None else incarnation

    @property
    def connections_opened(self) -> int:
        return self._owners

    @property
    def channels_opened(self) -> int:
        return self._channels

    def flow_now(self) -> int:
        """Flow-state ticks: milliseconds of the monotonic clock, as the runtime's."""
        return int(self.clock() * FLOW_TICKS_PER_SECOND)

    def conserve(self, resource: str, on: bool) -> None:
        """Some node's alarm for `resource` is now in force, or none is any more: tell every connection."""
        (self.resources.add if on else self.resources.discard)(resource)
        for reader in list(self.readers):
            reader.conserve(resource, on)
            reader.flush_all()

    def next_owner(self) -> str:
        """A connection's name, unique across this host's restarts (its exclusive queues are
        owned by it, and must not pass to a connection of the next incarnation)."""
        self._owners += 1
        return f"{self.runtime.host}:{self.incarnation:x}.{self._owners}"

    def next_channel_name(self) -> str:
        """A channel's actor name, unique across this host's restarts (quorum queue members
        remember which channels are gone)."""
        self._channels += 1
        return f"ch:{self.incarnation:x}.{self._channels}"

    def channels(self):
        for reader in list(self.readers):
            yield from list(reader.channels.values())


def _endpoint(address: Any) -> str:
    return f"{address[0]}:{address[1]}" if address else "?"


def tell_channels_host_restarted(ctx: ConnectionHostContext) -> Callable[[Address, str], None]:
    """The replica's on_host_restarted: every channel learns that a queue host lost its state, and
    the credit lent to its actors comes back (what its dead incarnation took in and never granted
    back would otherwise be lost for good: a publisher's channel went out of credit towards a
    quorum host killed twice)."""
    def on_host_restarted(sender: Address, host: str) -> None:
        ctx.runtime.peers_down({host})
        for ch in ctx.channels():
            ch.receive(sender, QueueHostRestarted(host))
    return on_host_restarted


def tell_channels(ctx: ConnectionHostContext) -> Callable[[Address, list, list[Address]], None]:
    """The replica's on_change for a connection host: channels learn of deleted queues (their
    pending confirms for those queues are settled). Their permission caches stand, as
    rabbit_channel's do (actors/channel/permissions.py)."""
    def on_change(sender: Address, changes: list, gone: list[Address]) -> None:
        if gone:
            for ch in ctx.channels():
                ch.receive(sender, QueuesGone(gone))
    return on_change


def tell_channels_nodes(ctx: ConnectionHostContext) -> Callable[[list[str], list[str]], None]:
    """The cluster view's on_nodes for a connection host: every channel learns which nodes are down;
    what was in flight to their queues is lost, as when a queue host restarts."""
    def on_nodes(up: list[str], down: list[str]) -> None:
        ctx.down_nodes = frozenset(down)
        for ch in ctx.channels():
            ch.core.nodes_down(ctx.down_nodes)
            ch.flush()
    return on_nodes
