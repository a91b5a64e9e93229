"""Benchmark: µs per message through the stream core (actors/stream/core.py) on one node: publish
batches appended as chunks, the log synced, the consumer reading from `first` handed what the
sync committed, its credit given back after each delivery, as the channel does.

Not a test. Run: .venv/bin/python -m bench.stream_core_bench [--messages N] [--batch B] [--size BYTES]
Prints the append (publish -> chunk written into the OS), deliver (synced -> Deliver effects) and
backlog-read (a second consumer from `first` once everything is written: the file path, not the
decoded tail) costs per message; the fdatasyncs are timed apart, since they wait for the disk.
"""
from __future__ import annotations

import argparse
import struct
import tempfile
import time
from pathlib import Path

from actors.messages.channel_queue import Consume, Deliver, Grant, Publish, Published
from actors.stream.core import StreamQueue
from effects import Send
from persist.stream.log import StreamLog
from wire.properties import DELIVERY_MODE_FLAG

ARGS = {"x-queue-type": "stream"}


def header(size: int) -> bytes:
    """A persistent message's content header, as bench.perf sends it."""
    return struct.pack(">HHQH", 60, 0, size, DELIVERY_MODE_FLAG) + b"\x02"


def delivered(effects: list) -> int:
    return sum(len(e.msg.messages) for e in effects if isinstance(e, Send) and isinstance(e.msg, Deliver))


def run(messages: int, batch: int, size: int, root: Path) -> dict[str, float]:
    log = StreamLog.open(root / "s", 500_000_000)
    q = StreamQueue("/", "s", log, ARGS)
    q.handle("ch", Consume(1, "c1", True, batch * 2, False, {"x-stream-offset": "first"}))
    h, body = header(size), b"x" * size
    append_s = deliver_s = sync_s = 0.0
    seq = 0
    got = 0
    for _ in range(messages // batch):
        ps = [Published(seq + i + 1, "", "s", h, body) for i in range(batch)]
        seq += batch
        t0 = time.perf_counter()
        q.handle("ch", Publish(ps))
        t1 = time.perf_counter()
        target, fds = log.flush()
        q.sync_started()
        from persist.stream.log import make_durable
        make_durable(fds)
        log.commit(target)
        t2 = time.perf_counter()
        effects = q.synced()
        n = delivered(effects)
        effects += q.handle("ch", Grant("c1", n))
        got += n + delivered(effects[-1:])
        t3 = time.perf_counter()
        append_s += t1 - t0
        sync_s += t2 - t1
        deliver_s += t3 - t2
    assert got >= messages - 2 * batch, got
    q.handle("ch2", Consume(2, "c2", True, 0, False, {"x-stream-offset": "first"}))
    t0 = time.perf_counter()
    read = 0
    while read < seq:
        n = delivered(q.handle("ch2", Grant("c2", 1000)))
        if not n:
            break
        read += n
    backlog_s = time.perf_counter() - t0
    log.close()
    n = messages // batch * batch
    return {"append µs/msg": 1e6 * append_s / n, "deliver µs/msg": 1e6 * deliver_s / n,
            "backlog read µs/msg": 1e6 * backlog_s / max(read, 1), "fdatasync ms/batch": 1e3 * sync_s / (n // batch)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--messages", type=int, default=200_000)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    rows = []
    for _ in range(a.repeat):
        with tempfile.TemporaryDirectory() as d:
            rows.append(run(a.messages, a.batch, a.size, Path(d)))
    for key in rows[0]:
        values = sorted(r[key] for r in rows)
        print(f"{key:22} {values[len(values) // 2]:8.2f}  (min {values[0]:.2f}, max {values[-1]:.2f})")


if __name__ == "__main__":
    main()
