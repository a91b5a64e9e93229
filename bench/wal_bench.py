"""WAL throughput with real fdatasync on this disk: fsyncs/s, entries per fsync, MB/s.

Usage: .venv/bin/python -m bench.wal_bench [--dir DIR] [--seconds S] [--sync fdatasync|fsync|none]

Each round, every member appends `batch` 1 KiB entries and the writer flushes once (one write, one
sync), as the WAL actor does for whatever arrived since its last flush. Prints, does not assert.
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
import time

from persist.disk import RealDisk
from raft.log import Entry
from persist.wal.writer import WalWriter

ENTRY_BYTES = 1024


def run(root: str, members: int, per_member: int, seconds: float, sync: str) -> dict[str, float]:
    disk = RealDisk(root, sync_method=sync)
    writer = WalWriter(disk, wal_max_size_bytes=64 * 1024 * 1024)
    writer.recover()
    logs = [writer.member(f"q{i}") for i in range(members)]
    command = b"x" * ENTRY_BYTES
    syncs0, entries, nbytes, next_index = disk.syncs, 0, 0, 1
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        batch = [Entry(next_index + k, 1, command) for k in range(per_member)]
        for member_log in logs:
            member_log.append(batch)
        written = writer.flush()
        for member, upto in written.items():
            writer.logs[member].set_written(upto)
        next_index += per_member
        entries += members * per_member
        nbytes += members * per_member * ENTRY_BYTES
    elapsed = time.perf_counter() - start
    syncs = disk.syncs - syncs0
    disk.close()
    return {"fsyncs_per_s": syncs / elapsed, "entries_per_fsync": entries / max(syncs, 1),
            "entries_per_s": entries / elapsed, "mb_per_s": nbytes / elapsed / 1e6,
            "rollovers": writer.rollovers}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=None, help="directory on the disk to measure")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--sync", default="fdatasync", choices=("fdatasync", "fsync", "none"))
    args = parser.parse_args()
    print(f"sync={args.sync} entry={ENTRY_BYTES} B, {args.seconds:.0f} s per case")
    print(f"{'members':>8} {'entries/member/flush':>21} {'fsyncs/s':>10} {'entries/fsync':>14} "
          f"{'entries/s':>10} {'MB/s':>8} {'rollovers':>9}")
    for members, per_member in ((1, 1), (1, 32), (100, 1), (100, 8)):
        root = tempfile.mkdtemp(prefix="wal_bench_", dir=args.dir)
        try:
            r = run(root, members, per_member, args.seconds, args.sync)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print(f"{members:>8} {per_member:>21} {r['fsyncs_per_s']:>10.0f} "
              f"{r['entries_per_fsync']:>14.1f} {r['entries_per_s']:>10.0f} {r['mb_per_s']:>8.1f} "
              f"{r['rollovers']:>9}")


if __name__ == "__main__":
    main()
