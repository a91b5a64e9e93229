"""What travels with a connection that moves (actors/reader/handover.py): the record and the bytes
of the commands the old host read and did not act on."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from actors.channel.handover import ChannelHandover
from actors.reader.handover import MovedConnection, encodable, encode_again
from wire import methods as m
from wire.inbound import ConnectionErrorEvent, Heartbeat, InboundParser
from wire.errors import AmqpError

from tests.channel.helpers import cmd, publish


def test_the_record_survives_the_trip():
    moved = MovedConnection("n1@vm:conn1:5d1.3", "guest", "/v", 131072, 2047, 60,
                            {"product": "pika", "capabilities": {"connection.blocked": True, "basic.nack": True}},
                            1_700_000_000_000, (ChannelHandover(1, 300, 0, 42, 7), ChannelHandover(5, 0, 10, 0, 0)),
                            b"\x01\x00\x01partial")
    assert MovedConnection.unpack(moved.pack()) == moved


@given(bodies=st.lists(st.binary(max_size=20_000), max_size=4), frame_max=st.sampled_from([4096, 131072]))
def test_commands_encoded_again_parse_back_to_the_same_commands(bodies, frame_max):
    commands = [cmd(m.BasicConsume(queue="q", consumer_tag="c")),
                *(publish(body=b) for b in bodies), cmd(m.BasicQos(prefetch_count=3))]
    parser = InboundParser(frame_max)
    parser.resume()
    assert parser.receive_data(encode_again([*commands, Heartbeat()], frame_max)) == commands
    assert parser.unparsed_size() == 0 and parser.unparsed() == b""


def test_a_parse_error_cannot_travel():
    assert encodable([cmd(m.BasicQos(prefetch_count=1)), Heartbeat()])
    assert not encodable([cmd(m.BasicQos(prefetch_count=1)), ConnectionErrorEvent(AmqpError(501, "x"))])


@given(cut=st.integers(min_value=0), frame_max=st.sampled_from([4096, 131072]))
def test_what_a_parser_holds_part_way_in_is_taken_up_by_another(cut, frame_max):
    commands = [publish(exchange="x" * 255, routing_key="k" * 255, body=b"a" * 9000),
                cmd(m.BasicQos(prefetch_count=2), number=2),
                publish(body=b"b" * 10, number=2), publish(body=b"c" * 5000)]
    stream = encode_again(commands, frame_max)
    cut %= len(stream) + 1
    first = InboundParser(frame_max)
    first.resume()
    events = first.receive_data(stream[:cut])
    assert first.unparsed_size() >= len(first.unparsed())
    second = InboundParser(frame_max)
    second.resume()
    assert events + second.receive_data(first.unparsed() + stream[cut:]) == commands
