"""Frames between the host processes of one node: Unix stream sockets that the event loop drives.

Why not ZeroMQ inside a node: a ZeroMQ send hands the frame to its context's IO thread, which
writes it to the socket; the receiving context's IO thread reads it and wakes the host's thread.
That is three thread wake-ups per hop where a socket written by the sender's thread and read by
the receiver's event loop needs one. Measured on the 2-core VM (a ping-pong of 100-byte frames
between two processes, 0-5 ms apart): round trip p50 196-329 us over ZeroMQ ipc:// against 33-96
us over a Unix socket pair; traced at 100 msg/s, each of the two hops of a classic queue's publish
-> deliver took ~370 us of the ~2 ms p50. Between nodes ZeroMQ stays (tcp:// with CURVE).

The stream carries the frames back to back with no framing of its own: a frame is one msgpack
object (actors/runtime/envelope.py), which says where it ends, so the receiving end feeds what it
reads to a streaming unpacker and takes out every whole frame.

`Inbox` is the receiving end of one host: it binds its path (a stale socket file left by a host
that died is replaced, as ZeroMQ's ipc:// bind did) and accepts one connection from every host of
the node that sends to it; a connection's frames are handed to `on_frame` in the order they were
written. One connection per pair of hosts keeps every link FIFO, as the runtime requires.

`Pipe` is the sending end towards one host: it connects when first used, and `send` writes at
once from the caller's thread, so a frame is in the receiver's socket before `send` returns
unless the socket's buffer is full; then the rest waits in a backlog, written as the socket
drains. A peer that is not there yet (a host starting or being restarted) is retried every
`retry_s` while the frames wait: a restarting host gets its backlog, as it did with ZeroMQ's
unbounded pipes (credit bounds the data path, not the socket). Frames already written to a host
that died are lost with its socket buffer, as they were with ZeroMQ; a frame it had half read is
sent whole to its successor, which starts a fresh stream.
"""
from __future__ import annotations

import asyncio
import os
import socket
from collections import deque
from collections.abc import Callable
from typing import Any

import structlog

log = structlog.get_logger("warren.runtime")

read_bytes_max = 256 * 1024  # read per readiness callback; the loop comes back for the rest
socket_buffer_bytes = 2 * 1024 * 1024  # a batch of large bodies fits the kernel's buffer in one write
retry_s = 0.05  # how often a pipe retries a peer that is not listening (ZeroMQ's default was 0.1 s)
listen_backlog = 128


class Inbox:
    """The listening end of one host (see the module docstring)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, path: str, unpacker: Callable[[], Any],
                 on_frame: Callable[[Any], None]) -> None:
        """`unpacker()` makes a streaming msgpack Unpacker for one connection; `on_frame` gets
        every unpacked frame."""
        self.path = path
        self._loop = loop
        self._unpacker = unpacker
        self._on_frame = on_frame
        self._conns: dict[socket.socket, Any] = {}
        if os.path.exists(path):
            os.unlink(path)  # a host that died left its socket file
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(listen_backlog)
        listener.setblocking(False)
        self._listener: socket.socket | None = listener
        loop.add_reader(listener.fileno(), self._accept)

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                conn, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            conn.setblocking(False)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, socket_buffer_bytes)
            self._conns[conn] = self._unpacker()
            self._loop.add_reader(conn.fileno(), self._read, conn)

    def _read(self, conn: socket.socket) -> None:
        try:
            data = conn.recv(read_bytes_max)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # the sending host closed its end or died
            self._drop(conn)
            return
        unpacker = self._conns[conn]
        unpacker.feed(data)
        try:
            for frame in unpacker:
                self._on_frame(frame)
        except ValueError:  # not a msgpack stream: nothing after this point can be trusted
            log.exception("runtime.bad_stream", path=self.path)
            self._drop(conn)

    def _drop(self, conn: socket.socket) -> None:
        self._loop.remove_reader(conn.fileno())
        del self._conns[conn]
        conn.close()

    def close(self) -> None:
        for conn in list(self._conns):
            self._drop(conn)
        if self._listener is not None:
            self._loop.remove_reader(self._listener.fileno())
            self._listener.close()
            self._listener = None
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass


class Pipe:
    """The sending end towards one host of this node (see the module docstring)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, path: str) -> None:
        self.path = path
        self._loop = loop
        self._sock: socket.socket | None = None
        self._backlog: deque[memoryview] = deque()  # whole frames; the first may be partly written
        self._written = 0  # bytes of the backlog's first frame already in the socket
        self._retry: asyncio.TimerHandle | None = None
        self._drained: asyncio.Future | None = None
        self.closed = False

    def send(self, frame: memoryview) -> None:
        """Write `frame` now, or as soon as the socket (or the peer) lets us."""
        if self._backlog or self._sock is None:
            self._backlog.append(frame)
            if self._sock is None:
                self._connect()
            return
        try:
            n = self._sock.send(frame)
        except (BlockingIOError, InterruptedError):
            n = 0
        except OSError:  # the peer died: its successor gets this frame whole
            self._backlog.append(frame)
            self._lost()
            return
        if n < len(frame):
            self._backlog.append(frame)
            self._written = n
            self._loop.add_writer(self._sock.fileno(), self._write_backlog)

    def _connect(self) -> None:
        if self._retry is not None or self.closed:
            return  # a retry is due
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.connect(self.path)
        except (FileNotFoundError, ConnectionRefusedError, BlockingIOError, InterruptedError):
            sock.close()  # not listening yet (or its accept queue is full): try again shortly
            self._retry = self._loop.call_later(retry_s, self._retried)
            return
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, socket_buffer_bytes)
        self._sock = sock
        self._written = 0  # a fresh stream: the first frame goes whole
        if self._backlog:
            self._write_backlog()

    def _retried(self) -> None:
        self._retry = None
        if self._backlog and self._sock is None:
            self._connect()

    def _write_backlog(self) -> None:
        sock = self._sock
        assert sock is not None
        backlog = self._backlog
        while backlog:
            frame = backlog[0]
            try:
                n = sock.send(frame[self._written:])
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                self._lost()
                return
            self._written += n
            if self._written < len(frame):
                break  # the socket is full
            backlog.popleft()
            self._written = 0
        if backlog:
            self._loop.add_writer(sock.fileno(), self._write_backlog)
            return
        self._loop.remove_writer(sock.fileno())
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def _lost(self) -> None:
        """The connection broke (the peer host died): reconnect to whoever binds the path next."""
        assert self._sock is not None
        self._loop.remove_writer(self._sock.fileno())
        self._sock.close()
        self._sock = None
        self._written = 0
        log.debug("runtime.pipe_lost", path=self.path, waiting=len(self._backlog))
        if self._backlog:
            self._connect()

    async def close(self, linger_s: float) -> None:
        """Wait up to `linger_s` for the backlog to leave, then close."""
        if self._backlog and self._sock is not None and linger_s > 0:
            self._drained = self._loop.create_future()
            try:
                await asyncio.wait_for(self._drained, linger_s)
            except asyncio.TimeoutError:
                pass
        self.closed = True
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        if self._sock is not None:
            self._loop.remove_writer(self._sock.fileno())
            self._sock.close()
            self._sock = None
