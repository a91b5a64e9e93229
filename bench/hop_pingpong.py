"""One hop between two processes over ZeroMQ, and the choices that make it cheaper or dearer:
how the asyncio loop waits (ZMQ_FD + ZMQ_EVENTS drained until empty with `loop.add_reader`, as
actors/runtime/zmq_links.py does; zmq.asyncio's awaited recv; a blocking zmq.Poller without
asyncio, libzmq's own best), socket types (PUSH/PULL, DEALER/ROUTER), ipc:// against tcp:// with
CURVE, the context's IO thread pinned or raised to a real-time priority; a plain Unix socket pair
as the floor; and two hosts' Runtimes (everything a hop of the product costs: the loop turn's
flush, the envelope, the receiving host's dispatch). Prints; not a test.

    .venv/bin/python -m bench.hop_pingpong [--rounds N] [--gaps 0,0.001,0.005] [--only a,b]

A parent sends a 100-byte frame (the Runtimes: one 1 KiB Publish), a forked child echoes it; the
round trip is timed, with a pause of each gap between rounds (a host at a low rate sleeps between
messages, and waking costs). Each measurement runs in a process of its own.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import zmq
import zmq.asyncio

from actors.messages.channel_queue import Publish, Published
from actors.runtime.address import Address
from actors.runtime.curve import CurveKeys
from actors.runtime.mailbox import Runtime

payload = b"x" * 100
POLLIN = int(zmq.POLLIN)


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))]


def timed(rounds: int, gap_s: float, send: Callable[[bytes], None], recv: Callable[[], Any]) -> list[float]:
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


# -- raw ZeroMQ: one variant per name --------------------------------------------------------------
def _context(option: str) -> zmq.Context:
    ctx = zmq.Context()
    if option == "pinned":  # both processes and their IO threads on one core
        cpu = min(os.sched_getaffinity(0))
        ctx.set(zmq.THREAD_AFFINITY_CPU_ADD, cpu)
        os.sched_setaffinity(0, {cpu})
    elif option.startswith("apart"):  # each process with its IO thread on a core of its own
        cpu = int(option[-1]) % os.cpu_count()
        ctx.set(zmq.THREAD_AFFINITY_CPU_ADD, cpu)
        os.sched_setaffinity(0, {cpu})
    elif option == "fifo":  # the IO thread woken ahead of everything else (needs root)
        ctx.set(zmq.THREAD_SCHED_POLICY, os.SCHED_FIFO)
        ctx.set(zmq.THREAD_PRIORITY, 1)
    return ctx


def _ends(ctx: zmq.Context, kind: str, bind: str, connect: str, tcp: bool) -> tuple[zmq.Socket, zmq.Socket]:
    """(receiving socket bound at `bind`, sending socket connected to `connect`)."""
    rx, tx = (ctx.socket(zmq.ROUTER), ctx.socket(zmq.DEALER)) if kind == "dealer" else \
        (ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH))
    if tcp:
        keys = CurveKeys(b"hop-bench")
        keys.make_server(rx)
        keys.make_client(tx)  # no ZAP handler in this bench: libzmq admits the keyed client
    rx.bind(bind)
    tx.connect(connect)
    return rx, tx


def _receiver(rx: zmq.Socket, kind: str) -> Callable[[], Any]:
    if kind == "dealer":
        return lambda: rx.recv_multipart(copy=False)[1]
    return lambda: rx.recv(copy=False)


def _endpoints(where: str, tcp: bool) -> tuple[str, str]:
    if tcp:
        return f"tcp://127.0.0.1:{_free_port()}", f"tcp://127.0.0.1:{_free_port()}"
    return f"ipc://{where}/a", f"ipc://{where}/b"


def _zmq_echo(a: str, b: str, rounds: int, kind: str, tcp: bool, option: str) -> None:
    ctx = _context(option.replace("apart0", "apart1"))
    rx, tx = _ends(ctx, kind, a, b, tcp)
    recv = _receiver(rx, kind)
    for _ in range(rounds + 1):
        tx.send(recv())
    ctx.destroy(linger=1000)


def _spawn_echo(target: Callable, *args: Any) -> int:
    child = os.fork()
    if child == 0:  # ZeroMQ is not used before the fork: the child makes its own context
        try:
            target(*args)
        finally:
            os._exit(0)
    return child


def over_zmq_blocking(rounds: int, gap_s: float, where: str, kind: str, tcp: bool, option: str) -> list[float]:
    """Blocking sockets on both ends (libzmq waits in its own poll): the floor of a ZeroMQ hop."""
    a, b = _endpoints(where, tcp)
    child = _spawn_echo(_zmq_echo, a, b, rounds, kind, tcp, option)
    ctx = _context(option)
    rx, tx = _ends(ctx, kind, b, a, tcp)
    try:
        return timed(rounds, gap_s, tx.send, _receiver(rx, kind))
    finally:
        os.waitpid(child, 0)
        ctx.destroy(linger=0)


async def _fd_recv(loop: asyncio.AbstractEventLoop, rx: zmq.Socket) -> Any:
    """What zmq_links.py does: wait for the FD's edge, then drain while EVENTS says POLLIN."""
    while True:
        if rx.getsockopt(zmq.EVENTS) & POLLIN:
            return rx.recv(zmq.NOBLOCK, copy=False)
        ready = loop.create_future()
        fd = rx.getsockopt(zmq.FD)
        loop.add_reader(fd, ready.set_result, None)
        try:
            await ready
        finally:
            loop.remove_reader(fd)


def _asyncio_echo(a: str, b: str, rounds: int, wait: str, tcp: bool) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        if wait == "zmq.asyncio":
            ctx: Any = zmq.asyncio.Context()
            rx, tx = _ends(ctx, "push", a, b, tcp)
            for _ in range(rounds + 1):
                tx.send(await rx.recv(copy=False))
        else:
            ctx = zmq.Context()
            rx, tx = _ends(ctx, "push", a, b, tcp)
            for _ in range(rounds + 1):
                tx.send(await _fd_recv(loop, rx), zmq.NOBLOCK)
        ctx.destroy(linger=1000)
    asyncio.run(main())


def over_zmq_asyncio(rounds: int, gap_s: float, where: str, wait: str, tcp: bool) -> list[float]:
    """Both ends on asyncio loops, waiting as `wait` says."""
    a, b = _endpoints(where, tcp)
    child = _spawn_echo(_asyncio_echo, a, b, rounds, wait, tcp)

    async def main() -> list[float]:
        loop = asyncio.get_running_loop()
        if wait == "zmq.asyncio":
            ctx: Any = zmq.asyncio.Context()
        else:
            ctx = zmq.Context()
        rx, tx = _ends(ctx, "push", b, a, tcp)
        took = []
        for n in range(rounds + 1):
            start = time.perf_counter()
            tx.send(payload, zmq.NOBLOCK)
            await (rx.recv(copy=False) if wait == "zmq.asyncio" else _fd_recv(loop, rx))
            if n:
                took.append(time.perf_counter() - start)
            await asyncio.sleep(gap_s)  # the pause between messages being measured
        ctx.destroy(linger=0)
        return took
    try:
        return asyncio.run(main())
    finally:
        os.waitpid(child, 0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def over_unix(rounds: int, gap_s: float) -> list[float]:
    """A Unix socket pair written and read by the processes' own threads: no IO thread at all."""
    near, far = socket.socketpair()
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


# -- the product's runtime -----------------------------------------------------------------------
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


def _runtime(host: str, directory: dict[str, str], tcp: bool) -> Runtime:
    return Runtime(host, directory, remote=("tcp://127.0.0.1:*", CurveKeys(b"hop-bench")) if tcp else None)


async def _runtime_echo(directory: dict[str, str], rounds: int, tcp: bool, ports: Any) -> None:
    runtime = _runtime("far", directory, tcp)
    await runtime.start()
    if tcp:  # tell the parent where this host's CURVE server is
        os.write(ports, runtime.tcp_endpoint.encode() + b"\n")
    echo = _Echo(runtime, rounds)
    runtime.spawn("echo", echo)
    await echo.done.wait()
    await runtime.close()


async def _runtime_timed(directory: dict[str, str], rounds: int, gap_s: float, tcp: bool, ports: Any) -> list[float]:
    runtime = _runtime("near", directory, tcp)
    await runtime.start()
    if tcp:
        far = await asyncio.to_thread(lambda: os.fdopen(ports).readline().strip())
        runtime.add_hosts({"far": far})
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


def over_runtime(rounds: int, gap_s: float, where: str, tcp: bool) -> list[float]:
    """Two hosts' Runtimes (actors/runtime/mailbox.py) in two processes: over ipc:// as hosts of
    one node, or over tcp:// with CURVE as hosts of two nodes (the far one answers on tcp)."""
    directory = {"near": f"ipc://{where}/near", "far": f"ipc://{where}/far"}
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read_end)
        asyncio.run(_runtime_echo(directory, rounds, tcp, write_end))
        os._exit(0)
    os.close(write_end)
    try:
        return asyncio.run(_runtime_timed(directory, rounds, gap_s, tcp, read_end))
    finally:
        os.waitpid(child, 0)


VARIANTS: dict[str, Callable[[int, float, str], list[float]]] = {
    "unix socket pair": lambda r, g, w: over_unix(r, g),
    "zmq ipc blocking push": lambda r, g, w: over_zmq_blocking(r, g, w, "push", False, ""),
    "zmq ipc blocking dealer": lambda r, g, w: over_zmq_blocking(r, g, w, "dealer", False, ""),
    "zmq ipc blocking pinned": lambda r, g, w: over_zmq_blocking(r, g, w, "push", False, "pinned"),
    "zmq ipc blocking apart": lambda r, g, w: over_zmq_blocking(r, g, w, "push", False, "apart0"),
    "zmq ipc blocking fifo": lambda r, g, w: over_zmq_blocking(r, g, w, "push", False, "fifo"),
    "zmq ipc loop fd+events": lambda r, g, w: over_zmq_asyncio(r, g, w, "fd", False),
    "zmq ipc zmq.asyncio": lambda r, g, w: over_zmq_asyncio(r, g, w, "zmq.asyncio", False),
    "zmq tcp+curve loop fd": lambda r, g, w: over_zmq_asyncio(r, g, w, "fd", True),
    "runtime ipc": lambda r, g, w: over_runtime(r, g, w, False),
    "runtime tcp+curve": lambda r, g, w: over_runtime(r, g, w, True),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=1000)
    p.add_argument("--gaps", default="0,0.001,0.005", help="seconds between rounds, comma-separated")
    p.add_argument("--only", default="", help="comma-separated variant names (default: all)")
    p.add_argument("--one", nargs=2, metavar=("VARIANT", "GAP"), help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.one is None:
        names = [n for n in VARIANTS if not a.only or n in a.only.split(",")]
        for gap in a.gaps.split(","):
            for name in names:
                subprocess.run([sys.executable, "-m", "bench.hop_pingpong", "--rounds", str(a.rounds),
                                "--one", name, gap], check=True)
        return
    name, gap = a.one[0], float(a.one[1])
    with tempfile.TemporaryDirectory(prefix="warren-hop-") as where:
        took = VARIANTS[name](a.rounds, gap, where)
    print(f"{name:26s} gap {gap * 1000:4.1f} ms: round trip p50 {percentile(took, 0.5) * 1e6:6.1f} us,"
          f" p90 {percentile(took, 0.9) * 1e6:6.1f} us", flush=True)


if __name__ == "__main__":
    main()
