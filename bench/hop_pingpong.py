"""One hop between two processes: ZeroMQ ipc:// against a Unix stream socket (why the hosts of a
node talk over local_pipes.py). Prints; not a test.

    .venv/bin/python -m bench.hop_pingpong [--rounds N] [--gaps 0,0.001,0.005]

A parent sends a 100-byte frame, a forked child echoes it; the round trip is timed, with a pause
of each gap between rounds (a host at a low rate sleeps between messages, and waking costs).
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import zmq

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


def _zmq_echo(a: str, b: str, rounds: int) -> None:
    ctx = zmq.Context()
    pull, push = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    pull.bind(a)
    push.connect(b)
    for _ in range(rounds + 1):
        push.send(pull.recv())
    ctx.destroy(linger=1000)


def over_zmq(rounds: int, gap_s: float, where: str) -> list[float]:
    a, b = f"ipc://{where}/a", f"ipc://{where}/b"
    # a spawned echo: with a forked one the round trips hung now and then (not looked into)
    echo = multiprocessing.get_context("spawn").Process(target=_zmq_echo, args=(a, b, rounds))
    echo.start()
    ctx = zmq.Context()
    pull, push = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    pull.bind(b)
    push.connect(a)
    try:
        return timed(rounds, gap_s, push.send, pull.recv)
    finally:
        echo.join()
        ctx.destroy(linger=0)


def over_unix(rounds: int, gap_s: float) -> list[float]:
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=1000)
    p.add_argument("--gaps", default="0,0.001,0.005", help="seconds between rounds, comma-separated")
    p.add_argument("--one", nargs=2, metavar=("TRANSPORT", "GAP"), help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.one is None:  # each measurement in a process of its own: no ZeroMQ threads around a fork
        for gap in a.gaps.split(","):
            for transport in ("zeromq", "unix"):
                subprocess.run([sys.executable, "-m", "bench.hop_pingpong", "--rounds", str(a.rounds),
                                "--one", transport, gap], check=True)
        return
    transport, gap = a.one[0], float(a.one[1])
    with tempfile.TemporaryDirectory(prefix="warren-hop-") as where:
        took = over_zmq(a.rounds, gap, where) if transport == "zeromq" else over_unix(a.rounds, gap)
    name = "zeromq ipc://" if transport == "zeromq" else "unix socket"
    print(f"{name:14s} gap {gap * 1000:4.1f} ms: round trip p50 {percentile(took, 0.5) * 1e6:6.1f} us,"
          f" p90 {percentile(took, 0.9) * 1e6:6.1f} us", flush=True)


if __name__ == "__main__":
    main()
