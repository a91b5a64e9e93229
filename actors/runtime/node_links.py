"""Frames between hosts of different nodes: TCP streams that the event loop drives, each opened
with a handshake that proves both ends hold the cluster's secret.

Why not ZeroMQ (tcp:// with CURVE, which carried these links until 2026-11-28): a ZeroMQ send
hands the frame to its context's IO thread, which encrypts and writes it; the receiver's IO thread
reads, decrypts and wakes the host's thread: three thread wake-ups per hop on a 2-vCPU machine
where a socket written by the sender's thread and read by the receiver's loop needs one (the step
local_pipes.py took inside a node). Measured (`python -m bench.hop_pingpong`, 100-byte frames):
round trip p50 311 / 762 us over ZeroMQ tcp+CURVE against 53 / 133 us over TCP, 1 / 5 ms apart;
three nodes' quorum hosts at 1,000 msg/s switched context 1,500-2,200 times a second each, and
700-870 times over TCP (bench/RESULTS.md, 2026-11-28 evening).

The frames and their ends are local_pipes.py's (one msgpack object each, back to back; one
stream per pair of hosts, so every link stays FIFO; a `Pipe` keeps a backlog and reconnects). What
TCP adds is the handshake, before any frame, with `key` = cluster_secret.link_key(cookie):

    listener  -> connector: MAGIC | Ns (32 random bytes)
    connector -> listener:  Nc (32 random bytes) | HMAC-SHA256(key, "connector" | Ns | Nc)
    listener  -> connector: HMAC-SHA256(key, "listener" | Nc | Ns)

Each end proves it knows the secret without sending it, and each challenge is fresh, so a recorded
handshake proves nothing later. A listener that gets a wrong proof logs `cluster.peer_refused`
and closes; a connector that gets a wrong proof, or none, logs `runtime.peer_handshake_failed` and
its pipe tries again later; each at most once per `refusal_log_interval_s` per peer (a refused
pipe retries every 50 ms). As Erlang distribution without TLS (RabbitMQ's default between
nodes), the frames after the handshake are not encrypted: the links are for a trusted network.

Without a key (a directory of tcp:// endpoints alone: the Raft and quorum test launchers) there is
no handshake.
"""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import socket
import time

import structlog

from actors.runtime.local_pipes import Admit, Opener

log = structlog.get_logger("warren.runtime")

MAGIC = b"warren-link/1\n"
NONCE_BYTES = 32
MAC_BYTES = 32
connect_timeout_s = 5.0
handshake_timeout_s = 5.0
refusal_log_interval_s = 30.0
TCP = "tcp://"


class LinkRefused(ConnectionError):
    """The peer is not of this cluster (or not a warren link at all)."""


def address(endpoint: str) -> tuple[str, int]:
    """(host, port) of `tcp://HOST:PORT`; a port `*` is 0 (any free port, for a listener)."""
    assert endpoint.startswith(TCP), endpoint
    host, _, port = endpoint[len(TCP):].rpartition(":")
    return host, 0 if port == "*" else int(port)


def listen(endpoint: str) -> tuple[socket.socket, str]:
    """A listening socket bound at `endpoint`, and the endpoint it is reachable at (its real port)."""
    host, port = address(endpoint)
    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restarted node takes its port back
        listener.bind((host, port))
        listener.listen(128)
    except BaseException:
        listener.close()
        raise
    return listener, f"{TCP}{host}:{listener.getsockname()[1]}"


def admit(key: bytes | None, host: str) -> Admit | None:
    """The listener's side of the handshake, for local_pipes.Inbox (None without a key)."""
    if key is None:
        return None
    refusals = _RefusalLog()

    async def handshake(conn: socket.socket) -> bool:
        _nodelay(conn)
        loop = asyncio.get_running_loop()
        ns = secrets.token_bytes(NONCE_BYTES)
        await loop.sock_sendall(conn, MAGIC + ns)
        answer = await _recv_exactly(loop, conn, NONCE_BYTES + MAC_BYTES)
        nc, proof = answer[:NONCE_BYTES], answer[NONCE_BYTES:]
        if not hmac.compare_digest(proof, _mac(key, b"connector", ns, nc)):
            peer = _peer(conn)
            if refusals.due(peer):
                log.warning("cluster.peer_refused", host=host, peer=peer,
                            reason="a peer failed the handshake: not this cluster's secret (cookie)")
            return False
        await loop.sock_sendall(conn, _mac(key, b"listener", nc, ns))
        return True
    return handshake


def opener(endpoint: str, key: bytes | None, host: str) -> Opener:
    """The connector's side, for local_pipes.Pipe: connect to `endpoint` and, with a key, prove it."""
    peer = address(endpoint)
    refusals = _RefusalLog()

    async def open_link() -> socket.socket:
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_INET6 if ":" in peer[0] else socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            _nodelay(sock)
            await asyncio.wait_for(loop.sock_connect(sock, peer), connect_timeout_s)
            if key is not None:
                try:
                    await asyncio.wait_for(_prove(loop, sock, key), handshake_timeout_s)
                except (OSError, asyncio.TimeoutError) as e:
                    if refusals.due(endpoint):
                        log.warning("runtime.peer_handshake_failed", host=host, endpoint=endpoint,
                                    reason=f"refused ({e or type(e).__name__}): is the cluster secret "
                                           f"(cookie) the same on both nodes?")
                    raise LinkRefused(str(e)) from e
        except BaseException:
            sock.close()
            raise
        return sock
    return open_link


async def _prove(loop: asyncio.AbstractEventLoop, sock: socket.socket, key: bytes) -> None:
    hello = await _recv_exactly(loop, sock, len(MAGIC) + NONCE_BYTES)
    if hello[:len(MAGIC)] != MAGIC:
        raise LinkRefused("not a warren link")
    ns, nc = hello[len(MAGIC):], secrets.token_bytes(NONCE_BYTES)
    await loop.sock_sendall(sock, nc + _mac(key, b"connector", ns, nc))
    proof = await _recv_exactly(loop, sock, MAC_BYTES)  # a listener that refused us closed instead
    if not hmac.compare_digest(proof, _mac(key, b"listener", nc, ns)):
        raise LinkRefused("the listener does not hold this cluster's secret")


async def _recv_exactly(loop: asyncio.AbstractEventLoop, sock: socket.socket, n: int) -> bytes:
    got = bytearray()
    while len(got) < n:
        chunk = await loop.sock_recv(sock, n - len(got))
        if not chunk:
            raise ConnectionError("closed during the handshake")
        got += chunk
    return bytes(got)


def _mac(key: bytes, role: bytes, first: bytes, second: bytes) -> bytes:
    return hmac.new(key, role + first + second, hashlib.sha256).digest()


def _nodelay(sock: socket.socket) -> None:
    """Frames are whole batches, written once: Nagle's delay would only hold the last piece back."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _peer(conn: socket.socket) -> str:
    """The peer's address without its port (a new one each time the peer tries again)."""
    try:
        return str(conn.getpeername()[0])
    except OSError:
        return "?"


class _RefusalLog:
    """At most one log line per peer and interval: a refused pipe tries again every 50 ms."""

    def __init__(self) -> None:
        self._last: dict[str, float] = {}

    def due(self, peer: str) -> bool:
        now = time.monotonic()
        if now - self._last.get(peer, float("-inf")) < refusal_log_interval_s:
            return False
        self._last[peer] = now
        return True

