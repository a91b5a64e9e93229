"""`WalFiles`: the node's WAL files themselves - which one is current, appending to it over zeros
written ahead, starting the next at a rollover, deleting the old ones, and scanning them all.

Layout under the disk's root: `wal/<seq:016d>.wal`; the highest is current, older ones await the
end of a rollover. Two owners use it: the `WalWriter` of a quorum host that writes its own WAL
(persist/wal/writer.py), and the WAL's own process on a node with several quorum hosts
(actors/raft/wal_host.py), which writes the records the hosts send it and nothing else.

Preallocation: a WAL file is written ahead with zeros, `prealloc_bytes` at a time, and batches
overwrite them in place (`write_at`), so the sync after a batch flushes data only: an fdatasync
after an append must also commit the file's new size through the filesystem's journal. Measured
on this VM's ext4: 200 µs against 420-490 µs per fdatasync of a 4 KiB batch; the batch that
crosses into a new stretch of zeros pays for that stretch once. The zeros after the last record
are not a torn tail: `scan` marks such a cut blank, and recovery cuts it without a warning.

`replay(cut=True, apply)` (the owner's recovery) hands each record to `apply` as it is scanned,
then truncates each file at its last valid record and logs a torn one; `cut=False` (a quorum
host reading the files another process writes, to recover its own members) only reads: what
follows the last valid record may be a write in progress.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import structlog

from persist.disk import Disk
from persist.wal.records import Record, Scanner

PREALLOC_BYTES = 1024 * 1024  # zeros written ahead at a time: ~1 s of a node's WAL at 1,000 1 KiB msg/s
log = structlog.get_logger("warren.persist.wal")


class WalFiles:
    def __init__(self, disk: Disk, prealloc_bytes: int = PREALLOC_BYTES) -> None:
        self.disk = disk
        self.prealloc_bytes = prealloc_bytes
        self.seq = 0
        self._end = 0  # where the current file's records end
        self._zeroed = 0  # where the zeros written ahead of them end
        self.old_files: list[str] = []  # files before the current one, deleted when a rollover ends
        self.files_started = 0

    @property
    def current_file(self) -> str:
        return f"wal/{self.seq:016d}.wal"

    def names(self) -> list[str]:
        self.disk.makedirs("wal")
        return [n for n in self.disk.listdir("wal") if n.endswith(".wal")]

    def replay(self, cut: bool, apply: Callable[[Record], None]) -> int:
        """Every WAL file in order, each record handed to `apply` as it is found (its payload a
        view into the file's buffer, valid only during the call); the valid bytes of all of
        them. With `cut`, a file is truncated after its last valid record (a torn one logged)
        and listed as old."""
        names = self.names()
        total = 0
        for name in names:
            path = f"wal/{name}"
            scanner = Scanner(self.disk.read(path), copy=False)
            for record in scanner:
                apply(record)
            total += scanner.valid_bytes
            if cut and scanner.cut is not None:
                if not scanner.cut.blank:
                    log.warning("wal_torn_tail_cut", path=path, offset=scanner.cut.offset,
                                bytes=scanner.cut.size, reason=scanner.cut.reason,
                                last_file=name == names[-1])
                self.disk.truncate(path, scanner.cut.offset)
                self.disk.sync(path)
            if cut:
                self.old_files.append(path)
        return total

    def start_after_recovery(self) -> None:
        """Recovery scanned the files: appends go to a new one after them."""
        names = self.names()
        self.start_file(int(names[-1].split(".")[0]) + 1 if names else 1)

    def start_file(self, seq: int) -> None:
        self.files_started += 1
        self.seq = seq
        self.disk.open(self.current_file)
        self._end = self._zeroed = 0
        self._zero_ahead()
        self.disk.fsync_dir("wal")

    def roll(self) -> None:
        """The current file becomes old; appends go to the next one."""
        self.old_files.append(self.current_file)
        self.start_file(self.seq + 1)

    def remove_old(self) -> int:
        """Delete the files before the current one (a rollover wrote what they held elsewhere)."""
        removed = len(self.old_files)
        for path in self.old_files:
            self.disk.remove(path)
        self.disk.fsync_dir("wal")
        self.old_files.clear()
        return removed

    def write(self, parts: Sequence[bytes | memoryview], nbytes: int) -> None:
        """Records at the end of the current file's records, over the zeros written ahead."""
        assert self.seq, "recover first"
        if self._end + nbytes > self._zeroed:
            self._zero_ahead(self._end + nbytes)
        self.disk.write_at(self.current_file, self._end, parts)
        self._end += nbytes

    def sync(self) -> None:
        self.disk.sync(self.current_file)

    def _zero_ahead(self, past: int = 0) -> None:
        """Write zeros from where they end now to `prealloc_bytes` past `past` (durable with the
        next sync, which covers the records written over them too)."""
        if not self.prealloc_bytes:
            return
        upto = past + self.prealloc_bytes
        self.disk.write_at(self.current_file, self._zeroed, [bytes(upto - self._zeroed)])
        self._zeroed = upto
