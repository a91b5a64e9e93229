"""Between the members of a replicated stream (actors/stream/replication.py), and a publish one
member hands on to the member that leads.

Members are named by node; epochs and offsets are ints; chunks travel encoded, as the log
stores them (persist/stream/chunk.py), so a replica writes what its leader wrote.
"""
from __future__ import annotations

from actors.messages import message
from actors.messages.channel_queue import Published
from actors.runtime.address import Address


@message
class StreamAppend:
    """leader -> replica: chunks from offset `at` on (maybe none: an announce), the commit, and
    with `truncate_to` set the answer to a StreamHello: cut the log to there first, and take
    `history` (the leader's epochs) as the log's."""

    epoch: int
    leader: str
    at: int
    chunks: list[bytes]
    commit: int
    truncate_to: int | None = None
    history: list[tuple[int, int]] | None = None


@message
class StreamAck:
    """replica -> leader: the log is on disk below `written` (after an fdatasync)."""

    epoch: int
    member: str
    written: int


@message
class StreamHello:
    """member -> leader (or every member, at start): where my log ends and its epochs; attach me."""

    epoch: int
    member: str
    next_offset: int
    history: list[tuple[int, int]]


@message
class StreamVote:
    epoch: int
    candidate: str
    last_epoch: int
    next_offset: int


@message
class StreamVoteReply:
    epoch: int
    member: str
    granted: bool


@message
class StreamForward:
    """member -> leader: a channel's publish batch that reached a member that does not lead;
    `origin` is that member, which the leader tells when the batch is committed."""

    origin: str
    channel: Address
    messages: list[Published]


@message
class StreamConfirmed:
    """leader -> the member a publish reached: these channels' publishes are committed up to seq."""

    confirms: list[tuple[Address, int]]
