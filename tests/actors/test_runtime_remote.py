"""Mailboxes between processes and nodes: ZeroMQ ipc:// on a node, tcp:// with CURVE keyed by the
cluster's cookie between nodes (actors/runtime/zmq_links.py, curve.py, cluster_secret.py)."""
from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import socket
import stat
from pathlib import Path

import pytest
import structlog
import zmq
import zmq.utils.monitor

from actors.runtime.address import Address
from actors.runtime.cluster_secret import CookieError, link_key, read_or_create_cookie
from actors.runtime.curve import CurveKeys
from actors.runtime.mailbox import Runtime
from tests.actors.messages import Note
from tests.actors.test_runtime_mailbox import Recorder, run
from tests.waiting import async_until

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


def test_one_cookie_gives_one_key_pair_and_another_cookie_another() -> None:
    assert link_key(b"one") == link_key(b"one") != link_key(b"two")
    assert len(link_key(b"one")) == 32 and b"one" not in link_key(b"one")
    one, again, two = CurveKeys(b"one"), CurveKeys(b"one"), CurveKeys(b"two")
    assert (one.secret, one.public) == (again.secret, again.public)
    assert one.public != two.public and one.public == zmq.curve_public(one.secret)


async def remote_pair(tmp_path: Path, cookie_a: bytes, cookie_b: bytes) -> tuple[Runtime, Runtime]:
    """Host a on "node 1", host b on "node 2": each binds ipc for its node and tcp for the other."""
    a = Runtime("a", {"a": f"ipc://{tmp_path}/a"}, remote=("tcp://127.0.0.1:*", CurveKeys(cookie_a)))
    b = Runtime("b", {"b": f"ipc://{tmp_path}/b"}, remote=("tcp://127.0.0.1:*", CurveKeys(cookie_b)))
    await a.start()
    await b.start()
    a.add_hosts({"b": b.tcp_endpoint})
    b.add_hosts({"a": a.tcp_endpoint})
    return a, b


async def logged(logs: list, events: set[str]) -> None:
    await async_until(lambda: events <= {e["event"] for e in logs}, lambda: f"all of {events} logged: {logs}",
                      deadline_s, every_s=0.01)


def test_hosts_on_two_nodes_with_one_cookie_exchange_messages_in_order(tmp_path: Path) -> None:
    async def main():
        a, b = await remote_pair(tmp_path, b"cookie", b"cookie")
        rec = Recorder(expect=200)
        to = b.spawn("rec", rec)
        me = Address("a", "src")
        for i in range(200):
            a.send(to, Note("m", i), sender=me)
            if i % 7 == 0:
                await asyncio.sleep(0)  # several frames, not one
        await rec.done
        assert [body for _, _, body in rec.got] == list(range(200)) and rec.got[0][0] == me
        back = Recorder()
        a.spawn("back", back)
        big = bytes(range(256)) * 4096  # 1 MiB: above ZeroMQ's copy threshold, sent without a copy
        b.send(Address("a", "back"), Note("reply", big), sender=to)
        await back.done
        assert back.got[0][2] == big
        await a.close()
        await b.close()
    run(main())


def test_a_node_with_another_cookie_is_refused_and_both_sides_log_it_once(tmp_path: Path) -> None:
    async def main():
        a, b = await remote_pair(tmp_path, b"right", b"wrong")
        rec = Recorder()
        b.spawn("rec", rec)
        with structlog.testing.capture_logs() as logs:
            a.send(Address("b", "rec"), Note("m", 1), sender=Address("a", "src"))
            await logged(logs, {"cluster.peer_refused", "runtime.peer_handshake_failed"})
            # ZeroMQ retries every 50 ms and more: the refusals after the first wait for the interval
            for _ in range(3):
                await a.ask("ping", {})  # a few loop turns
                await asyncio.sleep(0.2)  # the pause being observed: retries happen meanwhile
        refusals = [e for e in logs if e["event"] in {"cluster.peer_refused", "runtime.peer_handshake_failed"}]
        assert sorted(e["event"] for e in refusals) == ["cluster.peer_refused", "runtime.peer_handshake_failed"]
        assert rec.got == []
        await a.close()
        await b.close()
    run(main())


def test_a_client_that_knows_the_public_key_but_not_the_cookie_is_refused_by_the_zap_handler(tmp_path: Path) -> None:
    """The cluster's public key is not secret: a client with a key pair of its own that expects it
    passes CURVE's crypto but not the ZAP handler, and nothing it sends reaches an actor."""
    async def main():
        a, b = await remote_pair(tmp_path, b"cookie", b"cookie")
        rec = Recorder()
        b.spawn("rec", rec)
        ctx = zmq.Context()
        intruder = ctx.socket(zmq.PUSH)
        intruder.curve_publickey, intruder.curve_secretkey = zmq.curve_keypair()
        intruder.curve_serverkey = CurveKeys(b"cookie").public
        monitor = intruder.get_monitor_socket(zmq.EVENT_HANDSHAKE_FAILED_AUTH)
        with structlog.testing.capture_logs() as logs:
            intruder.connect(b.tcp_endpoint)
            intruder.send(b"\x92\xa1x\x90", zmq.NOBLOCK)
            await logged(logs, {"cluster.peer_refused"})
        event = await asyncio.to_thread(zmq.utils.monitor.recv_monitor_message, monitor)
        assert event["event"] == zmq.EVENT_HANDSHAKE_FAILED_AUTH and event["value"] == 400
        intruder.close(linger=0)
        monitor.close(linger=0)
        ctx.term()
        a.send(Address("b", "rec"), Note("m", 1), sender=Address("a", "src"))  # the cluster's link still works
        await rec.done
        assert [body for _, _, body in rec.got] == [1]
        await a.close()
        await b.close()
    run(main())


class _Arrived:
    def __init__(self, event) -> None:
        self.event = event

    def receive(self, sender, msg) -> None:
        self.event.set()


def _receiver(host: str, directory: dict[str, str], remote: str | None, ready, arrived) -> None:
    """A host that says when something reached it, and dies with it (the test kills it)."""
    async def main():
        rt = Runtime(host, directory, remote=(remote, CurveKeys(b"cookie")) if remote else None)
        await rt.start()
        rt.spawn("rec", _Arrived(arrived))
        ready.set()
        await asyncio.Event().wait()
    asyncio.run(main())


@pytest.mark.parametrize("between", ["processes of a node (ipc)", "nodes (tcp + CURVE)"])
def test_a_host_that_replaces_a_killed_one_gets_what_was_sent_to_it_meanwhile_in_order(
        tmp_path: Path, between: str) -> None:
    """kill -9 of the receiving host, frames sent while it is away, a successor binding the same
    endpoint: the PUSH socket kept them and hands them over, in send order."""
    tcp = "tcp" in between

    async def main():
        directory = {"a": f"ipc://{tmp_path}/a", "b": f"ipc://{tmp_path}/b"}
        port = None
        if tcp:
            with zmq.Context() as probe, probe.socket(zmq.PULL) as s:  # a free port to bind twice
                port = s.bind_to_random_port("tcp://127.0.0.1")
        remote = f"tcp://127.0.0.1:{port}" if tcp else None
        a = Runtime("a", directory, remote=("tcp://127.0.0.1:*", CurveKeys(b"cookie")) if tcp else None)
        await a.start()
        if tcp:
            a.add_hosts({"b": remote})
        ctx = multiprocessing.get_context("spawn")
        ready, arrived = ctx.Event(), ctx.Event()
        first = ctx.Process(target=_receiver, args=("b", directory, remote, ready, arrived))
        first.start()
        assert await asyncio.to_thread(ready.wait, deadline_s)
        me, to = Address("a", "src"), Address("b", "rec")
        a.send(to, Note("m", -1), sender=me)
        assert await asyncio.to_thread(arrived.wait, deadline_s)  # the first host took it
        with structlog.testing.capture_logs() as logs:
            os.kill(first.pid, signal.SIGKILL)
            await asyncio.to_thread(first.join, deadline_s)
            # the socket has seen the peer go: nothing more is written into the dead connection
            await logged(logs, {"runtime.peer_disconnected"})
        for i in range(100):
            a.send(to, Note("m", i), sender=me)
            await asyncio.sleep(0)
        successor = Runtime("b", directory, remote=(remote, CurveKeys(b"cookie")) if tcp else None)
        await successor.start()
        rec = Recorder(expect=100)
        successor.spawn("rec", rec)
        await rec.done
        assert [body for _, _, body in rec.got] == list(range(100))
        await a.close()
        await successor.close()
    run(main())


def _stranger(listener: socket.socket) -> None:
    """Not a CURVE server on the port: a greeting for another mechanism, until the client hangs up."""
    conn, _ = listener.accept()
    with conn:
        conn.sendall(b"\xff" + bytes(8) + b"\x7f\x03\x00" + b"NULL" + bytes(48))
        while conn.recv(4096):  # until the client hangs up on it
            pass


def test_a_link_whose_handshake_met_a_stranger_on_the_port_reaches_the_host_that_binds_it_later(
        tmp_path: Path) -> None:
    """libzmq may never reconnect a socket whose handshake failed on a protocol error: a stranger
    on a node host's port while that host restarts would leave the link dead for good (everything
    sent to the host queued in it for ever) and the host deaf to this one. The link is made again,
    or libzmq reconnects on its own (seen under load); either way what is sent once the host is
    back reaches it, and what went while the stranger held the port arrives at most once."""
    async def main():
        listener = socket.create_server(("127.0.0.1", 0))
        endpoint = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
        a = Runtime("a", {"a": f"ipc://{tmp_path}/a"}, remote=("tcp://127.0.0.1:*", CurveKeys(b"cookie")))
        await a.start()
        a.add_hosts({"b": endpoint})
        me, to = Address("a", "src"), Address("b", "rec")
        with structlog.testing.capture_logs() as logs:
            stranger = asyncio.get_running_loop().run_in_executor(None, _stranger, listener)
            a.send(to, Note("m", 0), sender=me)  # to the stranger first
            await stranger  # returns once the client hung up on it: the handshake failed
            listener.close()
            b = Runtime("b", {"b": f"ipc://{tmp_path}/b"}, remote=(endpoint, CurveKeys(b"cookie")))
            await b.start()
            rec = Recorder()
            b.spawn("rec", rec)
            # a's link to b got through: a new socket's or (libzmq reconnecting) the old one's
            await async_until(lambda: any(e["event"] == "runtime.peer_connected" and e["host"] == "a" for e in logs),
                              lambda: f"a's link to b through: {logs}", deadline_s)
            a.send(to, Note("m", 1), sender=me)
            await async_until(lambda: any(body == 1 for _, _, body in rec.got), lambda: f"got {rec.got}", deadline_s)
        assert [body for _, _, body in rec.got] in ([1], [0, 1])
        await a.close()
        await b.close()
    run(main())
