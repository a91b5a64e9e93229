"""One hop between two processes: ZeroMQ ipc:// against a Unix stream socket (why the hosts of a
node talk over local_pipes.py), and ZeroMQ tcp:// with CURVE against a plain TCP socket on the
loopback (why hosts of different nodes do too, node_links.py); and the same Unix socket under two
hosts' Runtimes, an actor's message to an actor of the other host and back (what the runtime adds
to a hop). Prints; not a test.

    .venv/bin/python -m bench.hop_pingpong [--rounds N] [--gaps 0,0.001,0.005]

A parent sends a 100-byte frame, a forked child echoes it; the round trip is timed, with a pause
of each gap between rounds (a host at a low rate sleeps between messages, and waking costs).
"""
from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import zmq

from actors.messages.channel_queue import Publish, Published
from actors.runtime.address import Address
from actors.runtime.mailbox import Runtime

payload = b"x" * 100


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))]


def timed(rounds: int, gap_s: float, send: Callable[[bytes], None], recv: Callable[[], bytes]) -> list[float]:
    send(payload)  # the first round connects
    recv()
    took = []
    for _ in range(rounds):
        start = time.perf_counter()
        send(payload)
        recv()
        took.append(time.perf_counter() - start)
        time.sleep(gap_s)  # the pause between messages being measured, not a synchronisation
    return took


def _curve(pull: zmq.Socket, push: zmq.Socket) -> None:
    """Both ends keyed as the links between nodes were until 2026-11-28 (one key pair, derived by
    every node from the cluster's secret)."""
    public, secret = zmq.curve_keypair()
    pull.curve_secretkey, pull.curve_publickey, pull.curve_server = secret, public, True
    push.curve_secretkey, push.curve_publickey, push.curve_serverkey = secret, public, public


def _zmq_echo(a: str, b: str, rounds: int) -> None:
    ctx = zmq.Context()
    pull, push = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    if a.startswith("tcp://"):
        _curve(pull, push)
    pull.bind(a)
    push.connect(b)
    for _ in range(rounds + 1):
        push.send(pull.recv())
    ctx.destroy(linger=1000)


def over_zmq(rounds: int, gap_s: float, where: str, tcp: bool = False) -> list[float]:
    a, b = (f"tcp://127.0.0.1:{_free_port()}", f"tcp://127.0.0.1:{_free_port()}") if tcp else \
        (f"ipc://{where}/a", f"ipc://{where}/b")
    # a spawned echo: with a forked one the round trips hung now and then (not looked into)
    echo = multiprocessing.get_context("spawn").Process(target=_zmq_echo, args=(a, b, rounds))
    echo.start()
    ctx = zmq.Context()
    pull, push = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    if tcp:
        _curve(pull, push)
    pull.bind(b)
    push.connect(a)
    try:
        return timed(rounds, gap_s, push.send, pull.recv)
    finally:
        echo.join()
        ctx.destroy(linger=0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tcp_pair() -> tuple[socket.socket, socket.socket]:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        near = socket.create_connection(listener.getsockname())
        far, _ = listener.accept()
    for end in (near, far):
        end.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return near, far


def over_stream(rounds: int, gap_s: float, tcp: bool = False) -> list[float]:
    near, far = _tcp_pair() if tcp else socket.socketpair()
    child = os.fork()
    if child == 0:
        near.close()
        for _ in range(rounds + 1):
            far.sendall(far.recv(4096))
        os._exit(0)
    far.close()
    try:
        return timed(rounds, gap_s, near.sendall, lambda: near.recv(4096))
    finally:
        os.waitpid(child, 0)
        near.close()


class _Echo:
    """Sends every message back to whoever sent it."""

    def __init__(self, runtime: Runtime, rounds: int) -> None:
        self.runtime, self.left, self.done = runtime, rounds + 1, asyncio.Event()

    def receive(self, sender: Address, msg: Any) -> None:
        self.runtime.send(sender, msg, sender=Address(self.runtime.host, "echo"))
        self.left -= 1
        if not self.left:
            self.done.set()


class _Back:
    """Tells the timing loop that its message came back."""

    def __init__(self) -> None:
        self.arrived = asyncio.Event()

    def receive(self, sender: Address, msg: Any) -> None:
        self.arrived.set()


async def _runtime_echo(directory: dict[str, str], rounds: int) -> None:
    runtime = Runtime("far", directory)
    await runtime.start()
    echo = _Echo(runtime, rounds)
    runtime.spawn("echo", echo)
    await echo.done.wait()
    await runtime.close()


async def _runtime_timed(directory: dict[str, str], rounds: int, gap_s: float) -> list[float]:
    runtime = Runtime("near", directory)
    await runtime.start()
    back = _Back()
    me = runtime.spawn("timer", back)
    message = Publish([Published(1, "", "orders", b"h" * 40, b"x" * 1024)])  # one 1 KiB publish
    took = []
    for n in range(rounds + 1):  # the first round connects
        start = time.perf_counter()
        back.arrived.clear()
        runtime.send(Address("far", "echo"), message, sender=me)
        await back.arrived.wait()
        if n:
            took.append(time.perf_counter() - start)
        await asyncio.sleep(gap_s)  # the pause between messages being measured, not a synchronisation
    await runtime.close()
    return took


def over_runtime(rounds: int, gap_s: float, where: str) -> list[float]:
    """Two hosts' Runtimes (actors/runtime/mailbox.py) in two processes over a Unix socket: an
    actor's message to an actor of the other host and back, with everything a hop between the hosts
    of a node costs (the loop turn's flush, the envelope, the reading host's dispatch)."""
    directory = {"near": f"unix://{where}/near", "far": f"unix://{where}/far"}
    child = os.fork()
    if child == 0:
        asyncio.run(_runtime_echo(directory, rounds))
        os._exit(0)
    try:
        return asyncio.run(_runtime_timed(directory, rounds, gap_s))
    finally:
        os.waitpid(child, 0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=1000)
    p.add_argument("--gaps", default="0,0.001,0.005", help="seconds between rounds, comma-separated")
    p.add_argument("--one", nargs=2, metavar=("TRANSPORT", "GAP"), help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.one is None:  # each measurement in a process of its own: no ZeroMQ threads around a fork
        for gap in a.gaps.split(","):
            for transport in ("zeromq", "unix", "runtime", "zeromq-tcp", "tcp"):
                subprocess.run([sys.executable, "-m", "bench.hop_pingpong", "--rounds", str(a.rounds),
                                "--one", transport, gap], check=True)
        return
    transport, gap = a.one[0], float(a.one[1])
    with tempfile.TemporaryDirectory(prefix="warren-hop-") as where:
        if transport.startswith("zeromq"):
            took = over_zmq(a.rounds, gap, where, tcp=transport == "zeromq-tcp")
        elif transport == "runtime":
            took = over_runtime(a.rounds, gap, where)
        else:
            took = over_stream(a.rounds, gap, tcp=transport == "tcp")
    name = {"zeromq": "zeromq ipc://", "unix": "unix socket", "runtime": "runtime (unix)",
            "zeromq-tcp": "zeromq tcp+CURVE",
            "tcp": "tcp socket"}[transport]
    print(f"{name:16s} gap {gap * 1000:4.1f} ms: round trip p50 {percentile(took, 0.5) * 1e6:6.1f} us,"
          f" p90 {percentile(took, 0.9) * 1e6:6.1f} us", flush=True)


if __name__ == "__main__":
    main()
