"""Frame building: method frames, and content split at frame_max boundaries."""
from __future__ import annotations

import struct

import pytest

from wire.frames import (FRAME_OVERHEAD, HEARTBEAT_FRAME, PROTOCOL_HEADER, content_frames,
                         content_frames_bytes, header_frame, method_frame)
from wire.methods import BasicAck, BasicDeliver
from wire.properties import BasicProperties, encode_content_header

DELIVER = BasicDeliver("c", 1, False, "", "q")
HEADER = encode_content_header(60, 0, BasicProperties(delivery_mode=2))


def _split(stream: bytes) -> list[tuple[int, int, bytes]]:
    frames, pos = [], 0
    while pos < len(stream):
        ftype, channel, size = struct.unpack_from(">BHI", stream, pos)
        assert stream[pos + 7 + size] == 0xCE
        frames.append((ftype, channel, stream[pos + 7:pos + 7 + size]))
        pos += 8 + size
    return frames


def test_constants():
    assert PROTOCOL_HEADER == b"AMQP\x00\x00\x09\x01"
    assert _split(HEARTBEAT_FRAME) == [(8, 0, b"")]


def test_method_frame():
    assert method_frame(3, BasicAck(delivery_tag=1)) == (
        b"\x01\x00\x03\x00\x00\x00\x0d\x00\x3c\x00\x50" + (1).to_bytes(8, "big") + b"\x00\xce")


def test_header_frame():
    assert _split(header_frame(2, HEADER)) == [(2, 2, HEADER)]


@pytest.mark.parametrize("frame_max, body_size, chunks", [
    (4096, 0, []),
    (4096, 1, [1]),
    (4096, 4088, [4088]),  # exactly one full frame
    (4096, 4089, [4088, 1]),
    (4096, 3 * 4088, [4088] * 3),
    (4096, 3 * 4088 + 5, [4088] * 3 + [5]),
    (0, 100000, [100000]),  # no limit negotiated
])
def test_content_split(frame_max, body_size, chunks):
    body = bytes(range(256)) * (body_size // 256) + bytes(body_size % 256)
    stream = content_frames_bytes(7, DELIVER, HEADER, body, frame_max)
    frames = _split(stream)
    assert frames[0] == (1, 7, b"\x00\x3c\x00\x3c" + DELIVER.encode())
    assert frames[1] == (2, 7, HEADER)
    assert [len(p) for _, _, p in frames[2:]] == chunks
    assert all(t == 3 and c == 7 for t, c, _ in frames[2:])
    assert b"".join(p for _, _, p in frames[2:]) == body
    assert all(len(p) + FRAME_OVERHEAD <= frame_max for _, _, p in frames if frame_max)


def test_content_frames_keep_header_and_body_objects():
    body = b"x" * 10000
    pieces = content_frames(1, DELIVER, HEADER, body, 4096)
    assert any(p is HEADER for p in pieces)  # the original header payload, not a re-encoding
    views = [p for p in pieces if isinstance(p, memoryview)]
    assert views and all(v.obj is body for v in views)  # body slices without copying
    small = b"small"
    assert any(p is small for p in content_frames(1, DELIVER, HEADER, small, 4096))
