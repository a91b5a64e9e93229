"""The ZeroMQ sockets of one host: where its frames arrive and how they leave for other hosts.

Theory of operation. A host binds one PULL socket on its own endpoint (`ipc://PATH` on its node,
or a bare `tcp://` one in the Raft and quorum test launchers) and, when other nodes reach it,
one more on tcp:// as a CURVE server (curve.py). Towards every host it sends to it keeps one PUSH
socket, connected to that host's endpoint when first used; a frame is one whole batch (one
envelope, envelope.py) and one ZeroMQ message. One PUSH socket per destination host and one
PULL socket per bind keep frames in order per (source host, destination host), which the
runtime relies on; the PULL socket only fair-queues between sources.

What the sockets are set to, and why:
- SNDHWM = RCVHWM = 0 (no limit): credit (flow/credit.py) bounds what is in flight on the data
  path, and a frame is never dropped or refused for a full queue.
- ZMQ_IMMEDIATE off (the default): a PUSH socket queues frames for a peer that is not there yet
  (a host starting) or has gone (a host restarting). libzmq keeps the pipe of a connecting
  socket across reconnects, so the successor that binds the same endpoint gets what waited, in
  order; frames already written into the dead process's socket buffer die with it, as they
  would with any stream.
- reconnect every `reconnect_ivl_ms` (ipc: a restarting host is back within a second or two),
  backing off to `reconnect_ivl_max_ms` between nodes, so a refused node is not hammered.
- ZMQ heartbeats between nodes (`heartbeat_ivl_ms` / `heartbeat_timeout_ms`): a peer whose
  machine vanished without a FIN is noticed, the connection dropped and re-made, so frames go
  to its successor instead of into a dead TCP connection. Node liveness itself is the
  membership's (actors/cluster), which pings over these very links.
- LINGER: `close_linger_ms` when the host stops (what was sent should leave), 0 when a peer's
  endpoint changed (its node restarted elsewhere; the old one is gone).
- TCP_NODELAY is ZeroMQ's default; one io thread per host (its default).

Receiving: each PULL socket's ZMQ_FD is watched with `loop.add_reader`. That descriptor signals
edge-triggered and only says "look at ZMQ_EVENTS", so on every wake-up the socket is drained with
NOBLOCK while ZMQ_EVENTS says POLLIN (asking EVENTS before each recv is cheaper than a recv that
raises zmq.Again), at most `recv_frames_max` frames before the loop gets a turn (then the drain
is called again soon). Frames are received as bytes (copied once out of libzmq's message): for
the small frames of a low rate that is 2-3 µs cheaper than a zmq.Frame lending its buffer, and a
large batch's copy is a fraction of a µs per message in it. They are sent as the encoder's
buffer with copy=False, which pyzmq copies below its 64 KiB copy_threshold and sends without a
copy above. Measured against zmq.asyncio and a poller, and the copies: bench/RESULTS.md,
2026-12-02.

Every PUSH socket and the CURVE server are watched by a monitor (events only: nothing on the data
path), so a peer that went away is logged (`runtime.peer_disconnected`, debug) and a refused
handshake between nodes is logged on this side too (curve.py says what each side sees), at most
once per interval per peer.

A handshake that fails on a protocol or authentication error (whatever answered at the endpoint
was not a CURVE server of this cluster: a stranger on the port while its host was away, a ZAP
refusal) ends libzmq's session for good: that PUSH socket never connects again, and everything
sent to the host afterwards would queue in it for ever (measured with libzmq 4.3.5). A node host's
endpoint never changes, so nothing else would ever replace that socket: its peer would not hear
from this host again (and once libzmq has dropped the session's pipe, a send to it raises EAGAIN,
which made the runtime's whole flush fail). So such a socket is replaced by a new one towards the
same endpoint `reconnect_ivl_max_ms` after the failure, or at once when a frame finds it without a
pipe (what waited in the old one is dropped, as with a connection that died). Not always for good,
though: seen here under load, the same stranger can leave libzmq reconnecting on its own, and the
frames that waited then reach the host that binds the endpoint next. A socket that completes a
handshake before its renewal is due is therefore kept (`_failed`): replacing a working link would
drop what is in flight on it.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import structlog
import zmq
import zmq.utils.monitor

from actors.runtime.curve import CurveKeys, RefusalLog, start_authenticator

log = structlog.get_logger("warren.runtime")

IPC = "ipc://"
TCP = "tcp://"
POLLIN = int(zmq.POLLIN)  # a plain int: `events & zmq.POLLIN` builds an enum member each time
recv_frames_max = 256  # frames drained per wake-up before other callbacks get a turn
close_linger_ms = 1000  # how long a stopping host waits for queued frames to leave
reconnect_ivl_ms = 50
reconnect_ivl_max_ms = 2000  # between nodes: a refused or absent peer is retried less and less often
heartbeat_ivl_ms = 1000
heartbeat_timeout_ms = 5000
_watched_events = (zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                   | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED)
_final_failures = (zmq.EVENT_HANDSHAKE_FAILED_AUTH, zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL)  # libzmq gives up on these


class Links:
    """A host's PULL sockets, its PUSH sockets by destination host, and their monitors."""

    def __init__(self, loop: asyncio.AbstractEventLoop, host: str, on_frame: Callable[[bytes], None],
                 keys: CurveKeys | None = None) -> None:
        """`on_frame` gets every frame that arrives; `keys`: CURVE between nodes (None: no tcp
        socket of this host is encrypted, as in the test launchers' bare tcp:// directories)."""
        self._loop = loop
        self._host = host
        self._on_frame = on_frame
        self._keys = keys
        self._ctx = zmq.Context()
        self._auth = start_authenticator(self._ctx, keys, host) if keys is not None else None
        self._pulls: list[zmq.Socket] = []
        self._push: dict[str, zmq.Socket] = {}
        self._monitors: dict[zmq.Socket, zmq.Socket] = {}  # watched socket -> its monitor
        self._failed: set[zmq.Socket] = set()  # outgoing sockets whose last handshake failed for good
        self._refusals = RefusalLog()

    def bind(self, endpoint: str, *, curve: bool = False) -> str:
        """Receive on `endpoint` (a tcp port `*` takes any free one); returns where it is bound.
        `curve`: a CURVE server that admits only the cluster (needs `keys`)."""
        pull = self._ctx.socket(zmq.PULL)
        pull.setsockopt(zmq.RCVHWM, 0)
        pull.setsockopt(zmq.LINGER, 0)
        if curve:
            assert self._keys is not None
            self._keys.make_server(pull)
            self._heartbeat(pull)
            self._watch(pull, endpoint, incoming=True)
        pull.bind(endpoint)
        self._pulls.append(pull)
        self._loop.add_reader(pull.getsockopt(zmq.FD), self._drain, pull)
        self._loop.call_soon(self._drain, pull)  # frames may have queued before the reader was added
        return pull.getsockopt_string(zmq.LAST_ENDPOINT)

    def send(self, host: str, endpoint: str, frame: Any) -> None:
        """Queue `frame` (bytes or a buffer) for `host` at `endpoint`; never blocks."""
        sock = self._push.get(host)
        if sock is None:
            sock = self._push[host] = self._connect(host, endpoint)
        try:
            sock.send(frame, zmq.NOBLOCK, copy=False)
        except zmq.Again:  # its session ended on a failed handshake (see above): no pipe to queue in
            self._renew(host, sock, endpoint)
            self._push[host].send(frame, zmq.NOBLOCK, copy=False)

    def forget(self, host: str) -> None:
        """`host` moved to another endpoint: drop the socket towards the old one."""
        sock = self._push.pop(host, None)
        if sock is not None:
            self._close(sock, 0)

    def close(self) -> None:
        """Close every socket (queued frames get `close_linger_ms` to leave) and the context."""
        for pull in self._pulls:
            self._loop.remove_reader(pull.getsockopt(zmq.FD))
            self._close(pull, 0)
        self._pulls.clear()
        for sock in self._push.values():
            self._close(sock, close_linger_ms)
        self._push.clear()
        if self._auth is not None:
            self._auth.stop()
            self._auth = None
        self._ctx.term()

    def _connect(self, host: str, endpoint: str) -> zmq.Socket:
        sock = self._ctx.socket(zmq.PUSH)
        sock.setsockopt(zmq.SNDHWM, 0)
        sock.setsockopt(zmq.RECONNECT_IVL, reconnect_ivl_ms)
        if endpoint.startswith(TCP) and self._keys is not None:
            self._keys.make_client(sock)
            self._heartbeat(sock)
            sock.setsockopt(zmq.RECONNECT_IVL_MAX, reconnect_ivl_max_ms)
        self._watch(sock, endpoint, incoming=False, host=host)
        sock.connect(endpoint)
        return sock

    def _renew_failed(self, host: str, sock: zmq.Socket, endpoint: str) -> None:
        """The renewal due after a failed handshake, unless the socket got through since."""
        if sock in self._failed:
            self._renew(host, sock, endpoint)

    def _renew(self, host: str, sock: zmq.Socket, endpoint: str) -> None:
        """`sock`'s handshake failed for good (see above): a new socket towards `endpoint`, unless
        the host was forgotten or moved (or the links closed) meanwhile."""
        self._failed.discard(sock)
        if self._push.get(host) is not sock:
            return
        log.info("runtime.link_renewed", host=self._host, to=host, endpoint=endpoint)
        self._close(sock, 0)
        self._push[host] = self._connect(host, endpoint)

    @staticmethod
    def _heartbeat(sock: zmq.Socket) -> None:
        sock.setsockopt(zmq.HEARTBEAT_IVL, heartbeat_ivl_ms)
        sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, heartbeat_timeout_ms)

    def _close(self, sock: zmq.Socket, linger_ms: int) -> None:
        self._failed.discard(sock)
        monitor = self._monitors.pop(sock, None)
        if monitor is not None:
            self._loop.remove_reader(monitor.getsockopt(zmq.FD))
            sock.disable_monitor()
            monitor.close(linger=0)
        sock.close(linger=linger_ms)

    def _drain(self, pull: zmq.Socket) -> None:
        if pull.closed:
            return
        for _ in range(recv_frames_max):
            # ZMQ_FD is edge-triggered, and libzmq may take in input while it processes its own
            # commands (a peer's pipe attaching, say) without a fresh edge: ZMQ_EVENTS says
            # whether a frame is there, so none waits for unrelated traffic to wake the loop
            if not pull.getsockopt(zmq.EVENTS) & POLLIN:
                return
            try:
                frame = pull.recv(zmq.NOBLOCK)
            except zmq.Again:
                continue  # EVENTS is asked again
            self._on_frame(frame)
        self._loop.call_soon(self._drain, pull)  # more may be waiting; let other callbacks run first

    # -- refused handshakes between nodes -------------------------------------------------------
    def _watch(self, sock: zmq.Socket, endpoint: str, *, incoming: bool, host: str = "") -> None:
        """`host`: the destination of an outgoing socket (renewed when its handshake fails for good)."""
        monitor = sock.get_monitor_socket(_watched_events)
        self._monitors[sock] = monitor
        args = (monitor, endpoint, incoming, host, sock)
        self._loop.add_reader(monitor.getsockopt(zmq.FD), self._read_monitor, *args)
        self._loop.call_soon(self._read_monitor, *args)  # edge-triggered, as above

    def _read_monitor(self, monitor: zmq.Socket, endpoint: str, incoming: bool, host: str,
                      sock: zmq.Socket) -> None:
        while not monitor.closed and monitor.getsockopt(zmq.EVENTS) & POLLIN:
            try:
                event = zmq.utils.monitor.recv_monitor_message(monitor, zmq.NOBLOCK)
            except zmq.Again:
                continue
            # incoming, libzmq's event names our bind, not the peer: one line per interval for all
            peer = event["endpoint"].decode(errors="replace") if incoming else endpoint
            if event["event"] == zmq.EVENT_DISCONNECTED:
                log.debug("runtime.peer_disconnected", host=self._host, endpoint=peer, incoming=incoming)
                continue
            if event["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                log.debug("runtime.peer_connected", host=self._host, endpoint=peer, incoming=incoming)
                self._refusals.forget(peer)
                self._failed.discard(sock)
                continue
            if not incoming and event["event"] in _final_failures:
                self._failed.add(sock)
                self._loop.call_later(reconnect_ivl_max_ms / 1000, self._renew_failed, host, sock, endpoint)
            attempts = self._refusals.due(peer)
            if not attempts:
                continue
            if incoming:
                log.warning("cluster.peer_refused", host=self._host, endpoint=peer, attempts=attempts,
                            reason="a peer failed the CURVE handshake: not this cluster's cookie")
            else:
                log.warning("runtime.peer_handshake_failed", host=self._host, endpoint=peer, attempts=attempts,
                            reason="refused: is the cluster's cookie the same on both nodes?")
