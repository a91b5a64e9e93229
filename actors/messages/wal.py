"""The WAL link: a node's quorum hosts and the node's one WAL, when the WAL has a process of its
own (`quorum_hosts` > 1; the protocol's rules are in actors/raft/wal_link.py).

quorum host (its `wal-link` actor) -> the WAL (`wal` in the `wal` host):
- `WalAppend`: one batch of this host's members' WAL records (`records`: the records back to
  back, as persist/wal/records.py encodes them), numbered `seq` in this host incarnation's order
  and tagged with the incarnation (`host_epoch`) and the WAL incarnation it is meant for.
- `WalRolled`: this host has written its members' part of the WAL files before `file_seq` into
  their segments (and their hard states into the files from `file_seq` on): it needs them no more.
the WAL -> each quorum host's `wal-link`:
- `WalAck`: every batch of that host incarnation up to `upto` is written and synced.
- `WalStarted`: a new WAL incarnation: what was not acknowledged is sent again, to it.
- `WalRoll`: the WAL files before `file_seq` are to go: roll this host's members over.
Before a quorum host incarnation starts its members it fences the WAL over a request socket of
its own (not a message: nothing of the host may run before the answer), actors/raft/wal_host.py.

`WalAppend` travels as a raw frame (actors/runtime/mailbox.py), not in an envelope, so that its
records are copied once on the way, by the join that builds the frame, and the WAL writes them
from the received frame: `RAW_FRAME | host_epoch:u64 | wal_epoch:u64 | seq:u64 | host_len:u16 |
host | records`, little-endian (`append_frame`, `read_append`).
"""
from __future__ import annotations

import struct
from collections.abc import Sequence

from actors.messages import message
from actors.messages.runtime import RAW_FRAME

_APPEND = struct.Struct("<BQQQH")


@message
class WalAppend:
    host: str
    host_epoch: int
    wal_epoch: int
    seq: int
    records: bytes


@message
class WalAck:
    host_epoch: int
    wal_epoch: int
    upto: int


@message
class WalStarted:
    wal_epoch: int


@message
class WalRoll:
    wal_epoch: int
    file_seq: int


@message
class WalRolled:
    host: str
    host_epoch: int
    wal_epoch: int
    file_seq: int


def append_frame(host: str, host_epoch: int, wal_epoch: int, seq: int,
                 records: Sequence[bytes | memoryview]) -> tuple[bytes, int]:
    """A WalAppend's raw frame (its records joined after the header: the one copy), and where
    the records start in it."""
    name = host.encode()
    header = _APPEND.pack(RAW_FRAME, host_epoch, wal_epoch, seq, len(name)) + name
    return b"".join([header, *records]), len(header)


def read_append(frame: bytes) -> WalAppend:
    """The WalAppend in a raw frame; its records a view of the frame (no copy)."""
    _, host_epoch, wal_epoch, seq, name_len = _APPEND.unpack_from(frame)
    start = _APPEND.size + name_len
    host = bytes(frame[_APPEND.size:start]).decode()
    return WalAppend(host, host_epoch, wal_epoch, seq, memoryview(frame)[start:])
