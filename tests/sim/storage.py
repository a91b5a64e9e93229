"""A simulated node's storage, in the two modes the simulator runs: `wal` and `memory`.

`WalStorage` is the real thing over a fake disk: a `SimDisk` per node, and on it the node's real
`WalWriter` (persist/wal/writer.py) whose `MemberLog`s are the members' logs. `flush()` is the WAL
actor's batch (one append, one sync, rollover into segment files when the WAL is full) and returns
{member: written_upto}, which the simulator hands to the cores as `written(upto)`. A crash throws the
writer and every log away and makes the disk lose what was not synced, optionally keeping a torn
prefix of the last unsynced append; `open()` after a crash is the restart: a new writer over the
same disk, `recover()`, and the member's recovered log. Sizes are small so that rollovers, segment
files and snapshots below them all happen within a short run.

`MemoryStorage` keeps the colleague's original model (raft/memlog.py's `MemoryLog`, which
models only the Raft-visible part of a WAL), so a failure can be narrowed to the storage or the core.

`DurableView` is what a log has promised before a crash (hard state, snapshot, every entry the
member was told is written); the checker compares the recovered log against it.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from persist.wal.member_log import MemberLog
from raft import MemoryLog
from persist.wal.records import scan
from persist.wal.writer import WalWriter
from tests.sim.simdisk import SimDisk

LOG_MODES = ("wal", "memory")


# small: batches often cross into new zeros, and a simulated sync copies little
prealloc_bytes = 512


@dataclass(frozen=True)
class DurableView:
    hard_state: tuple[int, str | None]
    snapshot: tuple[int, int] | None
    first: int
    written: int
    terms: dict[int, int | None]  # index -> term, first..written

    @staticmethod
    def of(log: StorageLog) -> DurableView:
        first, written = max(log.first_index(), 1), log.written_index()
        return DurableView(log.durable_hard_state(), log.snapshot_meta(), first, written,
                           {i: log.term_at(i) for i in range(first, written + 1)})


class WalStorage:
    hard_state_in_wal = True  # PersistHardState is durable only with the next flush
    def __init__(self, member: str, rng: random.Random, wal_max_size_bytes: int,
                 segment_max_entries: int, disk_class: type[SimDisk] = SimDisk,
                 roll_step_bytes: int = 1 << 23) -> None:
        self.member = member
        self.roll_step_bytes = roll_step_bytes  # small: rollovers spread over many flushes
        self.disk = disk_class(random.Random(rng.getrandbits(32)))
        self.wal_max_size_bytes = wal_max_size_bytes
        self.segment_max_entries = segment_max_entries
        self.writer: WalWriter | None = None
        self.rollovers = 0
        self.torn_tails = 0

    def open(self) -> MemberLog:
        """Start or restart: recover whatever the disk holds (may raise LogGapError/SimCrash)."""
        cuts = [scan(self.disk.read(f"wal/{name}")).cut for name in self.disk.listdir("wal") if name.endswith(".wal")]
        self.torn_tails += sum(cut is not None and not cut.blank for cut in cuts)
        self.writer = WalWriter(self.disk, self.wal_max_size_bytes, self.segment_max_entries, prealloc_bytes)
        self.writer.roll_step_bytes = self.roll_step_bytes
        recovered = self.writer.recover().get(self.member)
        return recovered if recovered is not None else self.writer.member(self.member)

    def pending(self) -> bool:
        return self.writer is not None and (self.writer.core.pending_bytes() > 0 or self.writer.rolling)

    def flush(self) -> dict[str, int]:
        assert self.writer is not None
        before = self.writer.rollovers
        written = self.writer.flush()
        self.rollovers += self.writer.rollovers - before
        return written

    def arm_crash(self, sync_points: int) -> None:
        self.disk.arm_crash(sync_points)

    def crash(self, torn: bool) -> None:
        self.writer = None
        self.disk.crash(torn=torn)

    def segment_files(self) -> int:
        return sum(name.endswith(".segment")
                   for member in self.disk.listdir("members")
                   for name in self.disk.listdir(f"members/{member}"))


class MemoryStorage:
    hard_state_in_wal = False  # MemoryLog.save_hard_state is durable on return
    def __init__(self, member: str) -> None:
        self.member = member
        self.log = MemoryLog()
        self.rollovers = self.torn_tails = 0

    def open(self) -> MemoryLog:
        return self.log

    def pending(self) -> bool:
        return self.log.unsynced()

    def flush(self) -> dict[str, int]:
        return {self.member: self.log.sync()}

    def arm_crash(self, sync_points: int) -> None:
        """MemoryLog has no sync points to stop at: nothing to arm."""

    def crash(self, torn: bool) -> None:
        self.log.crash()

    def segment_files(self) -> int:
        return 0


Storage = WalStorage | MemoryStorage
StorageLog = MemberLog | MemoryLog
