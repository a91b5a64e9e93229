"""What travels with a connection that moves to another connection host, beside its socket.

Theory of operation: the socket's descriptor goes with SCM_RIGHTS in the datagram that carries
this record (actors/reader/acceptor.py), so the client sees nothing: no byte is lost or read
twice. What the old host had read and not yet acted on travels as bytes (`leftover`): the frames of
the commands it stopped at, encoded again, then what its parser held (a publish part-way in, as
its frames so far, and the part-frame the last read cut short); the new host feeds them to its
parser before it reads the socket. Beside them: the negotiated connection (user and its tags
at login, vhost, frame_max, channel_max, heartbeat, the client's properties, whose capabilities say how to
block it) and each channel's `ChannelHandover` (actors/channel/handover.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import msgpack

from actors.channel.handover import ChannelHandover
from wire.codec import decode_table, encode_table
from wire.frames import content_frames_bytes, method_frame
from wire.inbound import Command, Event, Heartbeat

MOVED = b"m"  # the first byte of a hand-off datagram that carries a running connection


@dataclass(frozen=True, slots=True)
class MovedConnection:
    was: str   # its name on the host it left (the logs of both hosts link the two names)
    user: str
    vhost: str
    frame_max: int
    channel_max: int
    heartbeat: int
    client_properties: dict
    connected_at: int  # ms since the epoch, when the first host accepted it
    channels: tuple[ChannelHandover, ...]
    leftover: bytes
    tags: tuple[str, ...] = ()  # the user's tags when it logged in

    def pack(self) -> bytes:
        return MOVED + msgpack.packb([
            self.was, self.user, self.vhost, self.frame_max, self.channel_max, self.heartbeat,
            encode_table(self.client_properties), self.connected_at,
            [c.as_list() for c in self.channels], self.leftover, list(self.tags)], use_bin_type=True)

    @classmethod
    def unpack(cls, data: bytes) -> MovedConnection:
        (was, user, vhost, frame_max, channel_max, heartbeat, properties, connected_at, channels,
         leftover, tags) = msgpack.unpackb(data[len(MOVED):], raw=False)
        return cls(was, user, vhost, frame_max, channel_max, heartbeat, decode_table(properties, 0)[0],
                   connected_at, tuple(ChannelHandover(*c) for c in channels), leftover, tuple(tags))


def encodable(events: Iterable[Event]) -> bool:
    """Whether these parsed events can be written back as frames (commands and heartbeats)."""
    return all(type(e) is Command or type(e) is Heartbeat for e in events)


def encode_again(events: Iterable[Event], frame_max: int) -> bytes:
    """The frames of `events` (heartbeats dropped: the new host's monitor starts afresh)."""
    out = []
    for e in events:
        if type(e) is Command:
            out.append(method_frame(e.channel, e.method) if e.header is None
                       else content_frames_bytes(e.channel, e.method, e.header, e.body or b"", frame_max))
    return b"".join(out)
