"""Does the host holding a queue give its memory back after a long queue drains? Fill one queue of
a fresh node, drain it, and print that host's memory at each step.

    python -m bench.memory_release [--messages 200000] [--size 1024] [--durable] [--settle 12]

Steps: idle, full (every message in the queue), drained (the queue empty again), settled (after
`--settle` seconds of housekeeping rounds). Figures per step: RSS, PSS and USS of the queue's host
process (USS: the pages only it maps, what it would give back by exiting), and the node's PSS
summed over its processes (what the memory alarm counts). A benchmark: it prints figures, it
asserts nothing.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pika
import psutil

from actors.placement import queue_kind
from actors.runtime.client import control
from actors.runtime.ports import stable_port
from bench.compare_brokers import Warren

MIB = 1024 * 1024
poll_s = 0.2
publish_batch = 1000


def queue_host(admin: int, queue: str) -> str:
    """The kind of the node's host that holds `queue` (a connection host by default)."""
    return queue_kind("/", queue, control(admin, "node", "status", {})["queue_hosts"])


def queue_count(admin: int, queue: str) -> int:
    host = queue_host(admin, queue)
    return next((q["messages"] for q in control(admin, host, "list_queues", {}) if q["name"] == queue), 0)


def wait_count(admin: int, queue: str, want: int, timeout_s: float = 300.0) -> None:
    deadline = time.monotonic() + timeout_s
    while queue_count(admin, queue) != want:
        if time.monotonic() > deadline:
            raise SystemExit(f"{queue} did not reach {want} messages")
        time.sleep(poll_s)


def fill(uri: str, queue: str, n: int, size: int, durable: bool) -> None:
    with pika.BlockingConnection(pika.URLParameters(uri)) as conn:
        ch = conn.channel()
        ch.queue_declare(queue, durable=durable)
        props = pika.BasicProperties(delivery_mode=2 if durable else 1)
        body = b"x" * size
        for i in range(n):
            ch.basic_publish("", queue, body, props)
            if i % publish_batch == 0:
                conn.process_data_events(0)


def drain(uri: str, queue: str, n: int) -> None:
    with pika.BlockingConnection(pika.URLParameters(uri)) as conn:
        ch = conn.channel()
        ch.basic_qos(prefetch_count=1000)
        got = 0
        for method, _props, _body in ch.consume(queue, inactivity_timeout=30):
            if method is None:
                raise SystemExit(f"the queue stopped delivering after {got} messages")
            got += 1
            if got % 500 == 0 or got == n:
                ch.basic_ack(method.delivery_tag, multiple=True)
            if got == n:
                break
        ch.cancel()


def figures(host: psutil.Process, broker: Warren) -> dict[str, int]:
    m = host.memory_full_info()
    return {"host_rss": m.rss, "host_pss": m.pss, "host_uss": m.uss, "node_pss": broker.memory()[1]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--messages", type=int, default=200_000)
    p.add_argument("--size", type=int, default=1024, help="body bytes")
    p.add_argument("--durable", action="store_true", help="a durable queue and persistent messages")
    p.add_argument("--settle", type=float, default=12.0,
                   help="seconds after the drain (the heap is looked at every 5 s: two looks and a margin)")
    a = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="warren-memory-"))
    broker = Warren("warren", stable_port(), work / "data")
    broker.data_dir.mkdir(parents=True)
    broker.start()
    try:
        admin = int((broker.data_dir / "admin_port").read_text())
        queue = "memory.release"
        host = psutil.Process(control(admin, queue_host(admin, queue), "pid", {}))
        steps = {"idle": figures(host, broker)}
        started = time.monotonic()
        fill(broker.uri, queue, a.messages, a.size, a.durable)
        wait_count(admin, queue, a.messages)
        filled_s = time.monotonic() - started
        steps["full"] = figures(host, broker)
        drain(broker.uri, queue, a.messages)
        wait_count(admin, queue, 0)
        steps["drained"] = figures(host, broker)
        time.sleep(a.settle)  # housekeeping rounds run meanwhile: what is given back then
        steps["settled"] = figures(host, broker)
    finally:
        broker.stop()
    kind = "durable queue, persistent" if a.durable else "transient queue"
    print(f"{a.messages} messages of {a.size} B ({kind}), filled in {filled_s:.1f} s; MiB:")
    print(f"{'step':10}{'host RSS':>10}{'host PSS':>10}{'host USS':>10}{'node PSS':>10}")
    for step, f in steps.items():
        print(f"{step:10}" + "".join(f"{f[k] / MIB:10.1f}" for k in ("host_rss", "host_pss", "host_uss", "node_pss")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
