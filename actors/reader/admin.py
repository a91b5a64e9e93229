"""A connection host's admin face: listings of its connections, channels and consumers for
warrenctl, and the actor that closes connections when told (vhost deleted, close_connection).

A shell helper: it reads the readers' state (`ctx.readers`, each reader's `.channels`, each channel's
`.core`) and never changes it except to force a close, which goes through the connection core like
any connection error: connection.close with the given code, then the socket closes on close-ok
(a vhost or a user deleted: "vhost 'v' is deleted", "user 'u' is deleted", 320 as RabbitMQ's
rabbit_connection_tracking closes them). The same actor hears the other connection hosts'
connection and channel counts (`TrackedCounts`, tracking.py).
"""
from __future__ import annotations

from typing import Any

import structlog

from actors.messages.node import CloseConnections, TrackedCounts
from actors.channel.core import OPEN
from actors.reader.core import CLOSED, CLOSING, OPEN_WAIT, START, START_OK, TUNE_OK
from wire.errors import AmqpError

log = structlog.get_logger("warren.conn_admin")


HANDSHAKE_STATES = {START: "starting", START_OK: "starting", TUNE_OK: "tuning", OPEN_WAIT: "opening",
                    CLOSING: "closing", CLOSED: "closed"}


def connection_state(reader: Any) -> str:
    """As rabbitmqctl list_connections shows it (rabbit_reader's i(state)): while an alarm is in
    force, `blocking` (not published since) or `blocked` (reading stopped); otherwise `flow` while
    credit holds it and for a second after, else `running`; the handshake's and closing's states."""
    core = reader.core
    if core is not None and core.state in HANDSHAKE_STATES:
        return HANDSHAKE_STATES[core.state]
    throttle = reader.throttle
    if throttle is not None and throttle.blocked_by:
        return throttle.state()
    return reader.flow.state(reader.host.flow_now())


def list_connections(ctx: Any) -> list[dict]:
    out = []
    for r in sorted(ctx.readers, key=lambda r: r.owner):
        peer = r.transport.get_extra_info("peername") if r.transport is not None else None
        out.append({"name": r.owner, "user": r.opened.user if r.opened else "",
                    "vhost": r.opened.vhost if r.opened else "", "channels": len(r.channels),
                    "state": connection_state(r), "peer_host": peer[0] if peer else "",
                    "peer_port": peer[1] if peer else 0,
                    "ssl": r.transport is not None and r.transport.get_extra_info("ssl_object") is not None})
    return out


def channel_state(ctx: Any, ch: Any) -> str:
    """As rabbitmqctl list_channels shows it: running / flow (out of credit towards a queue now or
    in the last second), or closing."""
    if ch.core.state != OPEN:
        return "closing"
    flow = ctx.runtime.flow_state(ch.address)
    return flow["state"] if flow is not None else "running"


def list_channels(ctx: Any) -> list[dict]:
    out = []
    for r in sorted(ctx.readers, key=lambda r: r.owner):
        for number, ch in sorted(r.channels.items()):
            core = ch.core
            out.append({"connection": r.owner, "name": f"{r.owner} ({number})", "number": number,
                        "state": channel_state(ctx, ch),
                        "user": r.opened.user if r.opened else "", "vhost": r.opened.vhost if r.opened else "",
                        "consumer_count": len(core.consumers), "messages_unacknowledged": len(core.unacked),
                        "confirm": core.confirm is not None,
                        "prefetch_count": getattr(core.qos, "channel_limit", 0) or 0})
    return out


def flow_links(ctx: Any) -> list[dict]:
    """This host's part of the publish chain for `warrenctl flow` (flow/bottleneck.py's Links): each
    open connection (its reader) and its channels, with the queues they send to with credit."""
    out = []
    runtime = ctx.runtime
    now = ctx.flow_now()
    for r in sorted(ctx.readers, key=lambda r: r.owner):
        if r.opened is None or r.closed:
            continue
        channels = [ch for _, ch in sorted(r.channels.items())]
        peer = r.transport.get_extra_info("peername") if r.transport is not None else None
        client = f"{r.opened.user}@{peer[0]}:{peer[1]}" if peer else r.opened.user
        out.append({"kind": "connection", "name": r.owner, "label": f"{r.owner} ({client})",
                    "state": connection_state(r),
                    "downstream": [str(ch.address) for ch in channels],
                    "blocked_on": [str(ch.address) for ch in channels if runtime.blocked(ch.address)],
                    "flow_share": r.flow.flow_share(now), "credit": {}})
        for ch in channels:
            flow = runtime.flow_state(ch.address) or {"credit": {}, "blocked_on": [], "flow_share": 0.0}
            out.append({"kind": "channel", "name": str(ch.address), "label": f"{r.owner} ({ch.core.number})",
                        "state": channel_state(ctx, ch), "downstream": sorted(flow["credit"]),
                        "blocked_on": flow["blocked_on"], "flow_share": flow["flow_share"], "credit": flow["credit"]})
    return out


def list_consumers(ctx: Any) -> list[dict]:
    out = []
    for r in sorted(ctx.readers, key=lambda r: r.owner):
        for number, ch in sorted(r.channels.items()):
            for tag, (queue, ack_required) in sorted(ch.core.consumers.items()):
                vhost = r.opened.vhost if r.opened else ""
                out.append({"queue_name": _queue_name(queue, vhost), "channel_pid": f"{r.owner} ({number})",
                            "consumer_tag": tag, "ack_required": ack_required, "vhost": vhost})
    return out


def _queue_name(queue: Any, vhost: str) -> str:
    """A consumer's queue is held as the queue actor's address, named "q:<vhost>:<name>"."""
    name = getattr(queue, "name", str(queue))
    prefix = f"q:{vhost}:"
    return name[len(prefix):] if name.startswith(prefix) else name


def close_connections(ctx: Any, vhost: str | None, owner: str | None, code: int, detail: str,
                      user: str | None = None) -> int:
    """Close every connection on `vhost` (or the one named `owner`, or every one of `user`) with
    connection.close `code`."""
    closed = 0
    for r in list(ctx.readers):
        if r.closed or r.core is None:
            continue
        if (owner is not None and r.owner != owner) or (vhost is not None and (r.opened is None or r.opened.vhost != vhost)):
            continue
        if user is not None and (r.opened is None or r.opened.user != user):
            continue
        r.channel_error(AmqpError(code, detail, connection=True))
        r.flush_all()
        closed += 1
        log.info("connection.force_closed", owner=r.owner, code=code, detail=detail)
    return closed


class ConnectionAdmin:
    """The actor that takes `CloseConnections` from the node and `TrackedCounts` from the other
    connection hosts (given to `tracking`, a TrackingShell)."""

    def __init__(self, ctx: Any, tracking: Any = None) -> None:
        self.ctx = ctx
        self.tracking = tracking

    def receive(self, sender: Any, msg: CloseConnections | TrackedCounts) -> None:
        if type(msg) is TrackedCounts:
            if self.tracking is not None:
                self.tracking.receive(msg)
            return
        close_connections(self.ctx, msg.vhost, msg.owner, msg.code, msg.text, msg.user)
