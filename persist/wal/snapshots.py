"""A member's snapshot and its metadata: small files replaced atomically.

`<dir>/snapshot` holds one SNAPSHOT record (index, term, floor, machine state bytes); `<dir>/meta`
one MEMBER_META record (current term, voted_for, floor). Both are written with `write_atomic` (temp
file, sync, rename, fsync of the directory), so a crash leaves the old or the new file, never a mix,
and each is durable when its save returns.

The *floor* is the first index the log may hold; recovery ignores entries below it wherever they
still lie (a WAL not yet rolled over, a segment file that straddles it). `compact_below` raises it
in the meta file; an `install_snapshot` that discards the log raises it in the snapshot file itself,
so the snapshot and the discard land in one atomic rename. The effective floor is the larger.

The term and vote in `meta` are only a base: a member saves its hard state as a HARD_STATE record
in the WAL's group commit (a small file per vote cost 2-3 fsyncs, and 100 members electing at once
stalled a node), and recovery takes the newest of the two (persist/wal/records.newer_hard_state);
`compact_below` refreshes the base with the durable hard state when it writes the floor. A file
that fails its CRC is an error, not "absent": a member that forgot its vote or its snapshot could
break Raft's safety.
"""
from __future__ import annotations

from persist.disk import Disk, write_atomic
from persist.wal.records import MEMBER_META, SNAPSHOT, Record, decode_meta, decode_snapshot, \
    encode_meta, encode_snapshot, scan


class CorruptStateFile(Exception):
    pass


def _load(disk: Disk, path: str, rtype: int) -> Record | None:
    if not disk.exists(path):
        return None
    result = scan(disk.read(path))
    if result.cut is not None or len(result.records) != 1 or result.records[0].type != rtype:
        raise CorruptStateFile(f"{path}: {result.cut or 'unexpected records'}")
    return result.records[0]


class SnapshotStore:
    def __init__(self, disk: Disk, directory: str) -> None:
        self.disk = disk
        self.path = f"{directory}/snapshot"
        self.meta: tuple[int, int] | None = None
        self.floor = 1

    def load(self) -> tuple[int, int] | None:
        rec = _load(self.disk, self.path, SNAPSHOT)
        if rec is not None:
            index, term, self.floor, _ = decode_snapshot(rec)
            self.meta = (index, term)
        return self.meta

    def save(self, index: int, term: int, floor: int, data: bytes) -> None:
        write_atomic(self.disk, self.path, encode_snapshot(index, term, floor, data))
        self.meta = (index, term)
        self.floor = floor

    def data(self) -> bytes | None:
        rec = _load(self.disk, self.path, SNAPSHOT)
        return None if rec is None else decode_snapshot(rec)[3]


class MemberMeta:
    def __init__(self, disk: Disk, directory: str) -> None:
        self.disk = disk
        self.path = f"{directory}/meta"
        self.term = 0
        self.voted_for: str | None = None
        self.floor = 1

    def load(self) -> None:
        rec = _load(self.disk, self.path, MEMBER_META)
        if rec is not None:
            self.term, self.voted_for, self.floor = decode_meta(rec)

    def save(self, term: int, voted_for: str | None, floor: int) -> None:
        if (term, voted_for, floor) == (self.term, self.voted_for, self.floor):
            return
        write_atomic(self.disk, self.path, encode_meta(term, voted_for, floor))
        self.term, self.voted_for, self.floor = term, voted_for, floor
