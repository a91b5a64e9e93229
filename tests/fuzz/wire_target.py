"""The in-process fuzz target: the AMQP frame parser, the method decoders and the content-header
properties, checked against their contracts on any input.

`check(data)`: the first octet picks frame_max (4096, 131072 or none) and how the stream is cut into
reads; the rest follows the protocol header. Whatever the octets:
- the parser returns events only, never raises; ProtocolHeaderOk first; at most one error, last;
- the events do not depend on how the stream is cut into reads;
- an error's code is FRAME_ERROR, UNEXPECTED_FRAME or NOT_IMPLEMENTED with RabbitMQ's text, which
  fits the shortstr of a connection.close (so the reader can always say it);
- every method decoded re-encodes, and decoding that gives the same method (a canonical round trip);
- a content command's header either decodes into properties that re-encode to a header that decodes
  the same, or fails with one of the codec's DECODE_ERRORS, which the channel turns into an error.
Used by the atheris campaign (tests/fuzz/wire_fuzz.py), the corpus replay and Hypothesis.
"""
from __future__ import annotations

from wire.codec import DECODE_ERRORS
from wire.errors import FRAME_ERROR, NOT_IMPLEMENTED, UNEXPECTED_FRAME
from wire.frames import PROTOCOL_HEADER
from wire.inbound import BadProtocolHeader, Command, ConnectionErrorEvent, Heartbeat, InboundParser, ProtocolHeaderOk
from wire.methods import ConnectionClose
from wire.properties import HEADER_PROPS_OFFSET, BasicProperties, encode_content_header, parse_content_header

FRAME_MAXES = (131072, 4096, 0)
PARSER_CODES = {FRAME_ERROR, UNEXPECTED_FRAME, NOT_IMPLEMENTED}


def check(data: bytes) -> None:
    mode = data[0] if data else 0
    frame_max = FRAME_MAXES[mode % len(FRAME_MAXES)]
    stream = PROTOCOL_HEADER + data[1:]
    whole = InboundParser(frame_max).receive_data(stream)
    assert whole[0] == ProtocolHeaderOk(), whole[:1]
    step = mode // len(FRAME_MAXES) + 1  # reads of 1 to 86 octets
    parser = InboundParser(frame_max)
    pieces = [e for at in range(0, len(stream), step) for e in parser.receive_data(stream[at:at + step])]
    assert pieces == whole, "the events depend on how the stream was cut into reads"
    for i, event in enumerate(whole[1:], 1):
        if isinstance(event, ConnectionErrorEvent):
            assert i == len(whole) - 1, "an event after an error"
            _check_error(event)
        elif isinstance(event, Command):
            _check_command(event)
        else:
            assert isinstance(event, Heartbeat), event
            assert not isinstance(event, BadProtocolHeader)


def _check_error(event: ConnectionErrorEvent) -> None:
    error = event.error
    assert error.code in PARSER_CODES, error
    ConnectionClose(reply_code=error.code, reply_text=error.text, class_id=error.class_id,
                    method_id=error.method_id).encode()  # a shortstr: at most 255 octets


def _check_command(command: Command) -> None:
    method = command.method
    again = type(method).decode(method.encode())
    assert again == method, (method, again)
    if command.header is None:
        return
    assert method.HAS_CONTENT
    class_id, body_size, _ = parse_content_header(command.header)
    assert class_id == method.CLASS_ID and body_size == len(command.body)
    try:
        props = BasicProperties.decode(command.header, HEADER_PROPS_OFFSET)
    except DECODE_ERRORS:
        return  # the channel answers RabbitMQ's error for it
    header = encode_content_header(class_id, body_size, props)
    assert BasicProperties.decode(header, HEADER_PROPS_OFFSET) == props
