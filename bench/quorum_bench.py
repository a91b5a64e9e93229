"""Quorum queues on three real node processes (no AMQP front end): throughput, latency, a long
backlog, and many idle queues.

Usage: .venv/bin/python -m bench.quorum_bench [--quick] [--only throughput|latency|backlog|idle]
       [--messages N] [--backlog N] [--queues N] [--dir DIR] [--wal-mib N]

Nodes: actors/quorum/launch.py's QuorumCluster, one quorum host per node (actors/quorum/host.py, its
default settings: 250 ms ticks, heartbeats every 500 ms), real fdatasync. The client is this process:
one Runtime whose QueueDrivers (actors/quorum/drive.py) play a publishing and a consuming channel
through the channel-side QuorumClient, as RabbitMQ's PerfTest plays them over AMQP. Cases:
- throughput: 1 producer, 1 consumer, 1 KiB bodies, at most 1,000 unconfirmed (the confirms window),
  prefetch 300, each delivery acked in the loop turn it arrives: confirms/s and received/s over the
  run, confirm latency under that load, CPU µs per message of each node and of the client, fsyncs/s;
- latency: the same channels at a steady 1,000 msg/s: publish -> confirm and publish -> deliver
  p50/p99;
- backlog: `--backlog` messages (1,000,000) published with no consumer, then consumed: time, the
  quorum hosts' PSS after the fill and after the drain, segment bytes on disk (the machine keeps
  per-message metadata only; the WAL memtables hold up to wal_max_size_bytes of recent entries,
  `--wal-mib` sets it);
- idle: `--queues` quorum queues (1,000) with a member on each node, elected and left alone: CPU
  of each node over 20 s and the quorum hosts' PSS, per queue.
Prints figures; asserts nothing (bench/, never timed assertions in tests).
"""
from __future__ import annotations

import argparse
import asyncio
import shutil
import struct
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from actors.quorum.drive import QueueDriver
from actors.quorum.launch import QueueRef, QuorumCluster
from actors.runtime.mailbox import Runtime
from bench.raft_bench import cpu_seconds, percentile

BODY_BYTES = 1024
WINDOW = 1000
PREFETCH = 300
poll_s = 0.05
release_wait_max_s = 120.0  # a drained queue's segments must be gone by then


def wait_leaders(cluster: QuorumCluster, refs: list[QueueRef], timeout_s: float = 600.0) -> float:
    started = time.monotonic()
    uids = {ref.uid for ref in refs}
    while True:
        led = set()
        for node in cluster.running():
            for uid, st in cluster.ask(node, "status", timeout=60).items():
                if uid in uids and st["role"] == "leader":
                    led.add(uid)
        if led == uids:
            return time.monotonic() - started
        if time.monotonic() - started > timeout_s:
            raise TimeoutError(f"{len(uids - led)} queues without a leader")
        time.sleep(poll_s * 4)


def host_pss(cluster: QuorumCluster) -> dict[str, int]:
    """PSS bytes of each node's quorum host process."""
    return {n: psutil.Process(cluster.ask(n, "pid", timeout=120)).memory_full_info().pss
            for n in cluster.running()}


def slow_flushes(cluster: QuorumCluster) -> list[float]:
    """Seconds of every WAL flush (a rollover writes the memtables into segments) that took
    longer than actors/raft/wal.py's slow_flush_s, from the nodes' logs."""
    found = []
    for node in cluster.nodes:
        for line in cluster.procs[node].log().splitlines():
            if "wal.slow_flush" in line:
                found.append(float(line.split("seconds=")[1].split()[0]))
    return sorted(found)


def leader_changes(cluster: QuorumCluster) -> int:
    return sum(cluster.procs[n].log().count("quorum.leader_changed") for n in cluster.nodes)


def wal_flushes(cluster: QuorumCluster) -> int:
    return sum(cluster.ask(n, "wal_stats")["flushes"] for n in cluster.running())


def stamped(n: int, start: int) -> list[bytes]:
    """Bodies carrying their publish time (perf_counter_ns) and sequence number."""
    now = time.perf_counter_ns()
    pad = b"x" * (BODY_BYTES - 16)
    return [struct.pack(">QQ", now, start + k) + pad for k in range(n)]


async def publish_window(pub: QueueDriver, total: int, *, rate_per_s: float | None = None) -> None:
    """Publish `total` bodies keeping at most WINDOW unconfirmed (or at a steady rate)."""
    sent = 0
    base = pub.confirmed
    started = time.perf_counter()
    while pub.confirmed - base < total:
        if rate_per_s is not None:
            due = min(total, int((time.perf_counter() - started) * rate_per_s) + 1)
            if sent < due:
                pub.publish(stamped(due - sent, sent))
                sent = due
            await asyncio.sleep(0.002)
            continue
        room = WINDOW - (sent - (pub.confirmed - base))
        if sent < total and room > 0:
            n = min(room, 200, total - sent)
            pub.publish(stamped(n, sent))
            sent += n
            await asyncio.sleep(0)
            continue
        confirmed = pub.confirmed
        await pub.until(lambda: pub.confirmed > confirmed, 120)


def deliver_latencies(con: QueueDriver, since: int = 0) -> list[int]:
    return [d_at - struct.unpack_from(">Q", d.body)[0] for d, d_at in zip(con.deliveries[since:], con.arrival_ns[since:])]


class TimedDriver(QueueDriver):
    """A QueueDriver that notes when each delivery arrived (for publish -> deliver latency)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.arrival_ns: list[int] = []

    def _up(self, msg: Any) -> None:
        before = len(self.deliveries)
        super()._up(msg)
        if len(self.deliveries) > before:
            self.arrival_ns.extend([time.perf_counter_ns()] * (len(self.deliveries) - before))


def with_client(cluster: QuorumCluster, body: Any) -> Any:
    async def main() -> Any:
        runtime = Runtime("client", cluster.directory)
        await runtime.start()
        try:
            return await body(runtime)
        finally:
            await runtime.close()
    return asyncio.run(main())


def throughput_case(cluster: QuorumCluster, ref: QueueRef, total: int) -> dict:
    cpu: dict[str, dict[str, float]] = {}

    async def body(runtime: Runtime) -> tuple[float, float, TimedDriver, TimedDriver]:
        pub = TimedDriver(runtime, "p", ref.members)
        con = TimedDriver(runtime, "c", ref.members)
        await con.consume("ctag", PREFETCH)
        await publish_window(pub, min(total // 10, 5000))  # warm up
        await con.until(lambda: len(con.deliveries) >= pub.confirmed, 60)
        warm = len(con.deliveries)
        pub.latencies_ns.clear()
        cpu["before"] = await asyncio.to_thread(cpu_seconds, cluster)
        client_before = time.process_time()
        started = time.perf_counter()
        await publish_window(pub, total)
        confirmed_s = time.perf_counter() - started
        await con.until(lambda: len(con.deliveries) >= warm + total, 120)
        received_s = time.perf_counter() - started
        cpu["after"] = await asyncio.to_thread(cpu_seconds, cluster)
        cpu["after"]["client"] = time.process_time() - client_before
        pub.close()
        con.close()
        return confirmed_s, received_s, pub, con
    flushes0 = wal_flushes(cluster)
    confirmed_s, received_s, pub, con = with_client(cluster, body)
    flushes = wal_flushes(cluster) - flushes0
    nodes_us = sorted(((cpu["after"][n] - cpu["before"][n]) / total * 1e6 for n in cpu["before"]), reverse=True)
    row = {"confirms_per_s": total / confirmed_s, "received_per_s": total / received_s,
           "confirm_p50_ms": percentile(pub.latencies_ns, 0.5) / 1e6,
           "confirm_p99_ms": percentile(pub.latencies_ns, 0.99) / 1e6,
           "fsyncs_per_s": flushes / received_s, "cpu_us": nodes_us,
           "client_us": cpu["after"]["client"] / total * 1e6, "switches": pub.client.switches}
    print(f"throughput ({total} x {BODY_BYTES} B, window {WINDOW}, prefetch {PREFETCH}): "
          f"{row['confirms_per_s']:.0f} confirms/s, {row['received_per_s']:.0f} received/s; confirm latency "
          f"p50 {row['confirm_p50_ms']:.1f} ms p99 {row['confirm_p99_ms']:.1f} ms; {row['fsyncs_per_s']:.0f} "
          f"fsyncs/s (3 nodes); CPU us/msg nodes {'/'.join(f'{u:.0f}' for u in nodes_us)} + client "
          f"{row['client_us']:.0f}", flush=True)
    return row


def latency_case(cluster: QuorumCluster, ref: QueueRef, seconds: float, rate: float = 1000.0) -> dict:
    async def body(runtime: Runtime) -> tuple[list[int], list[int]]:
        pub = TimedDriver(runtime, "lp", ref.members)
        con = TimedDriver(runtime, "lc", ref.members)
        await con.consume("ltag", PREFETCH)
        total = int(seconds * rate)
        await publish_window(pub, total, rate_per_s=rate)
        await con.until(lambda: len(con.deliveries) >= total, 60)
        pub.close()
        con.close()
        return pub.latencies_ns, deliver_latencies(con)
    confirm_ns, deliver_ns = with_client(cluster, body)
    row = {"confirm_p50_ms": percentile(confirm_ns, 0.5) / 1e6, "confirm_p99_ms": percentile(confirm_ns, 0.99) / 1e6,
           "deliver_p50_ms": percentile(deliver_ns, 0.5) / 1e6, "deliver_p99_ms": percentile(deliver_ns, 0.99) / 1e6}
    print(f"latency at a steady {rate:.0f} msg/s for {seconds:.0f} s: publish -> confirm p50 "
          f"{row['confirm_p50_ms']:.2f} ms p99 {row['confirm_p99_ms']:.2f} ms; publish -> deliver p50 "
          f"{row['deliver_p50_ms']:.2f} ms p99 {row['deliver_p99_ms']:.2f} ms", flush=True)
    return row


def segment_bytes(cluster: QuorumCluster, ref: QueueRef) -> dict[str, int]:
    return {n: cluster.ask(n, "disk")[ref.uid]["segment_bytes"] for n in cluster.running()}


def backlog_case(cluster: QuorumCluster, ref: QueueRef, total: int) -> dict:
    mib = 1 << 20
    before = host_pss(cluster)
    peak: dict[str, int] = dict(before)

    async def sample(stop: asyncio.Event) -> None:
        while not stop.is_set():
            for node, pss in (await asyncio.to_thread(host_pss, cluster)).items():
                peak[node] = max(peak[node], pss)
            try:
                await asyncio.wait_for(stop.wait(), 2.0)
            except TimeoutError:
                pass

    async def fill(runtime: Runtime) -> float:
        stop = asyncio.Event()
        sampler = asyncio.create_task(sample(stop))
        pub = QueueDriver(runtime, "bp", ref.members)
        started = time.perf_counter()
        await publish_window(pub, total)
        stop.set()
        await sampler
        pub.close()
        return time.perf_counter() - started
    changes = leader_changes(cluster)
    fill_s = with_client(cluster, fill)
    filled = host_pss(cluster)
    stalls = slow_flushes(cluster)
    changes = leader_changes(cluster) - changes
    disk_filled = segment_bytes(cluster, ref)
    status = cluster.status(cluster.leader_of(ref), ref)

    async def drain(runtime: Runtime) -> float:
        con = QueueDriver(runtime, "bc", ref.members)
        started = time.perf_counter()
        await con.consume("btag", PREFETCH)
        await con.until(lambda: len(con.deliveries) >= total, 3600)
        await con.until(lambda: not con.client.consumers["btag"].held, 60)
        con.close()
        return time.perf_counter() - started
    drain_s = with_client(cluster, drain)
    # a drained queue snapshots on an idle tick and drops its segments: how long that takes is a figure
    released = time.monotonic()
    while any(segment_bytes(cluster, ref).values()) and time.monotonic() - released < release_wait_max_s:
        time.sleep(poll_s * 4)
    release_s = time.monotonic() - released
    drained = host_pss(cluster)
    disk_drained = segment_bytes(cluster, ref)
    fmt = lambda d: "/".join(f"{v / mib:.0f}" for v in d.values())  # noqa: E731
    print(f"backlog of {total} x {BODY_BYTES} B: filled in {fill_s:.1f} s ({total / fill_s:.0f}/s), "
          f"drained in {drain_s:.1f} s ({total / drain_s:.0f}/s); ready at the leader {status['messages_ready']}; "
          f"quorum host PSS MiB before {fmt(before)}, peak while filling {fmt(peak)}, filled {fmt(filled)}, "
          f"drained {fmt(drained)}; segment MiB filled {fmt(disk_filled)}, drained {fmt(disk_drained)} "
          f"({release_s:.1f} s after the drain); "
          f"WAL flushes over 0.5 s while filling: {len(stalls)} (longest {max(stalls, default=0):.1f} s), "
          f"leader changes logged while filling: {changes}", flush=True)
    return {"fill_s": fill_s, "drain_s": drain_s, "pss_filled": filled, "pss_drained": drained,
            "disk_filled": disk_filled, "disk_drained": disk_drained}


def idle_case(cluster: QuorumCluster, queues: int, seconds: float = 20.0) -> dict:
    base_pss = host_pss(cluster)
    started = time.monotonic()
    refs = cluster.declare_many([f"idle{k}" for k in range(queues)])
    declared_s = time.monotonic() - started
    elected_s = wait_leaders(cluster, refs)
    time.sleep(5)  # let the elections' WAL writes and snapshots settle
    cpu0, t0 = cpu_seconds(cluster), time.monotonic()
    time.sleep(seconds)
    cpu1, elapsed = cpu_seconds(cluster), time.monotonic() - t0
    pss = host_pss(cluster)
    cpu_pct = {n: (cpu1[n] - cpu0[n]) / elapsed * 100 for n in cpu0}
    per_queue_kib = {n: (pss[n] - base_pss[n]) / queues / 1024 for n in pss}
    print(f"{queues} idle quorum queues on 3 nodes: declared in {declared_s:.1f} s, all led "
          f"{elected_s:.1f} s later; idle CPU per node {'/'.join(f'{v:.1f}' for v in cpu_pct.values())}% of a core; "
          f"quorum host PSS MiB {'/'.join(f'{v / (1 << 20):.0f}' for v in pss.values())} "
          f"({'/'.join(f'{v:.1f}' for v in per_queue_kib.values())} KiB per queue)", flush=True)
    return {"cpu_pct": cpu_pct, "pss": pss, "per_queue_kib": per_queue_kib}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller counts")
    parser.add_argument("--only", default=None, help="throughput, latency, backlog or idle")
    parser.add_argument("--messages", type=int, default=None, help="messages in the throughput case")
    parser.add_argument("--backlog", type=int, default=None, help="messages in the backlog case")
    parser.add_argument("--queues", type=int, default=None, help="queues in the idle case")
    parser.add_argument("--wal-mib", type=int, default=None, help="raft.wal_max_size_bytes, MiB")
    parser.add_argument("--dir", default=None, help="where the nodes' data directories go")
    args = parser.parse_args()
    messages = args.messages or (20_000 if args.quick else 200_000)
    backlog = args.backlog or (50_000 if args.quick else 1_000_000)
    queues = args.queues or (100 if args.quick else 1_000)
    host_config: dict = {}
    if args.wal_mib:
        host_config["wal_max_size_bytes"] = args.wal_mib << 20
    root = Path(tempfile.mkdtemp(prefix="quorum_bench_", dir=args.dir))
    print(f"3 nodes, data under {root}, host config {host_config or 'defaults'}", flush=True)
    try:
        for case in ("throughput", "latency", "backlog", "idle"):
            if args.only not in (None, case):
                continue
            cluster = QuorumCluster(root / case, host_config=host_config)
            cluster.start()
            try:
                if case == "idle":
                    idle_case(cluster, queues)
                    continue
                ref = cluster.declare(case)
                wait_leaders(cluster, [ref])
                if case == "throughput":
                    throughput_case(cluster, ref, messages)
                elif case == "latency":
                    latency_case(cluster, ref, 10 if args.quick else 30)
                else:
                    backlog_case(cluster, ref, backlog)
            finally:
                cluster.stop()
                shutil.rmtree(root / case, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
