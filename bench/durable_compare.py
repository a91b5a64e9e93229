"""Durable classic queues, warren against Debian's RabbitMQ in the same run (issue 5). Prints; not a test.

    .venv/bin/python -m bench.durable_compare [--quick] [--time S] [--messages N]
        [--warren-port P] [--rabbit-port P] [--no-rabbitmq]

1. Throughput: bench.perf with a durable queue, persistent 1 KiB and 16 KiB messages, confirms
   (window 1000), manual acks (prefetch 300), 1 producer and 1 consumer.
2. Backlog: publish N x 1 KiB persistent messages (confirm window 1000) to a durable queue with no
   consumer, then drain them (prefetch 300, acks of 50 with multiple=true). Reports msg/s both
   ways, the broker's idle and peak RSS and PSS over both phases (sums over its processes, sampled
   every 0.2 s; a fresh warren node is 8 forked Python processes, whose shared pages RSS counts
   8 times and PSS once), and
   the bytes of its data directory after the publish and after the drain (GC given up to
   `gc_wait_s` to run). warren runs once with a default queue and once with x-queue-mode=lazy;
   RabbitMQ with a default queue and lazy too. Each broker is restarted before each backlog run,
   so that its RSS starts from a node that ran nothing else.
`--phases` picks a subset (e.g. `--phases lazy --no-rabbitmq`). `--quick` runs 5 s throughput phases and a 100,000-message backlog. A fresh warren node and a
fresh RabbitMQ (scripts/rabbitmq_oracle) are started in temporary directories and stopped at the end.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from pika import spec

from bench.compare_brokers import PY, ROOT, Broker, Rabbit, Warren, add_broker_options
from bench.compare_charts import durable_chart
from bench.compare_progress import Progress
from bench.perf import framing
from wire.confirm_tracker import ConfirmTracker
from bench.perf.connection import connect, parse_uri

rss_sample_s = 0.2
gc_wait_s = 15.0
confirm_window = 1000
prefetch = 300
ack_every = 50


# ---------------------------------------------------------------- throughput (bench.perf)
def throughput(broker: Broker, size: int, seconds: float, out: Path) -> dict:
    path = out / f"{broker.name}-durable-{size}.json"
    subprocess.run([PY, "-m", "bench.perf", "--uri", broker.uri, "--producers", "1", "--consumers", "1",
                    "--size", str(size), "--persistent", "--durable", "--confirm", str(confirm_window),
                    "--prefetch", str(prefetch), "--time", str(seconds), "--warmup", str(min(3, seconds / 3)),
                    "--json", str(path)], cwd=ROOT, stdout=sys.stderr, check=False)  # its line a second: progress
    try:
        return json.loads(path.read_text())["summary"]
    except (OSError, ValueError, KeyError):
        return {}


# ---------------------------------------------------------------- backlog
class Peak:
    """Samples a broker's RSS on a thread until stopped; keeps the peak."""

    def __init__(self, broker: Broker) -> None:
        self.broker, self.peak, self.peak_pss = broker, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(rss_sample_s):
            rss, pss = self.broker.memory()
            self.peak, self.peak_pss = max(self.peak, rss), max(self.peak_pss, pss)

    def stop(self) -> tuple[int, int]:
        self._stop.set()
        self._thread.join()
        return self.peak, self.peak_pss


class Client:
    """A bench.perf connection handler that counts confirms and deliveries."""

    def __init__(self) -> None:
        self.tracker = ConfirmTracker()
        self.confirmed = 0
        self.consumed = 0
        self.last_tag = 0
        self.wake = asyncio.Event()
        self.proto = None

    def on_confirm(self, tag: int, multiple: bool, ack: bool) -> None:
        self.confirmed += self.tracker.settle(tag, multiple)
        self.wake.set()

    def on_deliver(self, tag: int, _ts: int | None, _now: int) -> None:
        self.consumed += 1
        self.last_tag = tag
        if self.consumed % ack_every == 0:
            self.proto.send_method(spec.Basic.Ack(tag, multiple=True))
        self.wake.set()

    def on_return(self) -> None: ...
    def on_blocked(self, blocked: bool) -> None: ...

    def on_closed(self, error: BaseException) -> None:
        self.wake.set()


async def publish_backlog(uri: str, queue: str, n: int, size: int) -> float:
    c = Client()
    c.proto = proto = await connect(parse_uri(uri), c)
    await proto.call(spec.Confirm.Select())
    template = framing.publish_template(1, "", queue, size, proto.frame_max, True, False)
    started = time.monotonic()
    sent = 0
    progress = Progress("published (confirmed)", n)
    while c.confirmed < n:
        progress.update(c.confirmed)
        room = min(confirm_window - c.tracker.outstanding, n - sent, 256)
        if room > 0 and proto.writable.is_set():
            proto.send(template.frames(time.time_ns()) * room)
            sent += room
            c.tracker.publish(room)
            await asyncio.sleep(0)
            continue
        c.wake.clear()
        await c.wake.wait()
        if proto.closed is not None:
            raise SystemExit(f"publisher closed: {proto.closed}")
    elapsed = time.monotonic() - started
    progress.done(c.confirmed)
    await proto.close()
    return n / elapsed


async def drain_backlog(uri: str, queue: str, n: int) -> float:
    c = Client()
    c.proto = proto = await connect(parse_uri(uri), c)
    await proto.call(spec.Basic.Qos(prefetch_count=prefetch))
    started = time.monotonic()
    await proto.call(spec.Basic.Consume(queue=queue, no_ack=False))
    progress = Progress("drained", n)
    while c.consumed < n:
        progress.update(c.consumed)
        c.wake.clear()
        await c.wake.wait()
        if proto.closed is not None:
            raise SystemExit(f"consumer closed: {proto.closed}")
    elapsed = time.monotonic() - started
    progress.done(c.consumed)
    proto.send_method(spec.Basic.Ack(c.last_tag, multiple=True))
    await proto.close()
    return n / elapsed


async def declare(uri: str, queue: str, arguments: dict, delete: bool = False) -> None:
    c = Client()
    proto = await connect(parse_uri(uri), c)
    if delete:
        await proto.call(spec.Queue.Delete(queue=queue))
    else:
        await proto.call(spec.Queue.Declare(queue=queue, durable=True, arguments=arguments))
    await proto.close()


def backlog(broker: Broker, n: int, lazy: bool) -> dict:
    queue = f"backlog-{'lazy' if lazy else 'default'}"
    asyncio.run(declare(broker.uri, queue, {"x-queue-mode": "lazy"} if lazy else {}))
    base_rss, base_pss = broker.memory()
    peak = Peak(broker)
    pub_rate = asyncio.run(publish_backlog(broker.uri, queue, n, 1024))
    disk_full = broker.disk_bytes()
    drain_rate = asyncio.run(drain_backlog(broker.uri, queue, n))
    peak_rss, peak_pss = peak.stop()
    deadline = time.monotonic() + gc_wait_s
    disk_after = broker.disk_bytes()
    while time.monotonic() < deadline and disk_after > disk_full / 10:
        time.sleep(0.5)
        disk_after = broker.disk_bytes()
    asyncio.run(declare(broker.uri, queue, {}, delete=True))
    return {"broker": broker.name, "mode": "lazy" if lazy else "default", "messages": n,
            "publish_rate": round(pub_rate), "drain_rate": round(drain_rate),
            "rss_before_mb": round(base_rss / 2**20), "peak_rss_mb": round(peak_rss / 2**20),
            "pss_before_mb": round(base_pss / 2**20), "peak_pss_mb": round(peak_pss / 2**20),
            "disk_full_mb": round(disk_full / 2**20, 1), "disk_after_mb": round(disk_after / 2**20, 1)}


# ---------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="5 s phases, 100,000-message backlog")
    p.add_argument("--time", type=float, help="seconds per throughput run (default 20, quick 5)")
    p.add_argument("--messages", type=int, help="backlog size (default 1,000,000, quick 100,000)")
    add_broker_options(p, 5691, 5692)
    p.add_argument("--phases", default="throughput,default,lazy",
                   help="comma-separated subset of throughput, default (backlog), lazy (backlog)")
    a = p.parse_args(argv)
    seconds = a.time or (5 if a.quick else 20)
    n = a.messages or (100_000 if a.quick else 1_000_000)
    work = Path(tempfile.mkdtemp(prefix="warren-durable-"))
    out = ROOT / "bench" / "out"
    out.mkdir(exist_ok=True)
    brokers: list[Broker] = [Warren("warren", a.warren_port, work / "warren")]
    if not a.no_rabbitmq:
        brokers.append(Rabbit("rabbitmq", a.rabbit_port, work / "rabbit"))
    through: list[tuple[str, int, dict]] = []
    backlogs: list[dict] = []
    try:
        for broker in brokers:
            broker.data_dir.mkdir(parents=True)
            # a fresh start for each phase: RSS is measured from a node that ran nothing before
            for phase in a.phases.split(","):
                print(f"== {broker.name}: starting for {phase}", file=sys.stderr, flush=True)
                broker.start()
                try:
                    if phase == "throughput":
                        for size in (1024, 16384):
                            print(f"== {broker.name}: throughput {size} B, {seconds} s", file=sys.stderr, flush=True)
                            through.append((broker.name, size, throughput(broker, size, seconds, out)))
                    else:
                        print(f"== {broker.name}: backlog of {n}, {phase}", file=sys.stderr, flush=True)
                        backlogs.append(backlog(broker, n, phase == "lazy"))
                finally:
                    broker.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"durable queue, persistent, confirms (window {confirm_window}), manual acks (prefetch {prefetch}), "
          f"1 producer 1 consumer, {seconds:g} s each")
    print("| broker | body | sent msg/s | confirmed msg/s | received msg/s | p50 / p99 latency ms |")
    print("|---|---|---|---|---|---|")
    for name, size, s in through:
        lat = s.get("latency_ms", {})
        print(f"| {name} | {size} B | {s.get('published_rate', 0):.0f} | {s.get('confirmed_rate', 0):.0f} | "
              f"{s.get('consumed_rate', 0):.0f} | {lat.get('p50')} / {lat.get('p99')} |")
    print()
    print(f"backlog: {n} x 1 KiB persistent, published with no consumer, then drained")
    print("| broker | queue mode | publish msg/s | drain msg/s | RSS idle -> peak MB | PSS idle -> peak MB | "
          "disk after publish MB | disk after drain + GC MB |")
    print("|---|---|---|---|---|---|---|---|")
    for b in backlogs:
        print(f"| {b['broker']} | {b['mode']} | {b['publish_rate']} | {b['drain_rate']} | "
              f"{b['rss_before_mb']} -> {b['peak_rss_mb']} | {b['pss_before_mb']} -> {b['peak_pss_mb']} | "
              f"{b['disk_full_mb']} | {b['disk_after_mb']} |")
    result = {"throughput": through, "backlog": backlogs}
    (out / "durable_compare.json").write_text(json.dumps(result, indent=1))
    durable_chart(result, out / "durable_compare.png")
    print(f"\nJSON: {out / 'durable_compare.json'}, chart: {out / 'durable_compare.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
