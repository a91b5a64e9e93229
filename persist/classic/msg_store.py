"""The shared message store: one per node (a persistent and a transient instance), bodies by guid.

Theory of operation: messages too big to embed in a queue index are appended to `N.rdq` files in
the store's directory, one record each (records.py framing around `guid_len:u8 | guid | message`).
Only the highest-numbered file is written; it rolls over when the next record would take it past
`file_size_limit` (16 MiB by default). An in-memory index maps guid -> [file, offset, record size,
refcount]: a message routed to several queues is written once and referenced by each (`write` of a
known guid only bumps its refcount); `remove` drops one reference and, at zero, turns the record's
bytes into garbage in its file's summary (store_gc.FileTable). `collect_garbage` carries out what the
file table plans: delete an all-garbage file, or merge two adjacent files into the left one.

Group commit: `write(batch)` appends (one gathered write per touched file, the bodies passed to the
kernel as they are) and `sync()` makes everything
written so far durable with one fdatasync per touched file and returns the guids it covered.
Ordering rule: a queue confirms a message only after `sync()` returned its guid AND its index entry
is synced too (durable_queue.py does both in that order).

Recovery: a clean `close()` saves the index and the file table in `clean.dat` (written atomically,
deleted again at the next start so that a later crash never trusts it). Without it, `open()` scans
every file, cuts a torn tail (logged), and rebuilds locations with refcount 0; the queues then
re-declare their references (`add_ref`) from their indexes and `finish_recovery()` turns every
unreferenced record into garbage. The transient instance wipes its directory at open.

Left out: the per-file read handle cache and the separate GC process: GC runs inline, so the file
locks in FileTable are only ever held for the duration of one `collect_garbage` step.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import structlog

from persist.classic.records import FRAME_BYTES, frame, frame_parts, scan
from persist.classic.store_gc import Delete, FileSummary, FileTable, Merge
from persist.disk import Disk, write_atomic

MSG_STORE_FILE_SIZE_LIMIT = 16 * 1024 * 1024
CLEAN_FILE = "clean.dat"
# A sparse read wastes at most this factor of the bytes wanted before we fall back to one read each.
READ_SPAN_WASTE_MAX = 4

log = structlog.get_logger("warren.persist.msg_store")

_LOC = struct.Struct("<IQII")  # file, offset, size, refcount
_FILE = struct.Struct("<IQQ")  # file, valid, garbage
_CLEAN_HEAD = struct.Struct("<III")  # current file, n files, n guids


@dataclass(frozen=True, slots=True)
class StoreSummary:
    files: int
    messages: int
    live_bytes: int
    garbage_bytes: int
    gc_runs: int
    files_deleted: int

    @property
    def disk_bytes(self) -> int:
        return self.live_bytes + self.garbage_bytes


class MsgStore:
    def __init__(self, disk: Disk, directory: str, *, transient: bool = False,
                 file_size_limit: int = MSG_STORE_FILE_SIZE_LIMIT) -> None:
        self.disk = disk
        self.dir = directory
        self.transient = transient
        self.file_size_limit = file_size_limit
        self.table = FileTable(file_size_limit)
        self.recovering = False
        self._index: dict[bytes, list[int]] = {}
        self._end = 0  # size of the current file
        self._dirty: set[int] = set()
        self._new_names = False
        self._unsynced: list[bytes] = []

    def _path(self, file: int) -> str:
        return f"{self.dir}/{file}.rdq"

    # -- start and stop --------------------------------------------------------------------------
    def open(self) -> bool:
        """Load the store; True when it starts from a clean shutdown (refcounts are trusted)."""
        self.disk.makedirs(self.dir)
        if self.transient:
            for name in self.disk.listdir(self.dir):
                self.disk.remove(f"{self.dir}/{name}")
            self._start_file(0)
            return True
        for name in self.disk.listdir(self.dir):
            if name.endswith(".tmp"):  # a merge cut short by a crash; its source files are intact
                self.disk.remove(f"{self.dir}/{name}")
        if self._load_clean():
            return True
        self._scan_files()
        self.recovering = True
        return False

    def _start_file(self, file: int) -> None:
        self.table = FileTable(self.file_size_limit, current=file)
        self.disk.open(self._path(file))
        self.disk.fsync_dir(self.dir)
        self._end = 0

    def _files_on_disk(self) -> list[int]:
        return sorted(int(n[:-4]) for n in self.disk.listdir(self.dir) if n.endswith(".rdq"))

    def _load_clean(self) -> bool:
        path = f"{self.dir}/{CLEAN_FILE}"
        if not self.disk.exists(path):
            return False
        data = self.disk.read(path)
        self.disk.remove(path)
        self.disk.fsync_dir(self.dir)
        spans, _valid, cut = scan(data)
        if cut is not None or len(spans) != 1:
            log.warning("msg_store_clean_file_invalid", dir=self.dir)
            return False
        start, _length = spans[0]
        current, nfiles, nguids = _CLEAN_HEAD.unpack_from(data, start)
        pos = start + _CLEAN_HEAD.size
        table = FileTable(self.file_size_limit, current=current)
        for _ in range(nfiles):
            f, valid, garbage = _FILE.unpack_from(data, pos)
            pos += _FILE.size
            table.files[f] = FileSummary(valid, garbage)
        if self._files_on_disk() != sorted(table.files) or any(
                self.disk.size(self._path(f)) != s.total for f, s in table.files.items()):
            log.warning("msg_store_clean_file_stale", dir=self.dir)
            return False
        index: dict[bytes, list[int]] = {}
        for _ in range(nguids):
            glen = data[pos]
            guid = bytes(data[pos + 1:pos + 1 + glen])
            pos += 1 + glen
            index[guid] = list(_LOC.unpack_from(data, pos))
            pos += _LOC.size
        self.table, self._index = table, index
        self._end = table.files[current].total
        return True

    def _scan_files(self) -> None:
        files = self._files_on_disk()
        if not files:
            self._start_file(0)
            return
        self.table = FileTable(self.file_size_limit, current=files[-1])
        index = self._index
        for f in files:
            path = self._path(f)
            data = self.disk.read(path)
            spans, valid, cut = scan(data)
            if cut is not None:
                log.warning("msg_store_torn_tail_cut", path=path, offset=cut.offset,
                            bytes=cut.size, reason=cut.reason)
                self.disk.truncate(path, valid)
                self.disk.sync(path)
            self.table.files.setdefault(f, FileSummary())
            for start, length in spans:
                glen = data[start]
                guid = data[start + 1:start + 1 + glen]
                size = FRAME_BYTES + length
                old = index.get(guid)
                if old is not None:  # an older copy (a merge cut short by a crash): garbage now
                    self.table.release(old[0], old[2])
                index[guid] = [f, start - FRAME_BYTES, size, 0]
                self.table.add_live(f, size)
            if f == files[-1]:
                self._end = valid
        log.info("msg_store_recovered_by_scan", dir=self.dir, files=len(files),
                 messages=len(index))

    def add_ref(self, guid: bytes) -> bool:
        """During recovery: a queue index references `guid`. False if the store does not hold it."""
        loc = self._index.get(guid)
        if loc is None:
            return False
        loc[3] += 1
        return True

    def finish_recovery(self) -> int:
        """Every queue has declared its references: unreferenced records become garbage."""
        dropped = [g for g, loc in self._index.items() if loc[3] == 0]
        for guid in dropped:
            loc = self._index.pop(guid)
            self.table.release(loc[0], loc[2])
        self.recovering = False
        if dropped:
            log.info("msg_store_unreferenced_dropped", dir=self.dir, messages=len(dropped))
        return len(dropped)

    def close(self) -> None:
        """Clean stop: sync, then save the index so the next start skips the scan."""
        self.sync()
        if self.transient:
            return
        parts = [_CLEAN_HEAD.pack(self.table.current, len(self.table.files), len(self._index))]
        parts += [_FILE.pack(f, s.valid, s.garbage) for f, s in sorted(self.table.files.items())]
        for guid, loc in self._index.items():
            parts.append(bytes((len(guid),)) + guid + _LOC.pack(*loc))
        write_atomic(self.disk, f"{self.dir}/{CLEAN_FILE}", frame(b"".join(parts)))

    # -- the data path ---------------------------------------------------------------------------
    def contains(self, guid: bytes) -> bool:
        return guid in self._index

    def write(self, items: list[tuple[bytes, bytes | tuple[bytes, ...]]]) -> None:
        """Append (guid, message payload or its parts) records; a guid already held only gains a
        reference."""
        index = self._index
        parts: list[bytes] = []  # the records of one gathered write: bodies are never copied here
        pending = 0  # bytes in `parts`
        for guid, payload in items:
            self._unsynced.append(guid)
            loc = index.get(guid)
            if loc is not None:
                loc[3] += 1
                continue
            if isinstance(payload, bytes):
                payload = (payload,)
            rec = frame_parts(bytes((len(guid),)) + guid, *payload)
            size = sum(map(len, rec))
            if self._end + pending + size > self.file_size_limit and self._end + pending:
                self._append(parts, pending)
                parts, pending = [], 0
                self._roll()
            index[guid] = [self.table.current, self._end + pending, size, 1]
            self.table.add_live(self.table.current, size)
            parts += rec
            pending += size
        self._append(parts, pending)

    def _append(self, parts: list[bytes], size: int) -> None:
        if parts:
            self.disk.append_parts(self._path(self.table.current), parts)
            self._end += size
            self._dirty.add(self.table.current)

    def _roll(self) -> None:
        self.disk.open(self._path(self.table.roll()))
        self._end = 0
        self._new_names = True

    def sync(self) -> list[bytes]:
        """Make every write so far durable; return the guids this covered."""
        for f in sorted(self._dirty):
            if f in self.table.files:
                self.disk.sync(self._path(f))
        self._dirty.clear()
        if self._new_names:
            self.disk.fsync_dir(self.dir)
            self._new_names = False
        done, self._unsynced = self._unsynced, []
        return done

    def read(self, guids: list[bytes]) -> list[bytes | memoryview]:
        """Message payloads of `guids` (each must be held), in order; one read per file when dense."""
        by_file: dict[int, list[tuple[int, int, int]]] = {}
        for i, guid in enumerate(guids):
            f, offset, size, _ref = self._index[guid]
            assert not self.table.is_locked(f)
            skip = FRAME_BYTES + 1 + len(guid)
            by_file.setdefault(f, []).append((offset + skip, size - skip, i))
        out: list[bytes | memoryview] = [b""] * len(guids)
        for f, wanted in by_file.items():
            read_spans(self.disk, self._path(f), wanted, out)
        return out

    def remove(self, guids: list[bytes]) -> None:
        """Drop one reference to each guid; an unreferenced record becomes garbage."""
        index = self._index
        for guid in guids:
            loc = index[guid]
            loc[3] -= 1
            if loc[3] == 0:
                del index[guid]
                self.table.release(loc[0], loc[2])

    # -- garbage collection ----------------------------------------------------------------------
    def collect_garbage(self) -> int:
        """Carry out every deletion and merge the file table plans; return how many."""
        done = 0
        while (action := self.table.plan()) is not None:
            self.table.lock(action)
            if isinstance(action, Delete):
                self.disk.remove(self._path(action.file))
            else:
                self._merge(action)
            self.disk.fsync_dir(self.dir)
            self.table.finish(action)
            done += 1
        return done

    def _merge(self, action: Merge) -> None:
        """Copy the live records of both files into a new `left` file, then drop `right`."""
        index = self._index
        out = bytearray()
        moved: list[tuple[list[int], int]] = []
        for f in (action.left, action.right):
            data = self.disk.read(self._path(f))
            spans, _valid, _cut = scan(data)
            for start, length in spans:
                glen = data[start]
                loc = index.get(data[start + 1:start + 1 + glen])
                if loc is not None and loc[0] == f and loc[1] == start - FRAME_BYTES:
                    moved.append((loc, len(out)))
                    out += data[start - FRAME_BYTES:start + length]
        tmp = self._path(action.left) + ".tmp"
        if self.disk.exists(tmp):
            self.disk.remove(tmp)
        self.disk.open(tmp)
        self.disk.append(tmp, bytes(out))
        self.disk.sync(tmp)
        self.disk.rename(tmp, self._path(action.left))
        self.disk.fsync_dir(self.dir)
        self.disk.remove(self._path(action.right))
        for loc, offset in moved:
            loc[0], loc[1] = action.left, offset
        self.table.files[action.left].garbage = 0

    # -- inspection ------------------------------------------------------------------------------
    def summary(self) -> StoreSummary:
        t = self.table
        return StoreSummary(len(t.files), len(self._index), t.valid_bytes, t.garbage_bytes,
                            t.gc_runs, t.files_deleted)


def read_spans(disk: Disk, path: str, wanted: list[tuple[int, int, int]],
               out: list[bytes | memoryview]) -> None:
    """Fill out[i] with the `size` bytes at `offset` for each (offset, size, i) of one file."""
    wanted.sort()
    lo = wanted[0][0]
    hi = max(o + s for o, s, _i in wanted)
    if hi - lo <= READ_SPAN_WASTE_MAX * sum(s for _o, s, _i in wanted):
        data = memoryview(disk.read(path, lo, hi - lo))  # slices are decoded, then let go
        for offset, size, i in wanted:
            out[i] = data[offset - lo:offset - lo + size]
    else:
        for offset, size, i in wanted:
            out[i] = disk.read(path, offset, size)
