"""Frames between host processes: stream sockets that the event loop drives (Unix sockets between
the hosts of one node here; TCP between nodes uses the same ends, opened by node_links.py).

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
that died is replaced, as ZeroMQ's ipc:// bind did), or listens on a socket it is given, and
accepts one connection from every host that sends to it; with `admit` (node_links.py's handshake)
a connection is read only once it passed it. A connection's frames are handed to `on_frame` in the
order they were written. One connection per pair of hosts keeps every link FIFO, as the runtime
requires.

`Pipe` is the sending end towards one host: it connects when first used (to a Unix path at
once, or through an `Opener` task that returns a connected socket), and `send` writes at
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
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

log = structlog.get_logger("warren.runtime")

read_bytes_max = 256 * 1024  # read per readiness callback; the loop comes back for the rest
socket_buffer_bytes = 2 * 1024 * 1024  # a batch of large bodies fits the kernel's buffer in one write
retry_s = 0.05  # how often a pipe retries a peer that is not listening (ZeroMQ's default was 0.1 s)
listen_backlog = 128
admit_timeout_s = 5.0  # a connection that has not passed `admit` by then is closed

Opener = Callable[[], Awaitable[socket.socket]]  # a connected socket, or OSError: try again later
Admit = Callable[[socket.socket], Awaitable[bool]]  # whether an accepted connection may send frames


class Inbox:
    """The listening end of one host (see the module docstring)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, where: str | socket.socket, unpacker: Callable[[], Any],
                 on_frame: Callable[[Any], None], admit: Admit | None = None) -> None:
        """`where`: a Unix path to bind, or a listening socket; `unpacker()` makes a streaming
        msgpack Unpacker for one connection; `on_frame` gets every unpacked frame."""
        self.path = where if isinstance(where, str) else None
        self._loop = loop
        self._unpacker = unpacker
        self._on_frame = on_frame
        self._admit = admit
        self._admitting: set[asyncio.Task] = set()
        self._conns: dict[socket.socket, Any] = {}
        # one read buffer for every connection: the unpacker copies what it is fed. recv(n) would
        # allocate n bytes per read and shrink them (12-13 us for a 256 KiB read of a 1 KiB frame
        # here, against 2 for recv_into: glibc maps and unmaps an allocation that large)
        self._buffer = memoryview(bytearray(read_bytes_max))
        if isinstance(where, str):
            if os.path.exists(where):
                os.unlink(where)  # a host that died left its socket file
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(where)
            listener.listen(listen_backlog)
        else:
            listener = where
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
            if self._admit is None:
                self._open(conn)
            else:
                task = self._loop.create_task(self._admitted(conn))
                self._admitting.add(task)
                task.add_done_callback(self._admitting.discard)

    async def _admitted(self, conn: socket.socket) -> None:
        assert self._admit is not None
        try:
            ok = await asyncio.wait_for(self._admit(conn), admit_timeout_s)
        except (OSError, asyncio.TimeoutError):
            ok = False
        except asyncio.CancelledError:
            conn.close()
            raise
        if ok and self._listener is not None:
            self._open(conn)
        else:
            conn.close()

    def _open(self, conn: socket.socket) -> None:
        self._conns[conn] = self._unpacker()
        self._loop.add_reader(conn.fileno(), self._read, conn)

    def _read(self, conn: socket.socket) -> None:
        try:
            n = conn.recv_into(self._buffer)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            n = 0
        if not n:  # the sending host closed its end or died
            self._drop(conn)
            return
        unpacker = self._conns[conn]
        unpacker.feed(self._buffer[:n])
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
        for task in list(self._admitting):
            task.cancel()
        for conn in list(self._conns):
            self._drop(conn)
        if self._listener is not None:
            self._loop.remove_reader(self._listener.fileno())
            self._listener.close()
            self._listener = None
            if self.path is not None:
                try:
                    os.unlink(self.path)
                except FileNotFoundError:
                    pass


class Pipe:
    """The sending end towards one host of this node (see the module docstring)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, to: str | Opener) -> None:
        """`to`: a Unix path (connected at once when first used), or an `Opener` (run as a task)."""
        self._path = to if isinstance(to, str) else None
        self._opener = None if isinstance(to, str) else to
        self._loop = loop
        self._opening: asyncio.Task | None = None
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
        if self._retry is not None or self._opening is not None or self.closed:
            return  # a retry is due, or a connection is being opened
        if self._path is None:
            self._opening = self._loop.create_task(self._open())
            return
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.connect(self._path)
        except (FileNotFoundError, ConnectionRefusedError, BlockingIOError, InterruptedError):
            sock.close()  # not listening yet (or its accept queue is full): try again shortly
            self._retry = self._loop.call_later(retry_s, self._retried)
            return
        self._connected(sock)

    async def _open(self) -> None:
        assert self._opener is not None
        try:
            sock = await self._opener()
        except (OSError, asyncio.TimeoutError):
            # not listening (or the handshake failed, logged by the opener): try again shortly
            self._opening = None
            if not self.closed:
                self._retry = self._loop.call_later(retry_s, self._retried)
            return
        self._opening = None
        if self.closed:
            sock.close()
            return
        self._connected(sock)

    def _connected(self, sock: socket.socket) -> None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, socket_buffer_bytes)
        self._sock = sock
        self._written = 0  # a fresh stream: the first frame goes whole
        # the receiver never writes: readable means it closed. Over TCP a write after the peer
        # died still succeeds (into the void) until its reset comes back; watching for the close
        # sends the next frames to its successor instead
        self._loop.add_reader(sock.fileno(), self._peer_closed)
        if self._backlog:
            self._write_backlog()

    def _peer_closed(self) -> None:
        assert self._sock is not None
        try:
            if self._sock.recv(1):
                return  # not a warren inbox after all; nothing to do with what it says
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            pass
        self._lost()

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
        self._loop.remove_reader(self._sock.fileno())
        self._sock.close()
        self._sock = None
        self._written = 0
        log.debug("runtime.pipe_lost", waiting=len(self._backlog))
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
        if self._opening is not None:
            self._opening.cancel()
            self._opening = None
        if self._sock is not None:
            self._loop.remove_writer(self._sock.fileno())
            self._loop.remove_reader(self._sock.fileno())
            self._sock.close()
            self._sock = None

