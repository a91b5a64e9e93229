"""How long a replicated stream's publisher waits when the leader's node is killed, and how long
the restarted node's member takes to catch up (issue 39 item 4).

Usage: .venv/bin/python -m bench.stream_failover [--rounds N] [--backlog N] [--size BYTES]

Each round on a fresh 3-node warren cluster (scripts/local_cluster.py): a stream declared through
n1 (its leader, client-local), --backlog messages published with confirms through n2, then one
publisher on n2 confirming each message before the next; kill -9 of n1 and the time until the
next publish is confirmed (the cluster noticing n1 down, the election, the unconfirmed batch sent
to the new leader); then n1 restarted and the time from its start until its member's committed
offset (`warrenctl stream_status`) reaches the leader's end. Prints; asserts nothing.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pika

from scripts.local_cluster import Cluster
from tests.integration.admin_support import ok

NAME = "failover"


def round_(root: Path, backlog: int, size: int) -> tuple[float, float]:
    cluster = Cluster(root, 3).start()
    try:
        conn = pika.BlockingConnection(pika.URLParameters(cluster.url("n1")))
        conn.channel().queue_declare(NAME, durable=True, arguments={"x-queue-type": "stream"})
        conn.close()
        conn = pika.BlockingConnection(pika.URLParameters(cluster.url("n2")))
        ch = conn.channel()
        ch.confirm_delivery()
        body = b"x" * size
        for _ in range(backlog):
            ch.basic_publish("", NAME, body)
        cluster.kill("n1")
        killed = time.monotonic()
        ch.basic_publish("", NAME, body)  # returns once confirmed: by the new leader
        failover = time.monotonic() - killed
        conn.close()
        started = time.monotonic()
        cluster.restart("n1")
        target = backlog  # offsets 0..backlog: the backlog and the publish after the kill
        while _committed(cluster, cluster.node_name("n1")) < target:
            time.sleep(0.05)  # polling warrenctl, whose own run takes longer than this
        return failover, time.monotonic() - started
    finally:
        cluster.stop()


def _committed(cluster: Cluster, node: str) -> int:
    lines = ok(cluster.nodes["n2"], "stream_status", NAME).strip().splitlines()
    header = lines[1].split("\t")
    for line in lines[2:]:
        row = dict(zip(header, line.split("\t")))
        if row["node"] == node and row["committed_offset"]:
            return int(row["committed_offset"])
    return -1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--backlog", type=int, default=2000)
    p.add_argument("--size", type=int, default=1024)
    a = p.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="stream-failover-"))
    try:
        results = [round_(root / f"r{i}", a.backlog, a.size) for i in range(a.rounds)]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"stream on 3 nodes, {a.backlog} x {a.size} B confirmed before the kill; {a.rounds} round(s)")
    for label, values in (("kill -9 of the leader's node -> next confirm, s", [r[0] for r in results]),
                          ("restart -> its member caught up, s", [r[1] for r in results])):
        print(f"{label:50} median {statistics.median(values):.2f}  ({', '.join(f'{v:.2f}' for v in values)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
