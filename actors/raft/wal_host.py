"""The "wal" host entry: the node's one WAL in a process of its own (a node with `quorum_hosts` > 1).

It holds no member and no memtable: it writes what the quorum hosts send (`WalAppend`, each a
batch of records already encoded, as a raw frame of the runtime's) into the node's WAL files
(persist/wal/files.py), and answers. Every frame that arrived while it wrote the last set is
drained in one loop turn (the runtime's); the turn's end writes every accepted frame with one
gathered pwritev straight from the received frames (views of them, no copy), syncs once and acknowledges each host's newest (`WalAck`). The sync is on the loop, on
purpose: nothing else runs in this process, and frames that arrive meanwhile are the next
write's. The protocol (epochs, fencing, rollover) is actors/raft/wal_link.py's.

The fence is a REP socket of its own (`<the wal host's ipc endpoint>.fence`): a quorum host that
starts asks it before anything of the host runs (actors/quorum/host.py), and is answered once
everything this process accepted from the host's predecessor is written and synced.

Start-up (also after kill -9): cut the WAL files' torn tails, start a new file, tell every quorum
host `WalStarted` (they send again what was not acknowledged); if the files already hold
`wal_max_size_bytes`, a rollover starts at once.

Config (HostSpec.config): node, data_dir, quorum_hosts, optionally wal_max_size_bytes, sync_method.
Control ops: "wal_stats", "pid", "flow_links".
"""
from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import msgpack
import structlog
import zmq

from actors.messages.wal import WalAppend, WalRolled, WalStarted, read_append
from actors.quorum.names import WAL_CLIENT_NAME, configure, host_names
from actors.raft.wal_link import WalServerCore
from actors.runtime.address import Address
from flow.state import FlowState, waiting_state
from persist.disk import RealDisk
from persist.wal.files import WalFiles
from persist.wal.writer import WAL_MAX_SIZE_BYTES

log = structlog.get_logger("warren.raft.wal_host")

WAL_NAME = "wal"  # the actor, in the wal host
slow_flush_s = 0.5


def fence_endpoint(wal_endpoint: str) -> str:
    return wal_endpoint + ".fence"


class WalServer:
    def __init__(self, runtime: Any, files: WalFiles, core: WalServerCore, wal_max_size_bytes: int,
                 bytes_since_roll: int, loop: asyncio.AbstractEventLoop) -> None:
        self.runtime = runtime
        self.files = files
        self.core = core
        self.me = Address(runtime.host, WAL_NAME)
        self.wal_max_size_bytes = wal_max_size_bytes
        self.bytes_since_roll = bytes_since_roll
        self._loop = loop
        self._frames: list[WalAppend] = []
        self._scheduled = False
        self.flushes = self.frames = self.refused = self.bytes_written = self.rollovers = 0
        self.syncing = FlowState(1000, changed_at=int(time.monotonic() * 1000))

    def raw_frame(self, frame: bytes) -> None:
        """A quorum host's batch (the runtime's raw frames: actors/messages/wal.py's layout)."""
        msg = read_append(frame)
        if self.core.accept(msg):
            self._frames.append(msg)
            if not self._scheduled:
                self._scheduled = True
                self._loop.call_soon(self.flush)
        else:
            self.refused += 1
            log.info("wal.frame_refused", host=msg.host, host_epoch=msg.host_epoch, wal_epoch=msg.wal_epoch,
                     seq=msg.seq)

    def receive(self, sender: Address, msg: Any) -> None:
        kind = type(msg)
        if kind is WalRolled:
            if self.core.rolled(msg):
                removed = self.files.remove_old()
                self.rollovers += 1
                log.info("wal_rolled_over", removed=removed, current=self.files.current_file)
        else:
            log.warning("wal.unexpected", kind=kind.__name__, sender=str(sender))

    def flush(self) -> None:
        """One write and one sync for every frame accepted since the last; then the acks."""
        self._scheduled = False
        frames, self._frames = self._frames, []
        if not frames:
            return
        started = time.monotonic()
        self.syncing = self.syncing.observe(True, max(int(started * 1000), self.syncing.changed_at))
        parts = [m.records for m in frames]
        nbytes = sum(map(len, parts))
        self.files.write(parts, nbytes)
        self.files.sync()
        self.syncing = self.syncing.observe(False, max(int(time.monotonic() * 1000), self.syncing.changed_at))
        elapsed = time.monotonic() - started
        if elapsed > slow_flush_s:
            log.warning("wal.slow_flush", seconds=round(elapsed, 3), frames=len(frames))
        self.flushes += 1
        self.frames += len(frames)
        self.bytes_written += nbytes
        self.bytes_since_roll += nbytes
        for host, ack in self.core.written(frames):
            self.runtime.send(Address(host, WAL_CLIENT_NAME), ack, sender=self.me)
        if self.bytes_since_roll >= self.wal_max_size_bytes and not self.core.rolling:
            self.start_roll()
        self.runtime.send_queued()

    def start_roll(self) -> None:
        self.files.roll()
        self.bytes_since_roll = 0
        for host, msg in self.core.start_roll(self.files.seq):
            self.runtime.send(Address(host, WAL_CLIENT_NAME), msg, sender=self.me)
        log.info("wal.roll_started", file_seq=self.files.seq, old_files=len(self.files.old_files))

    def fence(self, host: str, host_epoch: int) -> tuple[int, int]:
        """Write what is accepted first: after the answer nothing of the host's predecessor lands."""
        self.flush()
        answer = self.core.fence(host, host_epoch)
        log.info("wal.fenced", host=host, host_epoch=host_epoch, rolling=answer[1])
        return answer

    def stats(self) -> dict:
        return {"flushes": self.flushes, "frames": self.frames, "refused": self.refused,
                "bytes_written": self.bytes_written, "syncs": getattr(self.files.disk, "syncs", 0),
                "rollovers": self.rollovers, "rolling": self.core.rolling, "waiting": sorted(self.core.waiting),
                "wal_files": len(self.files.names())}


def serve_fence(loop: asyncio.AbstractEventLoop, endpoint: str, server: WalServer) -> zmq.Socket:
    """Answer fences on a REP socket: [host, host_epoch] -> [wal_epoch, rolling file or 0]."""
    sock = zmq.Context.instance().socket(zmq.REP)
    path = endpoint.removeprefix("ipc://")
    if os.path.exists(path):
        os.unlink(path)  # a predecessor's, killed before it could remove it
    sock.bind(endpoint)

    def readable() -> None:
        while sock.getsockopt(zmq.EVENTS) & zmq.POLLIN:
            host, host_epoch = msgpack.unpackb(sock.recv(zmq.NOBLOCK))
            sock.send(msgpack.packb(list(server.fence(host, host_epoch))))
    loop.add_reader(sock.getsockopt(zmq.FD), readable)
    readable()
    return sock


def wal_host(runtime: Any, spec: Any) -> WalServer:
    cfg = spec.config
    loop = asyncio.get_running_loop()
    configure(cfg["quorum_hosts"])
    disk = RealDisk(str(Path(cfg["data_dir"]) / "quorum"), cfg.get("sync_method", "fdatasync"))
    files = WalFiles(disk)
    recovered = files.replay(cut=True, apply=lambda _record: None)  # the hosts replay their own
    files.start_after_recovery()
    hosts = tuple(host_names(cfg["node"]))
    core = WalServerCore(int.from_bytes(os.urandom(7), "big"), hosts)
    max_bytes = cfg.get("wal_max_size_bytes", WAL_MAX_SIZE_BYTES)
    server = WalServer(runtime, files, core, max_bytes, recovered, loop)
    runtime.spawn(WAL_NAME, server)
    runtime.raw_handler = server.raw_frame
    fence_sock = serve_fence(loop, fence_endpoint(runtime.directory[runtime.host]), server)
    for host in hosts:  # they send again what this process's predecessor did not acknowledge
        runtime.send(Address(host, WAL_CLIENT_NAME), WalStarted(core.wal_epoch), sender=server.me)
    if recovered >= max_bytes:
        server.start_roll()
    runtime.send_queued()
    log.info("wal.host_started", host=runtime.host, wal_epoch=core.wal_epoch, recovered_bytes=recovered,
             current=files.current_file)

    async def control(op: str, args: dict) -> Any:
        if op == "wal_stats":
            return server.stats()
        if op == "pid":
            return os.getpid()
        if op == "flow_links":
            now = int(time.monotonic() * 1000)
            name = f"{runtime.host}/{WAL_NAME}"
            return [{"kind": "wal", "name": name, "label": f"{name} (the node's write-ahead log for quorum queues)",
                     "state": waiting_state(server.syncing, now), "downstream": [],
                     "blocked_on": [], "flow_share": server.syncing.flow_share(now), "credit": {}}]
        return {"error": f"unknown op {op!r}"}
    runtime.control = control
    server.fence_socket = fence_sock  # kept open for the process's life
    return server
