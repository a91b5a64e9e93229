"""Frame splitting and pre-encoded publish frames, on top of pika's codec.

Theory of operation: the tool is an independent AMQP client, so every method it sends or reads is
encoded and decoded by pika.spec / pika.frame (a well-kept codec that owes nothing to warren's wire/).
What this module adds is only what pika leaves to its connection class: cutting a byte stream into
frames, and building the three frames of a publish once so that the hot path pastes a timestamp into a
pre-encoded body instead of encoding per message.

`FrameSplitter.feed(data)` returns every complete frame in `data` plus what was buffered before, as
`(frame_type, channel, payload)`; a partial frame waits for the next feed.  The buffer is a bytearray
that is cut once per feed, so parsing a feed of n frames costs O(n), not O(n^2).
Invariant: bytes are consumed only in whole frames, and each frame must end with FRAME_END.
Left out: the protocol header the server sends on a version mismatch (the connection then closes).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from pika import frame, spec

FRAME_HEADER = struct.Struct(">BHI")
METHOD_ID = struct.Struct(">I")
CONTENT_HEADER = struct.Struct(">HHQ")
TIMESTAMP = struct.Struct(">Q")
# The body carries the publish time (ns since the epoch) in its first 8 bytes.
TIMESTAMP_BYTES = TIMESTAMP.size
FRAME_OVERHEAD_BYTES = FRAME_HEADER.size + 1
FRAME_END = spec.FRAME_END
MAX_FRAME_BYTES_ACCEPTED = 1 << 26


class FrameError(Exception):
    """The peer sent bytes that are not AMQP frames; the connection cannot continue."""


class FrameSplitter:
    """Cut a byte stream into (frame_type, channel, payload) tuples."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, int, bytes]]:
        buf = self._buffer
        buf += data
        frames = []
        offset = 0
        end = len(buf)
        unpack = FRAME_HEADER.unpack_from
        while end - offset >= FRAME_OVERHEAD_BYTES:
            frame_type, channel, size = unpack(buf, offset)
            if size > MAX_FRAME_BYTES_ACCEPTED:
                raise FrameError(f"frame of {size} bytes")
            stop = offset + 7 + size
            if stop >= end:
                break
            if buf[stop] != FRAME_END:
                raise FrameError("invalid FRAME_END marker")
            frames.append((frame_type, channel, bytes(buf[offset + 7:stop])))
            offset = stop + 1
        if offset:
            del buf[:offset]
        return frames


def decode_method(payload: bytes) -> spec.amqp_object.Method:
    """Decode a method frame's payload with pika.spec."""
    method = spec.methods[METHOD_ID.unpack_from(payload)[0]]()
    method.decode(payload, 4)
    return method


def body_size(payload: bytes) -> int:
    """The body size a content header frame announces."""
    return CONTENT_HEADER.unpack_from(payload)[2]


def encode_method(channel: int, method: spec.amqp_object.Method) -> bytes:
    return frame.Method(channel, method).marshal()


def encode_heartbeat() -> bytes:
    return frame.Heartbeat().marshal()


@dataclass(frozen=True)
class PublishTemplate:
    """The frames of one publish, encoded once; `frames(ts_ns)` stamps the body.

    `head` is basic.publish + content header + the first body frame's header; the timestamp (when the
    body has room for one) follows, then `tail`: the rest of the first body frame, its FRAME_END and
    any further body frames.
    """

    head: bytes
    tail: bytes
    stamped: bool

    def frames(self, ts_ns: int) -> bytes:
        if self.stamped:
            return self.head + TIMESTAMP.pack(ts_ns) + self.tail
        return self.head + self.tail


def publish_template(channel: int, exchange: str, routing_key: str, size: int, frame_max: int,
                     persistent: bool, mandatory: bool) -> PublishTemplate:
    """Encode basic.publish, its header and a `size`-byte body split to fit `frame_max`."""
    method = encode_method(channel, spec.Basic.Publish(exchange=exchange, routing_key=routing_key,
                                                       mandatory=mandatory))
    props = spec.BasicProperties(delivery_mode=2 if persistent else 1)
    header = frame.Header(channel, size, props).marshal()
    body = bytes(size)
    chunk = frame_max - FRAME_OVERHEAD_BYTES
    bodies = b"".join(frame.Body(channel, body[i:i + chunk]).marshal()
                      for i in range(0, size, chunk))
    stamped = size >= TIMESTAMP_BYTES
    if not stamped:
        return PublishTemplate(method + header, bodies, False)
    first_payload_at = FRAME_HEADER.size
    head = method + header + bodies[:first_payload_at]
    tail = bodies[first_payload_at + TIMESTAMP_BYTES:]
    return PublishTemplate(head, tail, True)


def body_timestamp(payload: bytes) -> int:
    """The publish time a producer put in the first body frame's payload."""
    return TIMESTAMP.unpack_from(payload)[0]
