"""Classic queue storage benchmark: DurableBacking over real files with real fdatasync.

Prints (not a test):
  1. publish + confirm + fetch + ack msg/s for persistent 1 KiB and 16 KiB messages: batches of
     `--batch` published, one flush (group commit) per batch, then fetched and acked;
  2. the backlog: `--backlog` x 1 KiB persistent messages published to a lazy queue with no
     consumer (one flush per batch), then drained; the peak RSS of this process while it ran and
     the disk bytes at the top of the backlog;
  3. disk bytes of the message store before and after GC, for 16 KiB messages of which 9 in 10
     were acked;
  4. durable queues through a queue host's storage (HostStorage): declares/s, the recovery of
     them all after a clean stop (ms), then deletes/s.
Usage: .venv/bin/python bench/classic_store_bench.py [--quick] [--dir DIR] [--sync fdatasync|none]
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time

import psutil

from persist.classic.durable_queue import DurableBacking
from persist.classic.host_storage import HostStorage
from persist.classic.msg_store import MsgStore
from persist.disk import RealDisk
from wire.properties import BasicProperties, encode_content_header

HEADER = encode_content_header(60, 0, BasicProperties(delivery_mode=2))


def open_queue(root: str, sync: str, *, lazy: bool = False
               ) -> tuple[RealDisk, MsgStore, DurableBacking]:
    disk = RealDisk(root, sync_method=sync)
    store = MsgStore(disk, "msg_store_persistent")
    transient = MsgStore(disk, "msg_store_transient", transient=True)
    store.open()
    transient.open()
    backing = DurableBacking(disk, "queues/bench", store, transient, lazy=lazy)
    backing.recover()
    store.finish_recovery()
    return disk, store, backing


def messages(lo: int, n: int, size: int) -> list[tuple]:
    pad = b"p" * (size - 8)
    return [(i, False, "", "bench", HEADER, i.to_bytes(8, "little") + pad)
            for i in range(lo, lo + n)]


def dir_bytes(root: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _s, fs in os.walk(root) for f in fs)


def throughput(root: str, sync: str, size: int, total: int, batch: int) -> float:
    disk, store, backing = open_queue(root, sync)
    start = time.perf_counter()
    for lo in range(0, total, batch):
        backing.publish(messages(lo, batch, size))
        confirmed = backing.flush()
        assert len(confirmed) == batch
        got = backing.fetch(batch)
        backing.ack([m[0] for m in got])
    backing.flush()
    elapsed = time.perf_counter() - start
    disk.close()
    return total / elapsed


class RssPeak:
    """Samples this process's RSS every 50 ms on a thread (the benchmark is the only user)."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._proc = psutil.Process()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, self._proc.memory_info().rss)

    def __enter__(self) -> RssPeak:
        self.peak = self._proc.memory_info().rss
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def backlog(root: str, sync: str, total: int, batch: int) -> dict[str, float]:
    disk, store, backing = open_queue(root, sync, lazy=True)
    rss_before = psutil.Process().memory_info().rss
    with RssPeak() as rss:
        start = time.perf_counter()
        for lo in range(0, total, batch):
            backing.publish(messages(lo, batch, 1024))
            backing.flush()
        publish_s = time.perf_counter() - start
        top_disk = dir_bytes(root)
        stats = backing.stats()
        start = time.perf_counter()
        drained = 0
        while got := backing.fetch(batch):
            backing.ack([m[0] for m in got])
            backing.flush()
            drained += len(got)
        drain_s = time.perf_counter() - start
    assert drained == total
    end_disk = dir_bytes(root)
    disk.close()
    return {"publish_msg_s": total / publish_s, "drain_msg_s": total / drain_s,
            "peak_rss_mb": rss.peak / 2**20, "rss_before_mb": rss_before / 2**20,
            "disk_top_mb": top_disk / 2**20, "disk_after_drain_mb": end_disk / 2**20,
            "ram_messages_at_top": stats.ram_messages,
            "ram_index_entries_at_top": stats.ram_index_entries}


def gc_effect(root: str, sync: str, total: int, batch: int) -> dict[str, float]:
    disk, store, backing = open_queue(root, sync)
    for lo in range(0, total, batch):
        backing.publish(messages(lo, batch, 16 * 1024))
        backing.flush()
    before = dir_bytes(f"{root}/msg_store_persistent")
    got = backing.fetch(total)
    backing.ack([m[0] for m in got if m[0] % 10])
    backing.flush()
    mid = dir_bytes(f"{root}/msg_store_persistent")
    store.collect_garbage()
    after = dir_bytes(f"{root}/msg_store_persistent")
    summary = store.summary()
    disk.close()
    return {"store_mb_before": before / 2**20, "store_mb_after_acks": mid / 2**20,
            "store_mb_after_gc": after / 2**20, "gc_runs": summary.gc_runs,
            "files_deleted": summary.files_deleted, "files_left": summary.files}


def host_queues(root: str, sync: str, n: int) -> dict[str, float]:
    def open_storage(keep: list[tuple[str, str]]) -> HostStorage:
        s = HostStorage(RealDisk(root, sync_method=sync), "queue0", embed_below=4096,
                        file_size_limit=16 * 2**20, placed_here=lambda vhost, name: True)
        s.recover(keep)
        return s
    keys = [("/", f"q{i}") for i in range(n)]
    storage = open_storage([])
    start = time.perf_counter()
    for key in keys:
        storage.open_queue(*key, lazy=False)
    declare_s = time.perf_counter() - start
    storage.close()
    start = time.perf_counter()
    storage = open_storage(keys)
    recover_s = time.perf_counter() - start
    start = time.perf_counter()
    for key in keys:
        storage.open_queue(*key, lazy=False)  # the recovered ones: no IO
        storage.delete_queue(*key)
    delete_s = time.perf_counter() - start
    storage.close()
    return {"declare_per_s": n / declare_s, "recover_ms": recover_s * 1000, "delete_per_s": n / delete_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer messages (a smoke run)")
    ap.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    ap.add_argument("--sync", default="fdatasync", choices=("fdatasync", "fsync", "none"))
    ap.add_argument("--batch", type=int, default=1000, help="messages per publish/flush batch")
    args = ap.parse_args()
    n_small, n_big, n_backlog, n_gc, n_queues = ((20_000, 5_000, 50_000, 4_000, 100) if args.quick
                                                 else (200_000, 50_000, 1_000_000, 10_000, 500))
    base = tempfile.mkdtemp(prefix="classic_store_bench_", dir=args.dir)
    try:
        print(f"sync={args.sync} batch={args.batch} dir={base}")
        for size, n in ((1024, n_small), (16 * 1024, n_big)):
            rate = throughput(f"{base}/tp{size}", args.sync, size, n, args.batch)
            print(f"publish+confirm+fetch+ack {size // 1024:>2} KiB x {n}: {rate:,.0f} msg/s")
        result = backlog(f"{base}/backlog", args.sync, n_backlog, args.batch)
        print(f"backlog (lazy) {n_backlog} x 1 KiB: " + ", ".join(
            f"{k}={v:,.1f}" for k, v in result.items()))
        result = gc_effect(f"{base}/gc", args.sync, n_gc, args.batch)
        print(f"GC, {n_gc} x 16 KiB, 9/10 acked: " + ", ".join(
            f"{k}={v:,.1f}" for k, v in result.items()))
        result = host_queues(f"{base}/host", args.sync, n_queues)
        print(f"host storage, {n_queues} durable queues: " + ", ".join(
            f"{k}={v:,.1f}" for k, v in result.items()))
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
