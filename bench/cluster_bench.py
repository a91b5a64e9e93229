"""Clustering figures (issue 11). Prints; not a test.

    .venv/bin/python -m bench.cluster_bench [--time S] [--changes N] [--elections N] [--skip-throughput]

1. Metadata changes per second: N x (queue.declare + queue.bind) through one follower node of a
   three-node cluster (each change is a Raft commit on a majority, fsynced), against the same on a
   single node.
2. Time from `start_node --join` to serving (the node's `ready` file and its AMQP port), for a
   fourth node joining the three.
3. Time to elect a new metadata leader after kill -9 of the leader's node (the first moment both
   survivors name the same new leader), repeated N times (the killed node is restarted between).
4. Publish/consume throughput with bench.perf through node A to a classic queue on node B (1 KiB,
   confirms 1000, manual acks prefetch 300, durable queue, persistent), against the same with
   everything on one node.
Nodes are started in a temporary directory and stopped at the end.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pika

from bench.compare_brokers import PY, ROOT
from scripts.local_cluster import Cluster, start_node, wait_serving

poll_s = 0.01


def metadata_changes(url: str, changes: int) -> float:
    """Changes (a declare and a bind each) per second through the node at `url`."""
    with pika.BlockingConnection(pika.URLParameters(url)) as conn:
        ch = conn.channel()
        ch.exchange_declare("bench.x", "direct")
        started = time.perf_counter()
        for i in range(changes):
            ch.queue_declare(f"bench.q{i}")
            ch.queue_bind(f"bench.q{i}", "bench.x", f"k{i}")
        elapsed = time.perf_counter() - started
        for i in range(changes):
            ch.queue_delete(f"bench.q{i}")
    return changes / elapsed


def leader_of(cluster: Cluster, among: list[str]) -> str | None:
    seen = set()
    for name in among:
        try:
            seen.add(cluster.cluster_status(name)["metadata_leader"])
        except Exception:
            return None
    leader = seen.pop() if len(seen) == 1 else None
    return leader.split("@")[0] if leader and leader.split("@")[0] in among else None


def election_after_kill(cluster: Cluster) -> float:
    old = None
    while old is None:
        old = leader_of(cluster, cluster.names)
    rest = [n for n in cluster.names if n != old]
    killed_at = time.monotonic()  # the signals go out at once; kill() then waits for the processes to end
    cluster.kill(old)
    while leader_of(cluster, rest) is None:
        time.sleep(poll_s)  # polling for the moment a leader is agreed on
    elapsed = time.monotonic() - killed_at
    cluster.restart(old)
    return elapsed


def perf(uri: str, queue: str, seconds: float, out: Path) -> dict:
    path = out / f"perf-{queue}.json"
    subprocess.run([PY, "-m", "bench.perf", "--uri", uri, "--producers", "1", "--consumers", "1", "--size", "1024",
                    "--persistent", "--confirm", "1000", "--prefetch", "300", "--queue", queue, "--predeclared",
                    "--time", str(seconds), "--warmup", str(min(3, seconds / 3)), "--json", str(path)],
                   cwd=ROOT, stdout=sys.stderr, check=False)
    return json.loads(path.read_text())["summary"]


def declare_durable(url: str, queue: str) -> None:
    with pika.BlockingConnection(pika.URLParameters(url)) as conn:
        conn.channel().queue_declare(queue, durable=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--time", type=float, default=15.0, help="seconds per throughput run")
    p.add_argument("--changes", type=int, default=500)
    p.add_argument("--elections", type=int, default=3)
    p.add_argument("--skip-throughput", action="store_true")
    a = p.parse_args()
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="warren-cluster-bench-") as tmp:
        root = Path(tmp)
        single = start_node(root / "single")
        try:
            results["changes_per_s_one_node"] = metadata_changes(single.url, a.changes)
            if not a.skip_throughput:
                declare_durable(single.url, "bench.one")
                results["one_node"] = perf(single.url, "bench.one", a.time, root)
        finally:
            single.stop()
        cluster = Cluster(root / "cluster", 3).start()
        try:
            leader = None
            while leader is None:
                leader = leader_of(cluster, cluster.names)
            follower = next(n for n in cluster.names if n != leader)
            results["changes_per_s_via_follower_of_three"] = metadata_changes(cluster.url(follower), a.changes)
            results["changes_per_s_via_leader_of_three"] = metadata_changes(cluster.url(leader), a.changes)
            joiner = Cluster(root / "cluster", 4)  # the same names, one more node
            joiner.ports.update(cluster.ports)
            started = time.monotonic()
            node = start_node(root / "cluster" / "n4", "--join", f"127.0.0.1:{cluster.ports['n1'][1]}",
                              port=joiner.ports["n4"][0], cluster_port=joiner.ports["n4"][1], wait=False)
            wait_serving(node)
            results["join_to_serving_s"] = time.monotonic() - started
            node.stop()
            # a stopped member still votes; forget it so that three nodes remain for the elections
            n4 = cluster.node_name("n4")
            while n4 in cluster.cluster_status("n1")["running"]:
                time.sleep(poll_s)  # polling until n1 sees n4 stopped
            cluster.control("n1", "node", "forget_cluster_node", {"node": n4})
            results["election_after_kill_s"] = [election_after_kill(cluster) for _ in range(a.elections)]
            if not a.skip_throughput:
                declare_durable(cluster.url("n2"), "bench.on-b")
                results["a_to_queue_on_b"] = perf(cluster.url("n1"), "bench.on-b", a.time, root)
        finally:
            cluster.stop()
    print(json.dumps(results, indent=1))
    print(f"metadata changes/s (declare+bind): one node {results['changes_per_s_one_node']:.0f}, "
          f"via a follower of three {results['changes_per_s_via_follower_of_three']:.0f}, "
          f"via the leader {results['changes_per_s_via_leader_of_three']:.0f}")
    print(f"--join to serving: {results['join_to_serving_s']:.2f} s")
    print("new metadata leader after kill -9: " + ", ".join(f"{s * 1000:.0f} ms" for s in results["election_after_kill_s"]))
    if not a.skip_throughput:
        for key in ("one_node", "a_to_queue_on_b"):
            s = results[key]
            lat = s["latency_ms"]
            print(f"{key}: sent {s['published_rate']:,.0f}/s confirmed {s['confirmed_rate']:,.0f}/s "
                  f"received {s['consumed_rate']:,.0f}/s, latency p50 {lat['p50']} ms p99 {lat['p99']} ms")


if __name__ == "__main__":
    main()
