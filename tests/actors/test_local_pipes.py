"""The Unix socket pipes between the hosts of one node: order, whole frames, peers that come late
or die (actors/runtime/local_pipes.py)."""
from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import msgpack

from actors.runtime import envelope
from actors.runtime.local_pipes import Inbox, Pipe, socket_buffer_bytes

deadline_s = 10.0


class Frames:
    """What an Inbox handed over; `arrived(n)` resolves once n frames are in."""

    def __init__(self) -> None:
        self.got: list = []
        self._waiting: tuple[int, asyncio.Future] | None = None

    def __call__(self, frame) -> None:
        self.got.append(frame)
        if self._waiting is not None and len(self.got) >= self._waiting[0]:
            self._waiting[1].set_result(None)
            self._waiting = None

    async def arrived(self, n: int) -> list:
        if len(self.got) < n:
            future = asyncio.get_running_loop().create_future()
            self._waiting = (n, future)
            await future
        return self.got


def listen(path: str) -> tuple[Inbox, Frames]:
    """An Inbox on `path` and what it receives."""
    frames = Frames()
    return Inbox(asyncio.get_running_loop(), path, envelope.unpacker, frames), frames


def frame(value) -> memoryview:
    return memoryview(msgpack.packb(value, use_bin_type=True))


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, deadline_s))


def test_frames_sent_before_the_peer_listens_wait_for_it_and_arrive_in_order(tmp_path: Path) -> None:
    async def main():
        loop = asyncio.get_running_loop()
        path = str(tmp_path / "b")
        pipe = Pipe(loop, path)
        for i in range(50):
            pipe.send(frame([i, "early"]))
        inbox, frames = listen(path)  # the pipe's retry finds it
        pipe.send(frame([50, "late"]))
        got = await frames.arrived(51)
        assert got == [(i, "early") for i in range(50)] + [(50, "late")]
        await pipe.close(1.0)
        inbox.close()
    run(main())


def test_a_frame_larger_than_the_socket_buffer_arrives_whole_between_small_ones(tmp_path: Path) -> None:
    async def main():
        loop = asyncio.get_running_loop()
        path = str(tmp_path / "b")
        inbox, frames = listen(path)
        pipe = Pipe(loop, path)
        big = bytes(range(256)) * (8 * socket_buffer_bytes // 256)
        pipe.send(frame(["small", 1]))
        pipe.send(frame(["big", big]))
        pipe.send(frame(["small", 2]))
        got = await frames.arrived(3)
        assert got[0] == ("small", 1) and got[2] == ("small", 2)
        assert got[1][0] == "big" and got[1][1] == big
        await pipe.close(1.0)
        inbox.close()
    run(main())


def test_a_peer_that_dies_mid_frame_leaves_its_successor_a_clean_stream(tmp_path: Path) -> None:
    """The first host accepts but never reads, so a big frame is half written when it dies; the
    host bound next on the path gets that frame whole, then the rest, in order."""
    async def main():
        loop = asyncio.get_running_loop()
        path = str(tmp_path / "b")
        dying = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        dying.bind(path)
        dying.listen(1)
        pipe = Pipe(loop, path)
        big = b"\x07" * (8 * socket_buffer_bytes)
        pipe.send(frame(["big", big]))
        conn, _ = dying.accept()
        pipe.send(frame(["after", 1]))
        assert conn.recv(1000)  # part of the big frame reached the first host...
        conn.close()  # ...which dies with the rest unread
        dying.close()
        inbox, frames = listen(path)  # replaces the dead host's socket file
        got = await frames.arrived(2)
        assert got == [("big", big), ("after", 1)]
        await pipe.close(1.0)
        inbox.close()
    run(main())


def test_a_stream_that_is_not_msgpack_is_dropped_and_the_inbox_goes_on(tmp_path: Path) -> None:
    async def main():
        loop = asyncio.get_running_loop()
        path = str(tmp_path / "b")
        inbox, frames = listen(path)
        bad = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        bad.connect(path)
        bad.sendall(b"\xc1" * 16)  # 0xc1 is never used in msgpack
        pipe = Pipe(loop, path)
        pipe.send(frame(["good", 1]))
        assert await frames.arrived(1) == [("good", 1)]
        bad.setblocking(False)
        with_eof = await loop.sock_recv(bad, 10)  # the inbox closed the bad stream
        assert with_eof == b""
        bad.close()
        await pipe.close(1.0)
        inbox.close()
    run(main())
