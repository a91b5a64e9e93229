"""The AMQP listener of one connection host, which evens connections out between the node's hosts.

Every connection host listens on the port with SO_REUSEPORT and accepts what the kernel gives it;
actors/reader/balance.py decides whether to keep a connection or hand it to a host serving fewer.
What the shell needs for that:
- a *load board*: a small file under the node's socket directory, mapped into every connection
  host, one 8-byte slot per host holding how many connections it serves. A host writes only its
  own slot, at once when it takes a connection and when one `left`, and reads the others' as they
  are (a count being written misplaces a connection at worst, it never loses one);
- a *hand-off socket* per host (a Unix datagram socket, `<host>.handoff`): the accepted socket's
  descriptor travels to the chosen host with SCM_RIGHTS and the accepting host closes its copy.
  The receiving host adopts it as if it had accepted it (the client sees nothing: no byte has been
  read yet). A hand-off that cannot be made (that host is down or restarting, its queue is full)
  keeps the connection where it is.
The same hand-off socket carries a connection that moves while it runs (actors/reader/mover.py):
its datagram holds the connection's state (actors/reader/handover.py) beside the descriptor, and
the receiving host resumes it rather than starting a handshake. The board's second row is each
host's busy share (per mille of one core over the last second), which the movers read.
"""
from __future__ import annotations

import array
import asyncio
import errno
import mmap
import os
import socket
import struct
from pathlib import Path
from typing import Callable

import structlog

from actors.reader.balance import destination
from actors.reader.handover import MOVED, MovedConnection

log = structlog.get_logger("warren.reader.acceptor")

SLOT = struct.Struct("<q")
accept_burst = 32  # connections taken per readiness, so a flood does not hold the loop
handoff_burst = 32
accept_retry_s = 1.0
moved_bytes_max = 96 * 1024  # a moving connection's state and unparsed bytes (mover.py keeps below)


class LoadBoard:
    """The connection counts of a node's connection hosts, shared through a mapped file."""

    def __init__(self, path: Path, hosts: int) -> None:
        size = 2 * hosts * SLOT.size  # a row of connection counts, a row of busy shares
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if os.fstat(fd).st_size < size:
                os.ftruncate(fd, size)
            self._map = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        self.hosts = hosts

    def loads(self) -> list[int]:
        return [SLOT.unpack_from(self._map, i * SLOT.size)[0] for i in range(self.hosts)]

    def set(self, host: int, connections: int) -> None:
        SLOT.pack_into(self._map, host * SLOT.size, connections)

    def busy(self) -> list[float]:
        """Each host's share of one core over the last second."""
        row = self.hosts * SLOT.size
        return [SLOT.unpack_from(self._map, row + i * SLOT.size)[0] / 1000 for i in range(self.hosts)]

    def set_busy(self, host: int, share: float) -> None:
        SLOT.pack_into(self._map, (self.hosts + host) * SLOT.size, round(share * 1000))


class Acceptor:
    """Accepts for host `me` of `hosts`; `adopt(sock, moved)` serves a connection here (`moved`: the
    state of a running one another host sent, else None), and `left()` is called when a
    connection it adopted is gone (or could not be served)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, me: int, hosts: int, sock_dir: Path,
                 adopt: Callable[[socket.socket, MovedConnection | None], None]) -> None:
        self._loop = loop
        self.me = me
        self._adopt = adopt
        self._listeners: list[socket.socket] = []
        self._paths = [sock_dir / f"conn{i}.handoff" for i in range(hosts)]
        self.board = LoadBoard(sock_dir / "conn-load", hosts) if hosts > 1 else None
        self._served = 0
        self._inbox: socket.socket | None = None
        self._outbox: socket.socket | None = None
        if self.board is not None:
            self.board.set(me, 0)  # what an earlier incarnation served died with it
            self._open_handoff()

    def listen(self, bind: str, port: int, backlog: int = 1024) -> None:
        """Listen on every address `bind` resolves to, as loop.create_server does."""
        for family, kind, proto, _, address in socket.getaddrinfo(bind or None, port, type=socket.SOCK_STREAM,
                                                                   flags=socket.AI_PASSIVE):
            sock = socket.socket(family, kind, proto)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(address)
                sock.listen(backlog)
                sock.setblocking(False)
            except OSError:
                sock.close()
                raise
            self._loop.add_reader(sock, self._accept, sock)
            self._listeners.append(sock)

    def left(self) -> None:
        """A connection this host took is gone."""
        self._serve(self._served - 1)

    def _serve(self, connections: int) -> None:
        self._served = connections
        if self.board is not None:
            self.board.set(self.me, connections)

    def _accept(self, listener: socket.socket) -> None:
        for _ in range(accept_burst):
            try:
                conn, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                log.warning("listener.accept_failed", error=str(e))
                if e.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    # out of descriptors or memory: the listener stays readable, so stop asking
                    # for a while rather than spin (as asyncio's own servers do)
                    self._loop.remove_reader(listener)
                    self._loop.call_later(accept_retry_s, self._loop.add_reader, listener, self._accept, listener)
                return
            if self.board is not None:
                target = destination(self.me, self.board.loads())
                if target != self.me and self._hand(conn, target):
                    continue
            self._take(conn)

    def _hand(self, conn: socket.socket, target: int) -> bool:
        assert self._outbox is not None
        try:
            # sendmsg, not socket.send_fds: that one drops its address argument (Python 3.11)
            self._outbox.sendmsg([b"c"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [conn.fileno()]))],
                                 0, str(self._paths[target]))
        except OSError:
            return False  # that host is down or restarting, or its queue is full
        conn.close()  # the descriptor travels; the connection stays open through the other copy
        log.info("connection.handed", to=f"conn{target}")
        return True

    def send_running(self, fd: int, moved: MovedConnection, target: int) -> bool:
        """Send a running connection's socket and state to host `target`; False if it cannot go
        (the caller keeps it). The caller closes its copy of the descriptor once this said True."""
        data = moved.pack()
        if self._outbox is None or target == self.me or len(data) > moved_bytes_max:
            return False
        try:
            self._outbox.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))],
                                 0, str(self._paths[target]))
        except OSError:
            return False
        return True

    def _take(self, conn: socket.socket, moved: MovedConnection | None = None) -> None:
        conn.setblocking(False)
        self._serve(self._served + 1)  # at once: the next accept, here or elsewhere, counts it
        self._adopt(conn, moved)

    def _open_handoff(self) -> None:
        path = self._paths[self.me]
        path.unlink(missing_ok=True)  # an earlier incarnation's
        inbox = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        inbox.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * moved_bytes_max)
        inbox.bind(str(path))
        inbox.setblocking(False)
        self._loop.add_reader(inbox, self._handed_here)
        self._inbox = inbox
        self._outbox = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._outbox.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 2 * moved_bytes_max)
        self._outbox.setblocking(False)

    def _handed_here(self) -> None:
        assert self._inbox is not None
        for _ in range(handoff_burst):
            try:
                data, fds, flags, _ = socket.recv_fds(self._inbox, moved_bytes_max, 4)
            except (BlockingIOError, InterruptedError):
                return
            moved = None
            if data.startswith(MOVED) and not flags & socket.MSG_TRUNC:
                try:
                    moved = MovedConnection.unpack(data)
                except Exception:  # never expected: the sender is this node's own code
                    log.exception("connection.move_unreadable")
            if data.startswith(MOVED) and (moved is None or len(fds) != 1):
                for fd in fds:  # a running connection that cannot be resumed: cut it off
                    os.close(fd)
                continue
            for fd in fds:
                self._take(socket.socket(fileno=fd), moved)
