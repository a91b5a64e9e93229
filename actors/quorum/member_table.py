"""Which quorum queue members a node holds: the quorum host's small durable table.

Theory of operation. The members of a node's quorum host exist because the cluster asked for them
(`StartMember`), not because a log happens to be on disk: a member deleted just before a crash must
not come back from WAL records that have not rolled over yet, and a member started just before a
crash must come back even if it never wrote an entry. So the host keeps one table of its members,
made durable BEFORE it answers a StartMember and BEFORE it deletes a member's files.

The table is a log: a header, then records (persist/classic/records.py's framing: length and
CRC-32C each) that add rows or remove uids, appended and synced once for every batch of starts
or deletes (a loop turn's), so that declaring a queue costs one small append, not a rewrite of
every row: rewriting it whole cost O(members) per start, 2,000 quorum queues a quadratic 400 MB.
Once the records outnumber the rows by `garbage_max` the table is written again whole (temp file,
sync, rename, directory sync: persist.disk.write_atomic), so it stays O(rows).

Damage. A last record that is cut short, zero-filled or whole with a bad CRC is a write the crash
interrupted (nothing acknowledged: every answer waits for the sync), so it is cut and logged, as
the WAL cuts a torn tail; damage before the last record, or a header that is not a table's, is an
error, never "no members": forgetting a member would drop a replica of a queue. Only version 2
is read: version 1 (one msgpack list of rows under one zlib CRC-32, written whole each time) was
never released, and CRC-32C is the one checksum of what warren keeps on disk.

Rows keep the order members were added in.
"""
from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import msgpack
import structlog

from persist.classic.records import FRAME_BYTES, frame, scan
from persist.disk import Disk, write_atomic

log = structlog.get_logger("warren.quorum.member_table")

MAGIC = b"WQMT"
VERSION = 2
_HEADER = struct.Struct("<4sB")
ADD, REMOVE = 1, 2
garbage_max = 64  # records beyond the rows before the table is written again whole


class CorruptMemberTable(Exception):
    pass


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """One member: its queue (incarnation `uid`), the nodes of its initial Raft configuration,
    and what its machine starts from (declaration arguments, creation time)."""

    uid: str
    vhost: str
    name: str
    nodes: tuple[str, ...]
    arguments: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    created_ms: int = 0


def _row(m: MemberSpec) -> list:
    return [m.uid, m.vhost, m.name, list(m.nodes), m.arguments, m.created_ms]


def _spec(row: Any) -> MemberSpec:
    uid, vhost, name, nodes, arguments, created_ms = row
    return MemberSpec(uid, vhost, name, tuple(nodes), dict(arguments), created_ms)


def added(members: Iterable[MemberSpec]) -> bytes:
    """The records that add `members`."""
    return b"".join(frame(msgpack.packb([ADD, _row(m)], use_bin_type=True)) for m in members)


def removed(uids: Iterable[str]) -> bytes:
    return b"".join(frame(msgpack.packb([REMOVE, uid], use_bin_type=True)) for uid in uids)


def encode(members: list[MemberSpec]) -> bytes:
    """A whole table holding `members`."""
    return _HEADER.pack(MAGIC, VERSION) + added(members)


def decode(data: bytes) -> tuple[list[MemberSpec], int, int]:
    """(the rows, the bytes of the valid prefix, the records in it). A torn last record is left
    out of the prefix; any other damage raises CorruptMemberTable."""
    if len(data) < _HEADER.size:
        raise CorruptMemberTable(f"member table of {len(data)} bytes has no header")
    magic, version = _HEADER.unpack_from(data)
    if magic != MAGIC or version != VERSION:
        raise CorruptMemberTable(f"not a member table (magic {magic!r}, version {version})")
    body = memoryview(data)[_HEADER.size:]
    spans, valid, cut = scan(body)
    if cut is not None and not _torn(body, cut.offset, cut.reason):
        raise CorruptMemberTable(f"member table damaged at byte {_HEADER.size + cut.offset} ({cut.reason})")
    rows: dict[str, MemberSpec] = {}
    for start, length in spans:
        op, value = msgpack.unpackb(body[start:start + length], raw=False, use_list=False, strict_map_key=False)
        if op == ADD:
            spec = _spec(value)
            rows[spec.uid] = spec
        else:
            rows.pop(value, None)
    return list(rows.values()), _HEADER.size + valid, len(spans)


def _torn(body: memoryview, offset: int, reason: str) -> bool:
    """Whether what is left at `offset` is one record cut short by a crash (see the docstring)."""
    rest = body[offset:]
    if reason in ("short header", "short record"):
        return True
    if reason == "bad length":  # zero fill past the end of the last write
        return not any(rest)
    length = struct.unpack_from("<I", rest, 4)[0]  # a whole record with a bad CRC: torn if it is the last
    return FRAME_BYTES + length == len(rest)


class MemberTable:
    """The table in `path` on `disk`: `load` it once, then `add` and `remove` (each durable when
    it returns)."""

    def __init__(self, disk: Disk, path: str) -> None:
        self.disk = disk
        self.path = path
        self.rows: dict[str, MemberSpec] = {}
        self._records = 0

    def load(self) -> list[MemberSpec]:
        if not self.disk.exists(self.path):
            self._rewrite()
            return []
        data = self.disk.read_file(self.path)
        specs, valid, records = decode(data)
        self.rows = {s.uid: s for s in specs}
        self._records = records
        if valid < len(data):
            log.warning("member_table.torn_tail_cut", path=self.path, valid_bytes=valid, cut_bytes=len(data) - valid)
            self.disk.truncate(self.path, valid)
            self.disk.sync(self.path)
        return specs

    def add(self, specs: list[MemberSpec]) -> None:
        for spec in specs:
            self.rows[spec.uid] = spec
        self._append(added(specs), len(specs))

    def remove(self, uids: list[str]) -> None:
        for uid in uids:
            del self.rows[uid]
        self._append(removed(uids), len(uids))

    def _append(self, records: bytes, count: int) -> None:
        if self._records + count > len(self.rows) + garbage_max:
            self._rewrite()
            return
        self.disk.append(self.path, records)
        self.disk.sync(self.path)
        self._records += count

    def _rewrite(self) -> None:
        write_atomic(self.disk, self.path, encode(list(self.rows.values())))
        self._records = len(self.rows)
