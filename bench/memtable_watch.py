"""What a quorum member's memtable holds over time (issue 36): one steady quorum queue (a publisher
with confirms at `--rate` msg/s, a consumer with prefetch 50 acking each delivery) and quorum
declare/publish/get/delete churn, on `--nodes` local nodes; every `--sample` seconds one JSON line
per sample with, per node, the quorum host's `MemTable.items` and `WalCore.mem` (the memory probe,
actors/runtime/memory_probe.py), its gc objects and members, and the steady member's first, last,
applied and snapshot indexes. After `--minutes` the load stops and it samples every 0.1 s for 1.6 s
(the idle snapshot), then lists every member left on a node besides the steady one.

    .venv/bin/python -m bench.memtable_watch [--nodes 1] [--minutes 5] [--rate 20]
        [--churn-pause 1.0] [--sample 5] [--dir DIR]

With no memory leak the steady member's `last - first + 1` is a sawtooth under the snapshot
interval (actors/quorum/release.py), every churned member goes with its queue, and the memtables
empty within a second of the load stopping.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path

import pika

from scripts.local_cluster import Cluster

STEADY = "memtable.steady"
prefetch = 50
stop_samples = 16
stop_sample_s = 0.1


class Load:
    def __init__(self, cluster: Cluster, rate: float, churn_pause_s: float) -> None:
        self.cluster, self.rate, self.churn_pause_s = cluster, rate, churn_pause_s
        self.publishing, self.consuming = threading.Event(), threading.Event()
        self.counts: dict = {"published": 0, "acked": 0, "churned": 0, "churn_errors": 0}
        self.threads = [threading.Thread(target=f, daemon=True) for f in (self._publish, self._consume, self._churn)]

    def _connect(self, node: str) -> pika.BlockingConnection:
        return pika.BlockingConnection(pika.URLParameters(self.cluster.url(node)))

    def start(self) -> None:
        with self._connect(self.cluster.names[0]) as conn:
            conn.channel().queue_declare(STEADY, durable=True, arguments={"x-queue-type": "quorum"})
        self.publishing.set()
        self.consuming.set()
        for t in self.threads:
            t.start()

    def _publish(self) -> None:
        with self._connect(self.cluster.names[0]) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            due = time.monotonic()
            while self.publishing.is_set():
                ch.basic_publish("", STEADY, b"%08d" % self.counts["published"] + b"x" * 40,
                                 pika.BasicProperties(delivery_mode=2))
                self.counts["published"] += 1
                due += 1.0 / self.rate
                time.sleep(max(0.0, due - time.monotonic()))  # the load's rate, not a synchronisation

    def _consume(self) -> None:
        with self._connect(self.cluster.names[-1]) as conn:  # the leader is on the first node
            ch = conn.channel()
            ch.basic_qos(prefetch_count=prefetch)

            def acked(channel, method, _props, _body) -> None:
                channel.basic_ack(method.delivery_tag)
                self.counts["acked"] += 1
            ch.basic_consume(STEADY, acked)
            while self.consuming.is_set():
                conn.process_data_events(time_limit=0.2)

    def _churn(self) -> None:
        n = 0
        while self.publishing.is_set():
            try:
                self._churn_step(f"memtable.churn.{n}")
            except pika.exceptions.AMQPError as e:  # counted, as bench.soak's churn does
                self.counts["churn_errors"] += 1
                self.counts["last_churn_error"] = repr(e)
            n += 1
            self.counts["churned"] = n
            self.publishing.wait(self.churn_pause_s)  # the churn's pace

    def _churn_step(self, name: str) -> None:
        with self._connect(self.cluster.names[0]) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            ch.queue_declare(name, durable=True, arguments={"x-queue-type": "quorum"})
            ch.basic_publish("", name, b"churn", pika.BasicProperties(delivery_mode=2))
            method, _, _ = ch.basic_get(name)
            if method is not None:
                ch.basic_ack(method.delivery_tag)
            ch.queue_delete(name)

    def stop(self) -> None:
        self.publishing.clear()
        self.threads[0].join()
        self.threads[2].join()
        self.consuming.clear()
        self.threads[1].join()


def sample(cluster: Cluster, began: float, counts: dict, label: str) -> dict:
    row: dict = {"t_s": round(time.monotonic() - began, 1), "label": label, **counts}
    for node in cluster.names:
        status = cluster.control(node, "quorum", "status")
        memory = cluster.control(node, "quorum", "memory", {"collect": True})
        tables = memory["containers"]
        cell = {"members": len(status), "memtable_items": tables.get("MemTable.items", 0),
                "wal_members": tables.get("WalCore.mem", 0), "gc_objects": memory["gc_objects"]}
        for m in status.values():
            if m["queue"] == STEADY:
                cell.update(role=m["role"], first=m["first"], last=m["last"], applied=m["applied"],
                            snapshot_index=m["snapshot_index"], held=m["last"] - m["first"] + 1)
        row[node] = cell
    return row


def leftovers(cluster: Cluster) -> list[dict]:
    """Members other than the steady queue's: after the churn stopped, members of deleted queues."""
    return [{"node": node, "uid": uid, "queue": m["queue"], "role": m["role"], "last": m["last"]}
            for node in cluster.names for uid, m in cluster.control(node, "quorum", "status").items()
            if m["queue"] != STEADY]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1)
    ap.add_argument("--minutes", type=float, default=5.0)
    ap.add_argument("--rate", type=float, default=20.0)
    ap.add_argument("--churn-pause", type=float, default=1.0)
    ap.add_argument("--sample", type=float, default=5.0)
    ap.add_argument("--dir", type=Path, default=None)
    a = ap.parse_args()
    root = a.dir or Path(tempfile.mkdtemp(prefix="memtable-watch-"))
    cluster = Cluster(root, a.nodes).start()
    load = Load(cluster, a.rate, a.churn_pause)
    try:
        load.start()
        began = time.monotonic()
        while time.monotonic() - began < a.minutes * 60:
            time.sleep(a.sample)  # the sampling period
            print(json.dumps(sample(cluster, began, load.counts, "load")), flush=True)
        load.stop()
        for _ in range(stop_samples):
            print(json.dumps(sample(cluster, began, load.counts, "stopped")), flush=True)
            time.sleep(stop_sample_s)  # the sampling period
        print(json.dumps({"left": leftovers(cluster)}), flush=True)
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
