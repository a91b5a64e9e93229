"""Building AMQP 0-9-1 frames (the send side, sans-IO).

Theory of operation: a frame is type (octet), channel (short), payload size (long), payload, and
the frame-end octet 0xCE - 8 octets of overhead. A command with content is one method frame, one
content header frame and zero or more body frames, none longer than the negotiated frame_max. The
broker never re-encodes a message: the header payload it forwards is the one the publisher sent,
and the body goes out as slices of the bytes that came in. `content_frames` therefore returns a list
of pieces (small framing bytes interleaved with untouched payload) for `writelines`.
"""
from __future__ import annotations

import struct

from wire.methods import Method

FRAME_METHOD = 1
FRAME_HEADER = 2
FRAME_BODY = 3
FRAME_HEARTBEAT = 8
FRAME_END = 0xCE
FRAME_END_BYTES = b"\xce"
FRAME_OVERHEAD = 8
PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
HEARTBEAT_FRAME = b"\x08\x00\x00\x00\x00\x00\x00\xce"

_METHOD_PREFIX = struct.Struct(">BHIHH")
_FRAME_PREFIX = struct.Struct(">BHI")


def method_frame(channel: int, method: Method) -> bytes:
    """One method frame carrying `method` on `channel`."""
    args = method.encode()
    return (_METHOD_PREFIX.pack(FRAME_METHOD, channel, len(args) + 4, method.CLASS_ID,
                                method.METHOD_ID) + args + FRAME_END_BYTES)


def header_frame(channel: int, header_payload: bytes) -> bytes:
    """A content header frame around an already-encoded header payload."""
    prefix = _FRAME_PREFIX.pack(FRAME_HEADER, channel, len(header_payload))
    return prefix + header_payload + FRAME_END_BYTES


def body_frame(channel: int, payload: bytes) -> bytes:
    """One content body frame."""
    return _FRAME_PREFIX.pack(FRAME_BODY, channel, len(payload)) + payload + FRAME_END_BYTES


def content_frames(channel: int, method: Method, header_payload: bytes, body: bytes,
                   frame_max: int) -> list[bytes | memoryview]:
    """Method frame, header frame and body frames for one content command, as writable pieces.

    Body frames carry at most frame_max - 8 octets; frame_max 0 means no limit was negotiated.
    An empty body sends no body frame. Body slices are memoryviews of `body` (no copy).
    """
    pieces: list[bytes | memoryview] = [method_frame(channel, method) + _FRAME_PREFIX.pack(
        FRAME_HEADER, channel, len(header_payload)), header_payload]
    size = len(body)
    if size == 0:
        pieces.append(FRAME_END_BYTES)
        return pieces
    chunk = frame_max - FRAME_OVERHEAD if frame_max > 0 else size
    if size <= chunk:
        pieces.append(FRAME_END_BYTES + _FRAME_PREFIX.pack(FRAME_BODY, channel, size))
        pieces.append(body)
        pieces.append(FRAME_END_BYTES)
        return pieces
    view = memoryview(body)
    trailer = FRAME_END_BYTES
    for start in range(0, size, chunk):
        piece = view[start:start + chunk]
        pieces.append(trailer + _FRAME_PREFIX.pack(FRAME_BODY, channel, len(piece)))
        pieces.append(piece)
    pieces.append(FRAME_END_BYTES)
    return pieces


def content_frames_bytes(channel: int, method: Method, header_payload: bytes, body: bytes,
                         frame_max: int) -> bytes:
    """`content_frames` joined into one bytes object (copies the body)."""
    return b"".join(content_frames(channel, method, header_payload, body, frame_max))
