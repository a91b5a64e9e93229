"""The pure parts of bench.wire_latency: TCP payloads off lo's frames, messages off AMQP streams."""

import struct

from pika import frame, spec

from bench.perf import framing
from bench.wire_latency import BASIC_DELIVER, BASIC_PUBLISH, MessageStream, tcp_payload


def publishes(*stamps: int) -> bytes:
    template = framing.publish_template(1, "", "q", 1024, 131072, True, False)
    return b"".join(template.frames(ts) for ts in stamps)


def deliver(ts: int, tag: int) -> bytes:
    method = framing.encode_method(1, spec.Basic.Deliver(consumer_tag="c", delivery_tag=tag, exchange="",
                                                              routing_key="q"))
    header = frame.Header(1, 16, spec.BasicProperties()).marshal()
    return method + header + frame.Body(1, struct.pack(">Q", ts) + bytes(8)).marshal()


def test_a_segment_s_payload_and_ports_come_out_of_lo_s_frame() -> None:
    payload = b"hello"
    tcp = struct.pack(">HHIIBBHHH", 40000, 5672, 1, 0, 5 << 4, 0x18, 65535, 0, 0)
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(payload), 0, 0, 64, 6, 0,
                     bytes([127, 0, 0, 1]), bytes([127, 0, 0, 1]))
    ethernet = bytes(12) + b"\x08\x00"
    assert tcp_payload(ethernet + ip + tcp + payload + bytes(6)) == (40000, 5672, payload)  # padding cut
    assert tcp_payload(bytes(12) + b"\x86\xdd" + bytes(60)) is None  # IPv6: not ours


def test_publishes_give_their_body_stamps_across_segment_boundaries() -> None:
    stream = MessageStream(BASIC_PUBLISH)
    data = publishes(11, 12, 12)
    cut = len(data) // 2 + 3  # the middle message split between two segments
    assert stream.feed(b"AMQP\x00\x00\x09\x01") == []  # the protocol header is skipped
    assert stream.feed(data[:cut]) == [11]
    assert stream.feed(data[cut:]) == [12, 12]


def test_only_the_wanted_method_counts() -> None:
    deliveries = MessageStream(BASIC_DELIVER)
    assert deliveries.feed(deliver(7, 1) + deliver(8, 2)) == [7, 8]
    assert MessageStream(BASIC_DELIVER).feed(publishes(9)) == []


def test_a_lost_segment_costs_the_messages_it_cut_not_the_stream() -> None:
    stream = MessageStream(BASIC_PUBLISH)
    data = publishes(1)
    assert stream.feed(data[:100]) == []
    assert stream.feed(b"\x00garbage" * 200) == []  # not frames: the stream starts again
    assert stream.feed(publishes(2)) == [2]
