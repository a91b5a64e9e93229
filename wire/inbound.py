"""The receive side of one AMQP connection: bytes in, protocol events out (sans-IO, like h11).

Theory of operation: `InboundParser.receive_data(bytes)` returns the events the bytes complete, in
order. The first 8 octets of a connection are the protocol header (`ProtocolHeaderOk` or
`BadProtocolHeader`); after that the stream is frames. Method frames without content become a
`Command` at once; a content method waits, per channel, for its header frame and then for body
frames until body-size octets have arrived, and becomes one `Command` carrying the raw header
payload and the body. Channels assemble independently.

Errors are values: anything malformed yields one `ConnectionErrorEvent` with the code, text and
class/method RabbitMQ 3.10 uses (checked against it). After an error in a frame whose framing was
sound (a method whose fields do not decode, an unknown method) the parser goes on reading frames
and passes on only connection.close and connection.close-ok on channel 0, as RabbitMQ's reader
does while it closes, so the client's close-ok ends the connection at once; after any other error
it is dead and returns nothing. Deliberately mirrored RabbitMQ quirks: a frame may carry up to frame_max payload octets
(RabbitMQ's "fudge"), the error text reporting frame_max - 8; body frames that overshoot body-size
do not fail by themselves - the command never completes and the next non-body frame on that channel
is UNEXPECTED_FRAME. Content properties are not validated here (RabbitMQ decodes them later).
Left out: channel-number limits and which methods are legal on channel 0 (the connection's job).

Fast path: frames are read with one struct call each straight out of the received bytes; a body
that arrives in a single frame is that frame's slice, with no join. A frame cut by the end of one
read is completed from the next on its own, so only that frame is copied twice, never the read.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import NamedTuple

from wire.codec import DECODE_ERRORS
from wire.errors import FRAME_ERROR, NOT_IMPLEMENTED, UNEXPECTED_FRAME, AmqpError
from wire.frames import (FRAME_BODY, FRAME_END, FRAME_HEADER, FRAME_HEARTBEAT, FRAME_METHOD,
                         FRAME_OVERHEAD, PROTOCOL_HEADER, body_frame, header_frame, method_frame)
from wire import methods as m
from wire.methods import METHODS, Method

DEFAULT_FRAME_MAX = 131072
SNIPPET_OCTETS_MAX = 16  # RabbitMQ quotes at most this much of a bad frame

_FRAME_PREFIX = struct.Struct(">BHI")
_METHOD_IDS = struct.Struct(">HH")
_CONTENT_HEADER = struct.Struct(">HHQ")
_CONTENT_HEADER_SIZE = 12
# the largest method frame of a content method a client sends (basic.publish: two short strings
# of at most 255 octets, a short, a bit field, the ids and the frame's own 8 octets)
_CONTENT_METHOD_FRAME_MAX = 8 + 4 + 2 + 2 * 256 + 1


@dataclass(frozen=True, slots=True)
class ProtocolHeaderOk:
    """The client sent AMQP 0-9-1's protocol header."""


@dataclass(frozen=True, slots=True)
class BadProtocolHeader:
    """The first 8 octets were not AMQP 0-9-1's header: write PROTOCOL_HEADER and close."""

    received: bytes = b""


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """A heartbeat frame arrived."""


class Command(NamedTuple):
    """A complete method; `header` (raw header payload) and `body` are set for content methods."""

    channel: int
    method: Method
    header: bytes | None
    body: bytes | None


@dataclass(frozen=True, slots=True)
class ConnectionErrorEvent:
    """The peer broke the protocol; close the connection with `error`. Nothing follows."""

    error: AmqpError


Event = ProtocolHeaderOk | BadProtocolHeader | Heartbeat | Command | ConnectionErrorEvent


class _Content:
    """A content method being assembled on one channel."""

    __slots__ = ("method", "header", "remaining", "chunks")

    def __init__(self, method: Method) -> None:
        self.method = method
        self.header: bytes | None = None  # None while the header frame is awaited
        self.remaining = 0
        self.chunks: list[bytes] = []


class InboundParser:
    """Parses one connection's inbound byte stream into events."""

    def __init__(self, frame_max: int = DEFAULT_FRAME_MAX) -> None:
        self.frame_max = frame_max  # the shell raises it after connection.tune-ok
        self._buf = b""
        self._header_seen = False
        self._dead = False
        self._closing = False  # an error was reported: only channel 0's close and close-ok count
        self._content: dict[int, _Content] = {}

    def receive_data(self, data: bytes) -> list[Event]:
        """Events completed by `data`, in stream order."""
        if self._dead:
            return []
        buf = bytes(data)
        events: list[Event] = []
        pos = 0
        if not self._header_seen:
            buf = self._buf + buf
            if len(buf) < len(PROTOCOL_HEADER):
                self._buf = buf
                return events
            if buf[:8] != PROTOCOL_HEADER:
                self._dead = True
                self._buf = b""
                return [BadProtocolHeader(buf[:8])]
            self._header_seen = True
            events.append(ProtocolHeaderOk())
            pos = 8
        elif self._buf:
            # Finish the frame the last chunk cut short on its own, then parse the rest of `data`
            # in place: prepending the leftover to a 256 KiB read would copy all of it.
            head, pos = self._complete_leftover(buf)
            if head is None:
                return events
            done = self._frames(head, 0, events)
            if self._dead:
                self._buf = b""
                return events
            assert done == len(head), "the completed leftover is exactly one frame"
        pos = self._frames(buf, pos, events)
        self._buf = buf[pos:] if pos < len(buf) and not self._dead else b""
        return events

    def unparsed_size(self) -> int | None:
        """At least as many octets as `unparsed` would give, without making them; None while a
        content's body overshot its declared size (the connection only waits for its end now)."""
        size = len(self._buf)
        for pending in self._content.values():
            if pending.remaining < 0:
                return None
            size += (_CONTENT_METHOD_FRAME_MAX + 8 + len(pending.header or b"")
                     + sum(len(c) + 8 for c in pending.chunks))
        return size

    def unparsed(self) -> bytes:
        """What was read and has not become an event yet, as frames another parser takes from
        here (`resume`): the frames of every content command part-way in, channel by channel (each
        channel's frames in their order), then the frame the last read cut short (the newest)."""
        out = []
        for channel, pending in self._content.items():
            out.append(method_frame(channel, pending.method))
            if pending.header is not None:
                out.append(header_frame(channel, pending.header))
                out += [body_frame(channel, chunk) for chunk in pending.chunks]
        out.append(self._buf)
        return b"".join(out)

    def resume(self) -> None:
        """Parse a connection whose protocol header another parser read, from a frame boundary."""
        self._header_seen = True

    def content_pending(self) -> bool:
        """Whether some channel's content is part-way in (its header frame arrived, not all its body)."""
        return any(pending.header is not None for pending in self._content.values())

    def _complete_leftover(self, data: bytes) -> tuple[bytes | None, int]:
        """(the leftover's frame completed from `data`, octets of `data` it took), or (None, all
        of it) when `data` does not complete that frame (the leftover grows)."""
        buf = self._buf
        used = 0
        if len(buf) < _FRAME_PREFIX.size:
            used = min(_FRAME_PREFIX.size - len(buf), len(data))
            buf += data[:used]
            if len(buf) < _FRAME_PREFIX.size:
                self._buf = buf
                return None, used
        size = _FRAME_PREFIX.unpack_from(buf)[2]
        if size > self.frame_max > 0:
            return buf, used  # too large: `_frames` reports it from the prefix alone
        missing = _FRAME_PREFIX.size + size + 1 - len(buf)
        if missing > len(data) - used:
            self._buf = buf + data[used:]
            return None, len(data)
        self._buf = b""
        return buf + data[used:used + missing], used + missing

    def _frames(self, buf: bytes, pos: int, events: list[Event]) -> int:
        """Parse whole frames from `pos`; return where the unparsed rest starts."""
        size_max = self.frame_max
        unpack_prefix = _FRAME_PREFIX.unpack_from
        content = self._content
        n = len(buf)
        while n - pos >= 7:
            ftype, channel, size = unpack_prefix(buf, pos)
            if size > size_max > 0:
                return self._fail(events, FRAME_ERROR, f"type {ftype}, all octets = <<>>: "
                                  f"{{frame_too_large,{size},{size_max - FRAME_OVERHEAD}}}")
            start = pos + 7
            end = start + size
            if end >= n:
                break
            if buf[end] != FRAME_END:
                return self._fail(events, FRAME_ERROR, f"type {ftype}, {_snippet(buf[start:end])}: "
                                  f"{{invalid_frame_end_marker,{buf[end]}}}")
            pos = end + 1
            if self._closing:
                self._closing_frame(events, ftype, channel, buf[start:end])
                continue
            if ftype == FRAME_METHOD:
                if size < 4:
                    return self._unknown_frame(events, ftype, buf[start:end])
                cls = METHODS.get(_METHOD_IDS.unpack_from(buf, start))
                if cls is None:
                    class_id, method_id = _METHOD_IDS.unpack_from(buf, start)
                    self._close_after(events, AmqpError(NOT_IMPLEMENTED, f"unknown method {{{class_id},{method_id}}}"))
                    continue
                pending = content.get(channel)
                if pending is not None:
                    return self._unexpected(events, pending)
                args = buf[start + 4:end]
                try:
                    method = cls.decode(args)
                except DECODE_ERRORS:
                    self._close_after(events, AmqpError(FRAME_ERROR, f"cannot decode {_erlang_w(args)}",
                                                        cls.CLASS_ID, cls.METHOD_ID))
                    continue
                if cls.HAS_CONTENT:
                    content[channel] = _Content(method)
                else:
                    events.append(Command(channel, method, None, None))
            elif ftype == FRAME_BODY and channel:
                pending = content.get(channel)
                if pending is None or pending.header is None:
                    return self._unexpected(events, pending)
                if pending.remaining <= 0:
                    continue  # overshot body-size: RabbitMQ keeps waiting, so do we
                pending.remaining -= size
                pending.chunks.append(buf[start:end])
                if pending.remaining == 0:
                    del content[channel]
                    chunks = pending.chunks
                    body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
                    events.append(Command(channel, pending.method, pending.header, body))
                elif pending.remaining < 0:
                    pending.chunks = []
            elif ftype == FRAME_HEADER and channel:
                if size < _CONTENT_HEADER_SIZE:
                    return self._unknown_frame(events, ftype, buf[start:end])
                pending = content.get(channel)
                if pending is None or pending.header is not None:
                    return self._unexpected(events, pending)
                class_id, weight, body_size = _CONTENT_HEADER.unpack_from(buf, start)
                method = pending.method
                if weight != 0 or class_id != method.CLASS_ID:
                    got = "non content header frame" if weight else f"one for class {class_id}"
                    return self._fail(events, UNEXPECTED_FRAME,
                                      f"expected content header for class {method.CLASS_ID}, "
                                      f"got {got} instead", method.CLASS_ID, method.METHOD_ID)
                header = buf[start:end]
                if body_size == 0:
                    del content[channel]
                    events.append(Command(channel, method, header, b""))
                else:
                    pending.header = header
                    pending.remaining = body_size
            elif ftype == FRAME_HEARTBEAT:
                if size:
                    return self._unknown_frame(events, ftype, buf[start:end])
                if channel:
                    return self._fail(events, UNEXPECTED_FRAME, f"type {ftype}, all octets = <<>>")
                events.append(Heartbeat())
            elif ftype in (FRAME_HEADER, FRAME_BODY):  # content frames on channel 0
                if ftype == FRAME_HEADER and size < _CONTENT_HEADER_SIZE:
                    return self._unknown_frame(events, ftype, buf[start:end])
                return self._fail(events, UNEXPECTED_FRAME,
                                  f"type {ftype}, {_snippet(buf[start:end])}")
            else:
                return self._unknown_frame(events, ftype, buf[start:end])
        return pos

    def _fail(self, events: list[Event], code: int, detail: str, class_id: int = 0,
              method_id: int = 0) -> int:
        self._dead = True
        self._content.clear()
        if not self._closing:  # one error per connection: a later one ends the reading quietly
            events.append(ConnectionErrorEvent(AmqpError(code, detail, class_id, method_id)))
        return 0

    def _close_after(self, events: list[Event], error: AmqpError) -> None:
        """Report `error`, then read on for the client's close-ok (the frames are still sound)."""
        self._closing = True
        self._content.clear()
        events.append(ConnectionErrorEvent(error))

    def _closing_frame(self, events: list[Event], ftype: int, channel: int, payload: bytes) -> None:
        if ftype != FRAME_METHOD or channel or len(payload) < 4:
            return
        cls = METHODS.get(_METHOD_IDS.unpack_from(payload, 0))
        if cls is m.ConnectionClose or cls is m.ConnectionCloseOk:
            try:
                events.append(Command(0, cls.decode(payload[4:]), None, None))
            except DECODE_ERRORS:
                pass

    def _unknown_frame(self, events: list[Event], ftype: int, payload: bytes) -> int:
        return self._fail(events, FRAME_ERROR, f"type {ftype}, {_snippet(payload)}: unknown_frame")

    def _unexpected(self, events: list[Event], pending: _Content | None) -> int:
        """A frame of the wrong kind for the channel's assembly state (RabbitMQ's texts)."""
        if pending is None:
            return self._fail(events, UNEXPECTED_FRAME,
                              "expected method frame, got non method frame instead")
        method = pending.method
        if pending.header is None:
            detail = (f"expected content header for class {method.CLASS_ID}, "
                      "got non content header frame instead")
        else:
            detail = "expected content body, got non content body frame instead"
        return self._fail(events, UNEXPECTED_FRAME, detail, method.CLASS_ID, method.METHOD_ID)


# ---- RabbitMQ's renderings of binaries in error texts --------------------------------------------

_ESCAPES = {0x22: '\\"', 0x5C: "\\\\", 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t", 0x0B: "\\v",
            0x08: "\\b", 0x0C: "\\f", 0x1B: "\\e"}


def _snippet(payload: bytes) -> str:
    """RabbitMQ's payload_snippet: "all octets = ~p" or "first 16 octets = ~p"."""
    if len(payload) <= SNIPPET_OCTETS_MAX:
        return f"all octets = {_erlang_p(payload)}"
    return f"first {SNIPPET_OCTETS_MAX} octets = {_erlang_p(payload[:SNIPPET_OCTETS_MAX])}"


def _erlang_w(data: bytes) -> str:
    """Erlang's ~w of a binary: <<1,2,3>>."""
    return "<<" + ",".join(map(str, data)) + ">>"


def _erlang_p(data: bytes) -> str:
    """Erlang's ~p of a binary (default +pc latin1): a quoted string when every octet is printable
    latin1, else ~w. Octets 160-255 map to surrogate escapes so the reply text's shortstr carries
    the same raw octet RabbitMQ sends. Erlang's 80-column line wrapping is not reproduced."""
    if not data:
        return "<<>>"
    chars = []
    for octet in data:
        if octet in _ESCAPES:
            chars.append(_ESCAPES[octet])
        elif 32 <= octet <= 126:
            chars.append(chr(octet))
        elif octet >= 160:
            chars.append(chr(0xDC00 + octet))
        else:
            return _erlang_w(data)
    return '<<"' + "".join(chars) + '">>'
