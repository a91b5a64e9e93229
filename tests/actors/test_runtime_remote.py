"""Mailboxes between nodes: TCP links opened with a handshake on the cluster's secret
(actors/runtime/node_links.py, cluster_secret.py)."""
from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest
import structlog

from actors.runtime import envelope, node_links
from actors.runtime.address import Address
from actors.runtime.cluster_secret import CookieError, link_key, read_or_create_cookie
from actors.runtime.local_pipes import Inbox, Pipe
from actors.runtime.mailbox import Runtime
from tests.actors.test_local_pipes import Frames, frame
from tests.actors.test_local_pipes import run as run_pipes
from tests.actors.messages import Note
from tests.actors.test_runtime_mailbox import Recorder, run

deadline_s = 8.0  # inside run()'s own 10 s


def test_the_cookie_is_made_once_with_mode_600_and_then_reused(tmp_path: Path) -> None:
    path = tmp_path / "home" / ".warren.cookie"
    first = read_or_create_cookie(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(first) == 20
    assert read_or_create_cookie(path) == first


def test_a_cookie_others_can_read_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cookie"
    path.write_text("SECRET")
    os.chmod(path, 0o644)
    with pytest.raises(CookieError, match="only by its owner"):
        read_or_create_cookie(path)


def test_one_secret_gives_one_key_and_another_secret_another() -> None:
    assert link_key(b"one") == link_key(b"one") != link_key(b"two")
    assert len(link_key(b"one")) == 32 and b"one" not in link_key(b"one")


async def remote_pair(tmp_path: Path, cookie_a: bytes, cookie_b: bytes) -> tuple[Runtime, Runtime]:
    """Host a on "node 1", host b on "node 2": each binds a Unix socket for its node and tcp for the other."""
    a = Runtime("a", {"a": f"unix://{tmp_path}/a"}, remote=("tcp://127.0.0.1:*", link_key(cookie_a)))
    b = Runtime("b", {"b": f"unix://{tmp_path}/b"}, remote=("tcp://127.0.0.1:*", link_key(cookie_b)))
    await a.start()
    await b.start()
    a.add_hosts({"b": b.tcp_endpoint})
    b.add_hosts({"a": a.tcp_endpoint})
    return a, b


def test_hosts_on_two_nodes_with_one_secret_exchange_messages_in_order(tmp_path: Path) -> None:
    async def main():
        a, b = await remote_pair(tmp_path, b"cookie", b"cookie")
        rec = Recorder(expect=200)
        to = b.spawn("rec", rec)
        me = Address("a", "src")
        for i in range(200):
            a.send(to, Note("m", i), sender=me)
        await rec.done
        assert [body for _, _, body in rec.got] == list(range(200)) and rec.got[0][0] == me
        back = Recorder()
        a.spawn("back", back)
        b.send(Address("a", "back"), Note("reply", b"\x00" * 100_000), sender=to)
        await back.done
        assert back.got[0][2] == b"\x00" * 100_000
        await a.close()
        await b.close()
    run(main())


def test_a_node_with_another_secret_is_refused_and_both_sides_log_it(tmp_path: Path) -> None:
    async def main():
        a, b = await remote_pair(tmp_path, b"right", b"wrong")
        rec = Recorder()
        b.spawn("rec", rec)
        with structlog.testing.capture_logs() as logs:
            a.send(Address("b", "rec"), Note("m", 1), sender=Address("a", "src"))
            loop = asyncio.get_running_loop()
            until = loop.time() + deadline_s
            while not {"cluster.peer_refused", "runtime.peer_handshake_failed"} <= {e["event"] for e in logs}:
                assert loop.time() < until, f"no refusal logged: {logs}"
                await asyncio.sleep(0.01)  # polling the log with a deadline
        assert rec.got == []
        await a.close()
        await b.close()
    run(main())


def test_a_listener_reads_nothing_from_a_connection_that_has_not_proved_the_secret(tmp_path: Path) -> None:
    """Frames written without the handshake (or after a wrong answer) never reach an actor."""
    async def main():
        a, b = await remote_pair(tmp_path, b"cookie", b"cookie")
        rec = Recorder()
        b.spawn("rec", rec)
        loop = asyncio.get_running_loop()
        host, port = node_links.address(b.tcp_endpoint)
        with structlog.testing.capture_logs() as logs:
            _, writer = await asyncio.open_connection(host, port)
            writer.write(b"\x00" * (node_links.NONCE_BYTES + node_links.MAC_BYTES))  # a wrong proof
            writer.write(b"\x92\xa1x\x90")  # then a msgpack frame
            await writer.drain()
            until = loop.time() + deadline_s
            while "cluster.peer_refused" not in {e["event"] for e in logs}:
                assert loop.time() < until, f"no refusal logged: {logs}"
                await asyncio.sleep(0.01)  # polling the log with a deadline
        writer.close()
        a.send(Address("b", "rec"), Note("m", 1), sender=Address("a", "src"))  # the real link still works
        await rec.done
        assert [body for _, _, body in rec.got] == [1]
        await a.close()
        await b.close()
    run(main())


def test_a_link_whose_listener_died_takes_the_next_frames_to_the_one_that_replaces_it() -> None:
    """Over TCP a write after the peer died still succeeds, into the void: the pipe watches its
    socket for the close, so the next frame goes on a fresh link to the node's successor."""
    key = link_key(b"cookie")

    async def main():
        loop = asyncio.get_running_loop()
        listener, endpoint = node_links.listen("tcp://127.0.0.1:*")
        frames = Frames()
        first = Inbox(loop, listener, envelope.unpacker, frames, node_links.admit(key, "b"))
        pipe = Pipe(loop, node_links.opener(endpoint, key, "a"))
        pipe.send(frame(["one", 1]))
        await frames.arrived(1)
        first.close()  # the host that listened dies
        while pipe._sock is not None:
            await asyncio.sleep(0.01)  # polling, with run()'s deadline: the pipe sees the close
        listener, _ = node_links.listen(endpoint)  # its successor, on the same port
        second = Inbox(loop, listener, envelope.unpacker, frames, node_links.admit(key, "b"))
        pipe.send(frame(["two", 2]))
        assert await frames.arrived(2) == [("one", 1), ("two", 2)]
        await pipe.close(1.0)
        second.close()
    run_pipes(main())
