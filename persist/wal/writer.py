"""`WalWriter`: the IO side of the node's shared WAL (drives persist.wal.core.WalCore with a Disk).

Layout under the disk's root:
    wal/<seq:016d>.wal                 the WAL files (persist/wal/files.py)
    members/<quoted id>/NNNNNNNN.segment, snapshot, meta    per member (persist/wal/segments.py, snapshots.py)
(`members_dir`: "members" for quorum host 0, "membersK" for quorum host K of a node with several.)

Two ways to run it. *Writing its own WAL* (the default, `flush`): a node with one quorum host, the
simulator, the metadata group. *Members only* (`own_files=False`): a quorum host of a node whose
WAL has a process of its own (actors/raft/wal_host.py). It keeps its members' logs and memtables
as ever, but `take_batch` hands the records to the shell to send, `durable` applies what the WAL
process acknowledged, a rollover is started by the WAL process (`start_member_roll`, then
`roll_step` writes this host's members' segments) and `recover(..., read_only=True)` replays the
WAL files without touching them, keeping only this host's members.

`flush()` appends everything submitted since the last flush to the current WAL file as one
(gathered) write, syncs once, tells each in-process MemberLog how far it is durable, and returns
that as {member: written_upto} for the WAL actor to notify the members with. When the WAL files
hold `wal_max_size_bytes`, the flush starts a rollover, in this order (each step durable before the
next): start a new WAL file and write into it every member's durable hard state (HARD_STATE records
live only in the WAL, so they must outlive the files being deleted; one append and one sync); freeze
the memtables (WalCore.start_roll); write the frozen tables into the members' segments (synced), at
most `roll_step_bytes` per flush, so the rollover spreads over loop turns while appends go on into
the new file (`rolling` says one is in progress: the WAL actor keeps flushing until it is done);
delete the old WAL files. A crash at any point leaves the old WAL files in place, and replaying them
(and the new file after them) over segments that already hold part of their result is harmless
(see persist.wal.core.MemberReplay); hard states merge by "newest wins" (records.newer_hard_state),
so the order files are replayed in does not matter for them.

Preallocation of the WAL files: persist/wal/files.py.

`recover()` loads each member's meta, snapshot and segments, replays every WAL file in order
(cutting a torn tail: the file is truncated at the last valid record and the cut is logged), raises
`LogGapError` if any member's log has a hole, and starts a fresh WAL file. Nothing is appended to a
file recovery cut, and nothing below a member's floor is trusted. A log that recovers ending below
its member's snapshot (a snapshot written before the WAL had synced the entries under it: the
member shell must not do that, see actors/raft/member.py, but a disk may still lose them) is reset
to start just above the snapshot, and that floor is saved before anything is appended: the snapshot
stands in for the lost entries, which were committed and so survive on a majority.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence
from urllib.parse import quote, unquote

import structlog

from persist.disk import Disk
from persist.wal.member_log import MemberLog
from raft.log import Entry
from persist.wal.files import PREALLOC_BYTES, WalFiles
from persist.wal.records import Record, encode_hard_state, newer_hard_state
from persist.wal.segments import SegmentSet
from persist.wal.snapshots import MemberMeta, SnapshotStore
from persist.wal.core import Batch, Gap, MemberReplay, MemTable, WalCore

WAL_MAX_SIZE_BYTES = 512 * 1024 * 1024
SEGMENT_MAX_ENTRIES = 4096
ROLL_STEP_BYTES = 8 * 1024 * 1024  # segment bytes a rollover writes per flush (~30 ms on a 300 MB/s disk)
log = structlog.get_logger("warren.persist.wal")


class LogGapError(Exception):
    def __init__(self, gaps: list[Gap]) -> None:
        super().__init__("; ".join(g.text for g in gaps))
        self.gaps = gaps


class WalCounters:
    """What the WAL and the rollover's segment writing did since the process started, by the
    names of ra's counters (ra_log_wal: wal_files, batches, writes, bytes_written;
    ra_log_segment_writer: mem_tables, segments, entries, bytes_written), which
    rabbitmq_prometheus shows. They only grow."""

    __slots__ = ("wal_files", "batches", "writes", "bytes_written", "mem_tables", "segments", "segment_entries",
                 "segment_bytes")

    def __init__(self) -> None:
        for name in self.__slots__:
            setattr(self, name, 0)

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__slots__}


class WalWriter:
    def __init__(self, disk: Disk, wal_max_size_bytes: int = WAL_MAX_SIZE_BYTES,
                 segment_max_entries: int = SEGMENT_MAX_ENTRIES, prealloc_bytes: int = PREALLOC_BYTES,
                 *, members_dir: str = "members", own_files: bool = True) -> None:
        self.disk = disk
        self.segment_max_entries = segment_max_entries
        self.members_dir = members_dir
        self.core = WalCore(wal_max_size_bytes)
        self.logs: dict[str, MemberLog] = {}
        self.files = WalFiles(disk, prealloc_bytes)
        self.own_files = own_files
        self._roll_queue: list[str] | None = None  # members whose frozen table is being written
        self.roll_step_bytes = ROLL_STEP_BYTES
        self.rollovers = 0
        self.counters = WalCounters()

    @property
    def current_file(self) -> str:
        return self.files.current_file

    def _member_dir(self, member: str) -> str:
        return f"{self.members_dir}/" + quote(member, safe="")

    # -- members -------------------------------------------------------------------------------
    def member(self, member: str) -> MemberLog:
        """The log of `member`, created empty if the node has none yet: its directory is made
        when its first file is (`_MadeOnFirstWrite`), so a new member costs no IO."""
        found = self.logs.get(member)
        if found is not None:
            return found
        directory = self._member_dir(member)
        disk = _MadeOnFirstWrite(self.disk, directory, self.members_dir)
        meta, snaps = MemberMeta(disk, directory), SnapshotStore(disk, directory)
        segments = SegmentSet(disk, directory, self.segment_max_entries)
        segments.load()
        return self._open_member(member, 0, 0, MemTable(), (0, None), (segments, snaps, meta, None))

    def _load_member(self, member: str) -> tuple[SegmentSet, SnapshotStore, MemberMeta, Gap | None]:
        directory = self._member_dir(member)
        meta, snaps = MemberMeta(self.disk, directory), SnapshotStore(self.disk, directory)
        meta.load()
        snaps.load()
        segments = SegmentSet(self.disk, directory, self.segment_max_entries)
        hole = segments.load()
        gap = None if hole is None else Gap(member, hole[0], hole[1], "between segment files")
        return segments, snaps, meta, gap

    def _open_member(self, member: str, seg_limit: int, last: int, mem: MemTable,
                     hard_state: tuple[int, str | None],
                     loaded: tuple[SegmentSet, SnapshotStore, MemberMeta, Gap | None] | None = None
                     ) -> MemberLog:
        segments, snaps, meta, _ = loaded or self._load_member(member)
        segments.limit = seg_limit
        self.core.mem[member] = mem
        hard_state = newer_hard_state(hard_state, (meta.term, meta.voted_for))
        member_log = MemberLog(member, self.core, segments, snaps, meta, last, hard_state)
        self.logs[member] = member_log
        return member_log

    def forget(self, member: str) -> None:
        """Delete a member's log for good (a deleted quorum queue's member): its memtable, segment
        files, snapshot and meta go now. Its records in the WAL files stay until they roll over;
        `recover(keep=...)` must then be told to skip them, and deletes the files of a member it
        is told not to keep, so the removal needs no sync: a crash that undoes it leaves files
        that the next recovery deletes (the quorum host keeps only its member table's members)."""
        self.logs.pop(member, None)
        self.core.forget(member)
        self.disk.remove_tree(self._member_dir(member))

    # -- the write path ----------------------------------------------------------------------
    def submit(self, member: str, entries: Sequence[Entry]) -> None:
        self.logs[member].append(entries)

    @property
    def rolling(self) -> bool:
        """A rollover is being written (the next flushes go on with it)."""
        return self._roll_queue is not None

    def flush(self) -> dict[str, int]:
        """One write and one sync for everything submitted since the last flush; then a step of
        the rollover in progress, or the start of one."""
        assert self.own_files and self.files.seq, "recover() first"
        batch = self.core.take_batch()
        written: dict[str, int] = {}
        if batch is not None:
            self.files.write(batch.parts, batch.nbytes)
            self.files.sync()
            counters = self.counters
            counters.batches += 1
            counters.writes += batch.records
            counters.bytes_written += batch.nbytes
            written = self.durable(batch)
        if self._roll_queue is None and self.core.should_roll():
            self._start_roll()
        if self._roll_queue is not None and self.roll_step():
            self.files.remove_old()
        return written

    def take_batch(self) -> Batch | None:
        """Members only: everything queued since the last batch, for the shell to send."""
        return self.core.take_batch()

    def durable(self, batch: Batch) -> dict[str, int]:
        """`batch` is synced: each member's log hears how far it is durable, and its hard state;
        returns {member: written_upto} for the members' notifications."""
        written = self.core.written(batch)
        logs = self.logs
        for member, upto in written.items():
            if member in logs:  # not forgotten since it queued these
                logs[member]._synced(upto)
        for member, hard_state in batch.hard.items():
            if member in logs:
                logs[member]._hard_synced(hard_state)
        return written

    def _start_roll(self) -> None:
        self.files.roll()
        self.counters.wal_files = self.files.files_started
        hard = b"".join([encode_hard_state(*ml.durable_hard_state(), member.encode())
                         for member, ml in self.logs.items() if ml.durable_hard_state()[0]])
        if hard:
            self.files.write([hard], len(hard))
            self.files.sync()
        self.start_member_roll()

    def start_member_roll(self) -> None:
        """Freeze the memtables (they hold at least what every WAL file so far holds of these
        members) for `roll_step` to write into the segments. Members only: the WAL's process
        started the new file; the caller sends every member's hard state into it."""
        self.core.start_roll()
        self._roll_queue = list(self.logs)

    def roll_step(self) -> bool:
        """Write up to `roll_step_bytes` of the frozen tables into segments; once every member's
        is written, release the tables and say so (True): the caller deletes the old WAL files
        (or, members only, tells the WAL's process that this host is done with them)."""
        queue, frozen, budget = self._roll_queue, self.core.frozen, self.roll_step_bytes
        counters = self.counters
        assert queue is not None
        while queue and budget > 0:
            member = queue[0]
            member_log, table = self.logs.get(member), frozen.get(member)
            if member_log is None:  # forgotten meanwhile
                queue.pop(0)
                continue
            segments = member_log.segments
            lo = segments.limit + 1 if table is None or not table.items else max(segments.limit + 1, table.first)
            if table is None or not table.items or lo > table.last:
                segments.write([], member_log.first_index())  # cut what a truncation made invalid
                queue.pop(0)
                counters.mem_tables += table is not None and bool(table.items)
                continue
            count = max(1, budget * len(table.items) // max(1, table.nbytes))
            chunk = table.slice(lo, lo + count)
            counters.segments += segments.write(chunk, member_log.first_index())
            chunk_bytes = sum(len(e.command) for e in chunk)
            counters.segment_entries += len(chunk)
            counters.segment_bytes += chunk_bytes
            budget -= chunk_bytes
        if queue:
            return False
        self.core.roll_done()
        log.info("wal_rolled_over", members=self.members_dir, files=self.own_files)
        self._roll_queue = None
        self.rollovers += 1
        return True

    # -- recovery ----------------------------------------------------------------------------
    def recover(self, keep: Callable[[str], bool] | None = None) -> dict[str, MemberLog]:
        """Start-up (also on an empty disk): rebuild every member's log; call once, first. A
        member that never wrote a file or a WAL record left nothing to find: its owner names it
        (the quorum host's member table) and `member()` gives it its empty log again.
        `keep` says which members still exist (default: all): the others' files are deleted and
        their WAL records skipped (a member forgotten before a crash, or, members only, one of
        another quorum host: its files are in another `members_dir`). Members only, the WAL files
        are read, never cut or started (their process does that), and no rollover runs here."""
        members_dir = self.members_dir
        self.disk.makedirs(members_dir)
        names = [unquote(name) for name in self.disk.listdir(members_dir)]
        if keep is not None:
            for member in [m for m in names if not keep(m)]:
                log.info("wal_member_forgotten", member=member)
                self.disk.remove_tree(self._member_dir(member))
                names.remove(member)
            self.disk.fsync_dir(members_dir)
        loaded = {member: self._load_member(member) for member in names}
        replays: dict[str, MemberReplay] = {}
        gaps: list[Gap] = [g for *_, g in loaded.values() if g is not None]
        for member, (segments, snaps, meta, _) in loaded.items():
            replays[member] = MemberReplay(member, max(meta.floor, snaps.floor),
                                           segments.first, segments.last)
            gap = replays[member].check_segments()
            if gap is not None:
                gaps.append(gap)

        def apply(rec: Record) -> None:
            if keep is not None and rec.member not in loaded and not keep(rec.member):
                return
            replay = replays.get(rec.member)
            if replay is None:
                replay = replays[rec.member] = MemberReplay(rec.member, 1, None, 0)
            replay.apply(rec)

        wal_bytes = self.files.replay(self.own_files, apply)
        finished = {member: replay.finish() for member, replay in replays.items()}
        gaps += [f for f in finished.values() if isinstance(f, Gap)]
        if gaps:
            for gap in gaps:
                log.error("raft_log_gap", member=gap.member, missing_lo=gap.missing_lo,
                          missing_hi=gap.missing_hi, where=gap.where)
            raise LogGapError(gaps)
        self.core = WalCore(self.core.max_size_bytes, wal_bytes)
        for member, replay in replays.items():
            if member not in loaded:
                self.disk.makedirs(self._member_dir(member))
                self.disk.fsync_dir(members_dir)
            last, mem = finished[member]
            snap = loaded[member][1].meta if member in loaded else None
            if snap is not None and last < snap[0]:
                log.warning("raft_log_below_snapshot", member=member, last=last,
                            snapshot_index=snap[0])
                meta = loaded[member][2]
                meta.save(meta.term, meta.voted_for, snap[0] + 1)
                last, mem = snap[0], MemTable(snap[0] + 1)
            self._open_member(member, replay.seg_limit, last, mem, replay.hard_state,
                              loaded.get(member))
        if not self.own_files:
            return dict(self.logs)
        self.files.start_after_recovery()
        self.counters.wal_files = self.files.files_started
        if self.core.should_roll():
            self._start_roll()
            while not self.roll_step():
                pass
            self.files.remove_old()
        return dict(self.logs)


class _MadeOnFirstWrite:
    """The disk as a new member's files see it: the member's directory is made, and its name made
    durable in members/, just before the first file goes into it (its first segment at a
    rollover, its first snapshot or meta), not when the member starts: a new quorum queue's
    member writes nothing but WAL records until then, and thousands start together. Until then
    the directory does not exist, which reads as empty, and recovery finds the member through
    its WAL records or the quorum host's member table."""

    def __init__(self, disk: Disk, directory: str, parent: str) -> None:
        self._disk = disk
        self._dir = directory
        self._parent = parent
        self._made = False

    def __getattr__(self, name: str) -> Any:  # reads go straight through
        return getattr(self._disk, name)

    def _make(self) -> None:
        if not self._made:
            self._disk.makedirs(self._dir)
            self._disk.fsync_dir(self._parent)
            self._made = True

    def makedirs(self, path: str) -> None:
        if path != self._dir:  # the member's own directory waits for its first file
            self._make()
            self._disk.makedirs(path)

    def open(self, path: str) -> None:
        self._make()
        self._disk.open(path)

    def append(self, path: str, data: bytes) -> int:
        self._make()
        return self._disk.append(path, data)

    def rename(self, src: str, dst: str) -> None:
        self._make()
        self._disk.rename(src, dst)

