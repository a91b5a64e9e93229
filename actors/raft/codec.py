"""Raft messages <-> runtime bodies (msgpack-able tuples).

The message kind names the class; the body is the dataclass fields in declaration order. Entries
travel as (index, term, command) triples and are rebuilt as `Entry` on arrival, because msgpack
hands tuples back (not NamedTuples) and the log reads `.index`/`.term`/`.command`.
"""
from __future__ import annotations

from itertools import starmap
from typing import Any

from raft.log import Entry
from raft.messages import (AppendEntries, AppendReply, Heartbeat, HeartbeatReply,
                                   InstallSnapshot, InstallSnapshotReply, Message, PreVote,
                                   PreVoteReply, RequestVote, RequestVoteReply, TimeoutNow)

KIND_PREFIX = "raft."
CLASSES = {KIND_PREFIX + cls.__name__: cls for cls in (
    PreVote, PreVoteReply, RequestVote, RequestVoteReply, AppendEntries, AppendReply, Heartbeat,
    HeartbeatReply, InstallSnapshot, InstallSnapshotReply, TimeoutNow)}
KINDS = {cls: kind for kind, cls in CLASSES.items()}
APPEND = KINDS[AppendEntries]


def encode(msg: Message) -> tuple[str, tuple]:
    """(kind, body) for `Runtime.send`."""
    return KINDS[type(msg)], tuple(getattr(msg, f) for f in msg.__slots__)


def decode(kind: str, body: Any) -> Message:
    if kind == APPEND:
        term, src, prev_index, prev_term, entries, commit = body
        return AppendEntries(term, src, prev_index, prev_term, tuple(starmap(Entry, entries)),
                             commit)
    return CLASSES[kind](*body)


def is_raft(kind: str) -> bool:
    return kind.startswith(KIND_PREFIX)
