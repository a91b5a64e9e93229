"""The management plugin's costs: `/api/queues` latency with many queues, and the node's throughput
with and without a scraper polling the API and the metrics every 5 s. Prints; not a test.

    .venv/bin/python -m bench.mgmt_bench [--queues 10000] [--time 20] [--requests 10]

Starts its own node (scripts/local_cluster.py) with the management and Prometheus ports on free
ports and RabbitMQ's 5 s sample interval; throughput is bench.perf's scenario A (1 producer,
1 consumer, 1 KiB, auto-ack) run twice, first alone, then with the scraper.
"""
from __future__ import annotations

import argparse
import base64
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--queues", type=int, default=10000)
    p.add_argument("--time", type=int, default=20)
    p.add_argument("--requests", type=int, default=10)
    a = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="warren-mgmt-bench-"))
    m = start_mgmt_node(work / "node", sample_ms=5000)
    try:
        base = f"http://127.0.0.1:{m.api_port}"
        # throughput first, on an empty node: alone, then with a scraper every 5 s
        alone = perf(m.node.port, a.time, work / "alone.json")
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
        scraped = perf(m.node.port, a.time, work / "scraped.json")
        stop.set()
        scraper.join()
        print(f"throughput alone:        publish {alone['published_rate']:.0f} msg/s, consume "
              f"{alone['consumed_rate']:.0f} msg/s")
        print(f"throughput with scraper: publish {scraped['published_rate']:.0f} msg/s, consume "
              f"{scraped['consumed_rate']:.0f} msg/s ({len(scrapes)} scrapes, "
              f"{statistics.median(scrapes) * 1000:.1f} ms each)")
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
        times, size = [], 0
        for _ in range(a.requests):
            t0 = time.perf_counter()
            size = len(get(base + "/api/queues"))
            times.append(time.perf_counter() - t0)
        times.sort()
        print(f"/api/queues with {a.queues} queues: median {statistics.median(times) * 1000:.0f} ms, "
              f"max {times[-1] * 1000:.0f} ms over {a.requests} requests, {size / 1e6:.1f} MB")
        t0 = time.perf_counter()
        size = len(get(base + "/api/queues?columns=name,messages"))
        print(f"/api/queues?columns=name,messages: {(time.perf_counter() - t0) * 1000:.0f} ms, {size / 1e6:.2f} MB")
        t0 = time.perf_counter()
        size = len(get(f"http://127.0.0.1:{m.prometheus_port}/metrics/per-object", auth=False))
        print(f"/metrics/per-object with {a.queues} queues: {(time.perf_counter() - t0) * 1000:.0f} ms, "
              f"{size / 1e6:.1f} MB")
        conn.close()
    finally:
        m.node.stop()


if __name__ == "__main__":
    main()
