"""Which quorum queue members a node holds: the quorum host's small durable table.

Theory of operation. The members of a node's quorum host exist because the cluster asked for them
(`StartMember`), not because a log happens to be on disk: a member deleted just before a crash must
not come back from WAL records that have not rolled over yet, and a member started just before a
crash must come back even if it never wrote an entry. So the host keeps one table of its members,
rewritten whole (temp file, sync, rename, directory sync: persist.disk.write_atomic) before it
answers a StartMember, and before it deletes a member's files. It is small: one row per member.

Format: b"WQMT", version:u8, length:u32, crc32:u32 (of the payload), payload (msgpack: a list of
rows). A file that fails its length or CRC is an error, never "no members": forgetting a member
would drop a replica of a queue. Rows keep the order members were added in.
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

import msgpack

MAGIC = b"WQMT"
VERSION = 1
_HEADER = struct.Struct("<4sBII")


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


def encode(members: list[MemberSpec]) -> bytes:
    payload = msgpack.packb([[m.uid, m.vhost, m.name, list(m.nodes), m.arguments, m.created_ms]
                             for m in members], use_bin_type=True)
    return _HEADER.pack(MAGIC, VERSION, len(payload), zlib.crc32(payload)) + payload


def decode(data: bytes) -> list[MemberSpec]:
    if len(data) < _HEADER.size:
        raise CorruptMemberTable(f"member table of {len(data)} bytes has no header")
    magic, version, length, crc = _HEADER.unpack_from(data)
    payload = data[_HEADER.size:]
    if magic != MAGIC or version != VERSION:
        raise CorruptMemberTable(f"not a member table (magic {magic!r}, version {version})")
    if len(payload) != length or zlib.crc32(payload) != crc:
        raise CorruptMemberTable(f"member table torn or damaged ({len(payload)} of {length} bytes)")
    rows = msgpack.unpackb(payload, raw=False, use_list=False, strict_map_key=False)
    return [MemberSpec(uid, vhost, name, tuple(nodes), dict(arguments), created_ms)
            for uid, vhost, name, nodes, arguments, created_ms in rows]

