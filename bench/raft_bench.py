"""Raft over three real node processes: commits/s, fsyncs, latency, election and catch-up times.

Usage: .venv/bin/python -m bench.raft_bench [--quick] [--dir DIR] [--sync fdatasync|fsync|none]

Starts 3 nodes (actors/raft/launch.py; each its own run_node, WAL and tcp endpoint on 127.0.0.1)
and a client Runtime in this process. Every command carries a 1 KiB blob. Cases:
  1 group,    1 in flight      sequential commits: commits/s and p50/p99 commit latency
  1 group,    1000 in flight   pipelined
  100 groups, 1 in flight      round-robin over the groups, all sharing each node's WAL
  100 groups, 1000 in flight   10 in flight per group
then the time to elect a new leader after kill -9 of the leader's node, and the time for a member
whose node was down while N entries were committed to catch up after it restarts.
fsyncs/s and entries/fsync are the WAL actors' flushes summed over the three nodes. Prints
figures; asserts nothing (bench/, never timed assertions in tests).
"""
from __future__ import annotations

import argparse
import asyncio
import cProfile
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from actors.raft import machine
from actors.raft.client import RaftClient
from actors.raft.launch import RaftCluster
from actors.messages.raft import Committed, CommittedBatch, Proposal, ProposeBatch
from actors.runtime.address import Address
from actors.runtime.mailbox import Runtime

ENTRY_BYTES = 1024
# 100 members per node tick 100 cores and send 100 groups' heartbeats over 2 CPUs: at the
# default 10 ms tick that idle work costs ~20% of the 100-group throughput here, so these rows
# use a 50 ms tick (heartbeat 100 ms, election timeout 500-1000 ms). Elections themselves no
# longer need it: a vote is a WAL record in the group commit, not a small file of its own.
MANY_GROUPS_CONFIG = {"tick_ms": 50, "settings": {"election_ticks": 10, "heartbeat_ticks": 2}}
status_poll_s = 0.01


class Pipeline:
    """Keeps `window` commands in flight over `targets` (leader members) until `total` are done."""

    def __init__(self, runtime: Runtime, name: str, targets: list[Address], window: int,
                 total: int) -> None:
        self.runtime = runtime
        self.me = runtime.spawn(name, self)
        self.targets = targets
        self.window = window
        self.total = total
        self.command = machine.blob(b"x" * ENTRY_BYTES)
        self.sent_at: dict[int, int] = {}
        self.latencies_ns: list[int] = []
        self.errors = 0
        self.next = 0
        self.outbox: dict[Address, list] = {}
        self.done = asyncio.get_running_loop().create_future()

    def start(self) -> None:
        for _ in range(min(self.window, self.total)):
            self._send()

    def _send(self) -> None:
        """Queue one command; everything queued in a loop turn leaves as one ProposeBatch per target."""
        corr = self.next
        self.next += 1
        self.sent_at[corr] = time.perf_counter_ns()
        target = self.targets[corr % len(self.targets)]
        if not self.outbox:
            asyncio.get_running_loop().call_soon(self._flush)
        self.outbox.setdefault(target, []).append(Proposal(corr, self.command))

    def _flush(self) -> None:
        outbox, self.outbox = self.outbox, {}
        for target, batch in outbox.items():
            self.runtime.send(target, ProposeBatch(batch), sender=self.me)

    def receive(self, sender: Address, msg: Any) -> None:
        committed = type(msg) in (Committed, CommittedBatch)
        corrs = [o.corr for o in msg.outcomes] if type(msg) is CommittedBatch else [msg.corr]
        for corr in corrs:
            started = self.sent_at.pop(corr, None)
            if started is None:
                continue
            if committed:
                self.latencies_ns.append(time.perf_counter_ns() - started)
            else:
                self.errors += 1
            if self.next < self.total:
                self._send()
        if self.next >= self.total and not self.sent_at and not self.done.done():
            self.done.set_result(None)


def percentile(values: list[int], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))] if ordered else float("nan")


def leaders(cluster: RaftCluster) -> dict[str, str]:
    """group -> leader member id, waiting until every group has one."""
    deadline = time.monotonic() + 30
    while True:
        found: dict[str, tuple[int, str]] = {}
        for node in cluster.running():
            for group, st in cluster.status(node).items():
                if st["role"] == "leader" and st["term"] >= found.get(group, (0, ""))[0]:
                    found[group] = (st["term"], st["id"])
        if len(found) == cluster.groups or time.monotonic() > deadline:
            return {g: m for g, (_, m) in found.items()}
        time.sleep(0.05)


def term_sum(cluster: RaftCluster) -> int:
    return sum(st["term"] for node in cluster.running() for st in cluster.status(node).values())


def cpu_seconds(cluster: RaftCluster) -> dict[str, float]:
    """CPU time (user+system) so far of each running node's processes, by node name."""
    out = {}
    for name in cluster.running():
        marker = str(cluster.procs[name].config_path)
        total = 0.0
        for p in psutil.process_iter(["cmdline", "cpu_times"]):
            if p.info["cmdline"] and marker in p.info["cmdline"] and p.info["cpu_times"]:
                total += p.info["cpu_times"].user + p.info["cpu_times"].system
        out[name] = total
    return out


def wal_totals(cluster: RaftCluster) -> tuple[int, int]:
    flushes = entries = 0
    for node in cluster.running():
        stats = cluster.ask(node, "wal_stats")
        flushes += stats["flushes"]
        entries += stats["entries"]
    return flushes, entries


async def run_pipeline(runtime: Runtime, name: str, targets: list[Address], window: int,
                       total: int) -> tuple[float, Pipeline]:
    pipe = Pipeline(runtime, name, targets, window, total)
    started = time.perf_counter()
    pipe.start()
    await pipe.done
    elapsed = time.perf_counter() - started
    runtime.remove(name)
    return elapsed, pipe


def throughput_case(cluster: RaftCluster, label: str, window: int, total: int,
                    profile_dir: Path | None = None) -> dict:
    targets = [Address.parse(m) for m in leaders(cluster).values()]
    cpu_before: dict[str, float] = {}
    cpu_after: dict[str, float] = {}

    async def main() -> tuple[int, int, tuple[float, Pipeline]]:
        runtime = Runtime("client", cluster.directory)
        await runtime.start()
        try:
            await run_pipeline(runtime, "warmup", targets, window, min(total // 10, 2000))
            before = await asyncio.to_thread(wal_totals, cluster)
            cpu_before.update(await asyncio.to_thread(cpu_seconds, cluster))
            client_before = time.process_time()
            if profile_dir is None:
                result = await run_pipeline(runtime, "pipe", targets, window, total)
                cpu_after.update(await asyncio.to_thread(cpu_seconds, cluster))
                cpu_after["client"] = time.process_time() - client_before
                return (*before, result)
            for node in cluster.running():
                await asyncio.to_thread(cluster.ask, node, "profile",
                                        {"path": str(profile_dir / f"{node}.prof")})
            client_profile = cProfile.Profile()
            client_profile.enable()
            result = await run_pipeline(runtime, "pipe", targets, window, total)
            client_profile.disable()
            cpu_after.update(await asyncio.to_thread(cpu_seconds, cluster))
            cpu_after["client"] = time.process_time() - client_before
            client_profile.dump_stats(str(profile_dir / "client.prof"))
            for node in cluster.running():
                await asyncio.to_thread(cluster.ask, node, "profile", {"path": None})
            return (*before, result)
        finally:
            await runtime.close()
    flushes0, entries0, (elapsed, pipe) = asyncio.run(main())
    flushes1, entries1 = wal_totals(cluster)
    flushes, entries = flushes1 - flushes0, entries1 - entries0
    row = {"case": label, "commits_per_s": len(pipe.latencies_ns) / elapsed,
           "p50_ms": percentile(pipe.latencies_ns, 0.5) / 1e6,
           "p99_ms": percentile(pipe.latencies_ns, 0.99) / 1e6,
           "fsyncs_per_s": flushes / elapsed, "entries_per_fsync": entries / max(flushes, 1),
           "errors": pipe.errors}
    done = max(len(pipe.latencies_ns), 1)
    nodes_us = sorted(((cpu_after[n] - cpu_before[n]) / done * 1e6 for n in cpu_before),
                      reverse=True)
    client_us = cpu_after.get("client", 0.0) / done * 1e6
    row["cpu_us_per_commit"] = {"nodes": nodes_us, "client": client_us}
    print(f"{label:<28} {row['commits_per_s']:>10.0f} {row['p50_ms']:>8.2f} {row['p99_ms']:>8.2f} "
          f"{row['fsyncs_per_s']:>10.0f} {row['entries_per_fsync']:>14.1f} {pipe.errors:>6}  "
          f"{'/'.join(f'{u:.0f}' for u in nodes_us)} + {client_us:.0f}", flush=True)
    return row


def election_case(cluster: RaftCluster) -> dict:
    """kill -9 the leader's node; time until a survivor became leader (its own monotonic clock
    stamp, system-wide on Linux) and until a command commits (probing every survivor)."""
    old = leaders(cluster)["g0"]
    old_node = Address.parse(old).host.removeprefix("raft-")
    survivors = [n for n in cluster.running() if n != old_node]

    async def main() -> tuple[float, float]:
        runtime = Runtime("client", cluster.directory)
        await runtime.start()
        client = RaftClient(runtime, "client", cluster.members())
        try:
            # kill() also waits for the processes to be reaped; probe while it does
            killing = asyncio.create_task(asyncio.to_thread(cluster.kill, old_node))
            while True:
                futures = [client.send(Address(f"raft-{node}", "g0"), machine.incr("e"))[1]
                           for node in survivors]
                done, _ = await asyncio.wait(futures, timeout=0.02)
                if any(f.result()[0] == "ok" for f in done):  # only a new leader says ok
                    t_ok = time.monotonic()
                    t_kill = await killing
                    return t_kill, t_ok - t_kill
        finally:
            await runtime.close()
    t_kill, t_commit = asyncio.run(main())
    since = [st["leader_since"] for n in survivors
             for st in [cluster.status(n, ["g0"])["g0"]] if st["role"] == "leader"]
    t_leader = since[0] - t_kill if since else float("nan")
    print(f"election after kill -9 of the leader: new leader after {t_leader * 1000:.0f} ms, "
          f"first commit after {t_commit * 1000:.0f} ms", flush=True)
    cluster.start(old_node)
    return {"leader_ms": t_leader * 1000, "commit_ms": t_commit * 1000}


def catchup_case(cluster: RaftCluster, entries: int) -> dict:
    """A follower's node is down while `entries` commit; time for it to catch up on restart."""
    lead = leaders(cluster)["g0"]
    lead_node = Address.parse(lead).host.removeprefix("raft-")
    follower = next(n for n in cluster.running() if n != lead_node)
    cluster.kill(follower)

    async def fill() -> None:
        runtime = Runtime("client", cluster.directory)
        await runtime.start()
        try:
            await run_pipeline(runtime, "fill", [Address.parse(lead)], 1000, entries)
        finally:
            await runtime.close()
    asyncio.run(fill())
    commit = cluster.status(lead_node, ["g0"])["g0"]["commit"]
    t0 = time.perf_counter()
    cluster.start(follower)
    t_ready = time.perf_counter() - t0
    while cluster.status(follower, ["g0"])["g0"]["applied"] < commit:
        time.sleep(status_poll_s)
    t_caught = time.perf_counter() - t0
    print(f"catch-up of a member down for {entries} entries: node ready after "
          f"{t_ready:.2f} s, applied the leader's commit index after {t_caught:.2f} s "
          f"({entries / max(t_caught - t_ready, 1e-9):.0f} entries/s after ready)", flush=True)
    return {"ready_s": t_ready, "caught_up_s": t_caught}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller counts (about a minute)")
    parser.add_argument("--dir", default=None, help="where the nodes' data directories go")
    parser.add_argument("--sync", default="fdatasync", choices=("fdatasync", "fsync", "none"))
    parser.add_argument("--profile", type=Path, default=None,
                        help="write cProfile stats of each node and the client for the "
                             "1-group pipelined case into this directory")
    parser.add_argument("--only", default=None, help="run only: one, many, election, catchup")
    args = parser.parse_args()
    seq, piped, catchup = (300, 20_000, 10_000) if args.quick else (2_000, 100_000, 100_000)
    root = Path(tempfile.mkdtemp(prefix="raft_bench_", dir=args.dir))
    host_config = {"sync_method": args.sync}
    print(f"3 nodes, entry {ENTRY_BYTES} B, sync={args.sync}, data under {root}")
    print(f"{'case':<28} {'commits/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'fsyncs/s':>10} "
          f"{'entries/fsync':>14} {'errors':>6}  CPU us/commit: nodes + client")
    try:
        if args.only in (None, "one", "election", "catchup"):
            cluster = RaftCluster(root / "one", groups=1, host_config=host_config)
            cluster.start()
            try:
                if args.only in (None, "one"):
                    throughput_case(cluster, "1 group, 1 in flight", 1, seq)
                    throughput_case(cluster, "1 group, 1000 in flight", 1000, piped,
                                    args.profile)
                if args.only in (None, "election"):
                    election_case(cluster)
                if args.only in (None, "catchup"):
                    catchup_case(cluster, catchup)
            finally:
                cluster.stop()
        if args.only in (None, "many"):
            many_config = {**host_config, **MANY_GROUPS_CONFIG}
            cluster = RaftCluster(root / "many", groups=100, host_config=many_config)
            cluster.start()
            try:
                started = time.perf_counter()
                leaders(cluster)
                print(f"100 groups electing at once: every group has a leader "
                      f"{time.perf_counter() - started:.2f} s after the nodes were up", flush=True)
                terms = term_sum(cluster)
                throughput_case(cluster, "100 groups, 1 in flight", 1, seq)
                throughput_case(cluster, "100 groups, 1000 in flight", 1000, piped)
                print(f"elections during the 100-group runs: {term_sum(cluster) - terms} term "
                      "changes (summed over all members)", flush=True)
            finally:
                cluster.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
