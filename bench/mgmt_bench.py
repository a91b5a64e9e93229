"""The management plugin's costs: `/api/queues` latency with many queues (whole, paged, by columns),
how long the node host's event loop stalls while it is served, `/metrics/per-object`, and the
node's throughput with and without a scraper polling the API and the metrics every 5 s. Prints;
not a test.

    .venv/bin/python -m bench.mgmt_bench [--queues 10000] [--time 20] [--requests 10] [--no-throughput]

Starts its own node (scripts/local_cluster.py) with the management and Prometheus ports on free
ports and RabbitMQ's 5 s sample interval; throughput is bench.perf's scenario A (1 producer,
1 consumer, 1 KiB, auto-ack) run twice, first alone, then with the scraper. The stall is the
slowest answer to `/api/whoami` (answered on the same loop, from memory) among those another
process asked back to back while a measured request was being served.
"""
from __future__ import annotations

import argparse
import base64
import json
import multiprocessing
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pika

from tests.mgmt.support import start_mgmt_node
from tests.waiting import until

scrape_interval_s = 5.0


def get(url: str, auth: bool = True) -> bytes:
    req = urllib.request.Request(url, headers={"Authorization": "Basic " + base64.b64encode(b"guest:guest").decode()}
                                 if auth else {})
    with urllib.request.urlopen(req, timeout=120) as resp:
        return resp.read()


def perf(port: int, seconds: int, out: Path) -> dict:
    subprocess.run([sys.executable, "-m", "bench.perf", "--uri", f"amqp://guest:guest@127.0.0.1:{port}/%2F",
                    "--time", str(seconds), "--producers", "1", "--consumers", "1", "--size", "1024", "--auto-ack",
                    "--json", str(out)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return json.loads(out.read_text())["summary"]


def _probe(url: str, ready: Any, stop: Any, slowest: Any) -> None:
    get(url)
    ready.set()
    worst = 0.0
    while not stop.is_set():
        t0 = time.perf_counter()
        get(url)
        worst = max(worst, time.perf_counter() - t0)
    slowest.put(worst)


class Prober:
    """Asks `url` back to back from another process (so this one's work does not slow it) while
    the `with` block runs; `slowest_ms()` is its longest answer."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.context = multiprocessing.get_context("spawn")
        self.worst = 0.0

    def __enter__(self) -> Prober:
        ready, self.stop, self.result = self.context.Event(), self.context.Event(), self.context.Queue()
        self.process = self.context.Process(target=_probe, args=(self.url, ready, self.stop, self.result), daemon=True)
        self.process.start()
        if not ready.wait(120):
            raise RuntimeError("the prober did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.worst = self.result.get(timeout=120)
        self.process.join()

    def slowest_ms(self) -> float:
        return self.worst * 1000


def timed(url: str, probe: Prober, auth: bool = True) -> tuple[float, float, int]:
    """(ms to answer, the loop's longest stall meanwhile in ms, bytes)."""
    with probe:
        t0 = time.perf_counter()
        size = len(get(url, auth))
        elapsed = time.perf_counter() - t0
    return elapsed * 1000, probe.slowest_ms(), size


def throughput(m, base: str, seconds: int, work: Path) -> None:
    alone = perf(m.node.port, seconds, work / "alone.json")
    stop = threading.Event()
    scrapes: list[float] = []

    def scrape() -> None:
        while not stop.is_set():
            t0 = time.perf_counter()
            get(base + "/api/overview")
            get(base + "/api/queues")
            get(f"http://127.0.0.1:{m.prometheus_port}/metrics", auth=False)
            scrapes.append(time.perf_counter() - t0)
            stop.wait(scrape_interval_s)
    scraper = threading.Thread(target=scrape, daemon=True)
    scraper.start()
    scraped = perf(m.node.port, seconds, work / "scraped.json")
    stop.set()
    scraper.join()
    print(f"throughput alone:        publish {alone['published_rate']:.0f} msg/s, consume "
          f"{alone['consumed_rate']:.0f} msg/s")
    print(f"throughput with scraper: publish {scraped['published_rate']:.0f} msg/s, consume "
          f"{scraped['consumed_rate']:.0f} msg/s ({len(scrapes)} scrapes, "
          f"{statistics.median(scrapes) * 1000:.1f} ms each)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--queues", type=int, default=10000)
    p.add_argument("--time", type=int, default=20)
    p.add_argument("--requests", type=int, default=10)
    p.add_argument("--no-throughput", action="store_true", help="only the listings")
    a = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="warren-mgmt-bench-"))
    m = start_mgmt_node(work / "node", sample_ms=5000)
    try:
        base = f"http://127.0.0.1:{m.api_port}"
        if not a.no_throughput:  # on an empty node: alone, then with a scraper every 5 s
            throughput(m, base, a.time, work)
        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", m.node.port))
        ch = conn.channel()
        t0 = time.perf_counter()
        for i in range(a.queues):
            ch.queue_declare(f"bench-q-{i}")
        print(f"declared {a.queues} queues in {time.perf_counter() - t0:.1f} s")
        until(lambda: json.loads(get(base + "/api/overview"))["object_totals"]["queues"] >= a.queues,
              "the queues in the overview", timeout_s=600)
        until(lambda: sum(1 for q in json.loads(get(base + "/api/queues?columns=name,state"))
                          if q.get("state") == "running") >= a.queues, "every queue in a sample", timeout_s=600)
        probe = Prober(base + "/api/whoami")
        runs = [timed(base + "/api/queues", probe) for _ in range(a.requests)]
        times = sorted(r[0] for r in runs)
        print(f"/api/queues with {a.queues} queues: median {statistics.median(times):.0f} ms, max {times[-1]:.0f} ms "
              f"over {a.requests} requests, {runs[-1][2] / 1e6:.1f} MB; loop stalled {max(r[1] for r in runs):.0f} ms "
              "at most")
        for path in ("/api/queues?columns=name,messages", "/api/queues?page=7&page_size=100&sort=messages",
                     "/api/queues?page=1&page_size=100&name=q-99&use_regex=false"):
            elapsed, stall, size = timed(base + path, probe)
            print(f"{path}: {elapsed:.0f} ms, {size / 1e6:.2f} MB; loop stalled {stall:.0f} ms at most")
        # every queue busy: one message each, and a sample that shows them; every row changed
        for i in range(a.queues):
            ch.basic_publish("", f"bench-q-{i}", b"x")
        until(lambda: json.loads(get(base + "/api/overview"))["queue_totals"]["messages"] >= a.queues,
              "the messages in a sample", timeout_s=600)
        elapsed, stall, size = timed(base + "/api/queues", probe)
        print(f"/api/queues after a sample that changed every queue: {elapsed:.0f} ms; loop stalled {stall:.0f} ms "
              "at most")
        elapsed, stall, size = timed(f"http://127.0.0.1:{m.prometheus_port}/metrics/per-object", probe, auth=False)
        print(f"/metrics/per-object with {a.queues} queues: {elapsed:.0f} ms, {size / 1e6:.1f} MB; loop stalled "
              f"{stall:.0f} ms at most")
        conn.close()
    finally:
        m.node.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
