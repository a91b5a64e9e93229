"""What a WAL in a process of its own costs: the records of every member shipped over ZeroMQ ipc to
a writer process that writes and syncs them, against the same WAL in the members' process.

    .venv/bin/python -m bench.wal_hop [--seconds 3] [--dir DIR] [--window 4]

The members' side (this process) queues `members` x `per_member` 1 KiB entries a round in a real
`WalCore` (persist/wal/core.py: the records are encoded there, as a member's append does), takes
the batch and sends it as ONE frame (an 8-byte batch number and the records: `b"".join` of the
parts is the one copy of the bodies; pyzmq sends the joined buffer without another), keeping at
most `--window` batches unacknowledged. The writer process drains every frame that has arrived,
writes them with one gathered pwritev straight from the received buffers over a file written
ahead with zeros (as persist/wal/writer.py does), syncs once, and answers with the highest batch
number now durable; the members' side then calls `WalCore.written` for each. In-process: the same
rounds, written and synced in the members' process one batch at a time (as the quorum host does
today). Neither rolls over into segments: what is durable leaves the memtables at once.
Prints entries/s, syncs/s, entries per sync and CPU µs per entry of each process; asserts nothing.
"""
from __future__ import annotations

import argparse
import multiprocessing
import multiprocessing.connection
import resource
import shutil
import struct
import tempfile
import time

import zmq

from bench.wal_bench import ENTRY_BYTES
from persist.disk import RealDisk
from persist.wal.core import WalCore
from raft.log import Entry

SEQ = struct.Struct(">Q")
prealloc_bytes = 64 << 20
STOP = b"stop"


class WalFile:
    """A WAL file written ahead with zeros and overwritten in place (persist/wal/writer.py's
    way), wrapping within the zeroed stretch (a bench: the file does not grow)."""

    def __init__(self, root: str, sync: str) -> None:
        self.disk = RealDisk(root, sync_method=sync)
        self.disk.open("wal")
        self.disk.write_at("wal", 0, [bytes(prealloc_bytes)])
        self.disk.sync("wal")
        self.end = 0
        self.syncs = 0

    def write(self, parts: list) -> None:
        size = sum(len(p) for p in parts)
        if self.end + size > prealloc_bytes:
            self.end = 0
        self.disk.write_at("wal", self.end, parts)
        self.end += size
        self.disk.sync("wal")
        self.syncs += 1


class Members:
    """The members' side: `members` logs in one WalCore, `per_member` 1 KiB entries each a round.
    What is durable leaves the memtables at once (the bench does not roll over into segments),
    so memory stays flat."""

    def __init__(self, members: int, per_member: int) -> None:
        self.core = WalCore(1 << 62)
        self.names = [f"q{i}" for i in range(members)]
        self.per_member = per_member
        self.command = b"x" * ENTRY_BYTES
        self.next_index = 1
        self.entries = 0

    def round(self) -> object:
        batch = [Entry(self.next_index + k, 1, self.command) for k in range(self.per_member)]
        for name in self.names:
            self.core.submit(name, batch)
        self.next_index += self.per_member
        self.entries += len(self.names) * self.per_member
        return self.core.take_batch()

    def written(self, batch: object) -> None:
        for name, upto in self.core.written(batch).items():
            self.core.mem[name].drop_below(upto + 1)


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def writer(root: str, ins: str, acks: str, sync: str, report: multiprocessing.connection.Connection) -> None:
    """The WAL's process: drain, one gathered write, one sync, one ack, until told to stop."""
    wal = WalFile(root, sync)
    ctx = zmq.Context()
    pull, push = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    pull.bind(ins)
    push.connect(acks)
    report.send("ready")
    cpu0 = cpu_s()
    while True:
        frames = [pull.recv(copy=False)]
        while pull.getsockopt(zmq.EVENTS) & zmq.POLLIN:
            frames.append(pull.recv(copy=False))
        if frames[-1].bytes == STOP:
            break
        wal.write([memoryview(f.buffer)[SEQ.size:] for f in frames])
        upto = SEQ.unpack_from(frames[-1].buffer)[0]
        push.send(SEQ.pack(upto))
    report.send((cpu_s() - cpu0, wal.syncs))
    wal.disk.close()
    pull.close(0)
    push.close(0)
    ctx.term()


def remote(root: str, members: int, per_member: int, seconds: float, sync: str, window: int) -> dict:
    ins, acks = f"ipc://{root}/wal.in", f"ipc://{root}/wal.acks"
    ctx = zmq.Context()
    push, pull = ctx.socket(zmq.PUSH), ctx.socket(zmq.PULL)
    pull.bind(acks)
    ours, theirs = multiprocessing.Pipe()
    proc = multiprocessing.get_context("spawn").Process(target=writer, args=(root, ins, acks, sync, theirs))
    proc.start()
    push.connect(ins)
    assert ours.recv() == "ready"
    side = Members(members, per_member)
    inflight: dict[int, object] = {}
    seq = 0
    cpu0, start = cpu_s(), time.perf_counter()

    def acked() -> None:
        done = SEQ.unpack(pull.recv())[0]
        for s in [s for s in inflight if s <= done]:
            side.written(inflight.pop(s))
    while time.perf_counter() - start < seconds:
        while len(inflight) >= window or (inflight and pull.getsockopt(zmq.EVENTS) & zmq.POLLIN):
            acked()
        taken = side.round()
        seq += 1
        inflight[seq] = taken
        push.send(SEQ.pack(seq) + b"".join(taken.parts), copy=False)
    while inflight:
        acked()
    elapsed, members_cpu = time.perf_counter() - start, cpu_s() - cpu0
    push.send(STOP)
    wal_cpu, syncs = ours.recv()
    proc.join(10)
    push.close(0)
    pull.close(0)
    ctx.term()
    n = side.entries
    return {"entries/s": n / elapsed, "syncs/s": syncs / elapsed, "entries/sync": n / max(syncs, 1),
            "members us/entry": members_cpu / n * 1e6, "wal us/entry": wal_cpu / n * 1e6}


def local(root: str, members: int, per_member: int, seconds: float, sync: str) -> dict:
    wal, side = WalFile(root, sync), Members(members, per_member)
    cpu0, start = cpu_s(), time.perf_counter()
    while time.perf_counter() - start < seconds:
        taken = side.round()
        wal.write(taken.parts)
        side.written(taken)
    elapsed, n = time.perf_counter() - start, side.entries
    wal.disk.close()
    return {"entries/s": n / elapsed, "syncs/s": wal.syncs / elapsed, "entries/sync": n / max(wal.syncs, 1),
            "members us/entry": (cpu_s() - cpu0) / n * 1e6, "wal us/entry": 0.0}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--dir", default=None, help="a directory on the disk to measure")
    p.add_argument("--sync", default="fdatasync", choices=("fdatasync", "fsync", "none"))
    p.add_argument("--window", type=int, default=4, help="batches in flight to the WAL's process")
    a = p.parse_args(argv)
    print(f"1 KiB entries, {a.seconds:g} s per case, sync={a.sync}; µs/entry are CPU (user+system)")
    print(f"{'where':>10} {'members':>7} {'per member':>10} {'entries/s':>10} {'syncs/s':>8} {'entries/sync':>12} "
          f"{'members µs':>10} {'WAL µs':>7}")
    for members, per_member in ((8, 1), (8, 50)):
        for where in ("in-process", "own process"):
            root = tempfile.mkdtemp(prefix="wal_hop_", dir=a.dir)
            try:
                r = (local(root, members, per_member, a.seconds, a.sync) if where == "in-process"
                     else remote(root, members, per_member, a.seconds, a.sync, a.window))
            finally:
                shutil.rmtree(root, ignore_errors=True)
            print(f"{where:>10} {members:7d} {per_member:10d} {r['entries/s']:10.0f} {r['syncs/s']:8.0f} "
                  f"{r['entries/sync']:12.1f} {r['members us/entry']:10.1f} {r['wal us/entry']:7.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
