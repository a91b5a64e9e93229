"""Connections against a real node: protocol header, login, tuning, heartbeats, error isolation."""
from __future__ import annotations

import socket

import pika
import pika.exceptions as px
import pytest

from tests.integration.nodes import start_node
from wire import methods as m
from wire.frames import PROTOCOL_HEADER, method_frame
from wire.inbound import Heartbeat, InboundParser

pytestmark = pytest.mark.integration
read_timeout_s = 10.0


def read_events(sock: socket.socket, parser: InboundParser, want: int) -> list:
    events: list = []
    while len(events) < want:
        data = sock.recv(65536)
        if not data:
            break
        events += parser.receive_data(data)
    return events


def handshake(port: int, heartbeat: int) -> tuple[socket.socket, InboundParser]:
    s = socket.create_connection(("127.0.0.1", port), timeout=read_timeout_s)
    s.sendall(PROTOCOL_HEADER)
    p = InboundParser()
    p.receive_data(PROTOCOL_HEADER)  # the parser expects a header first; the server sends none
    start = read_events(s, p, 1)[0]
    assert isinstance(start.method, m.ConnectionStart)
    s.sendall(method_frame(0, m.ConnectionStartOk(client_properties={}, mechanism="PLAIN",
                                                  response=b"\0guest\0guest", locale="en_US")))
    tune = read_events(s, p, 1)[0].method
    assert (tune.channel_max, tune.frame_max, tune.heartbeat) == (2047, 131072, 60)
    s.sendall(method_frame(0, m.ConnectionTuneOk(channel_max=2047, frame_max=131072, heartbeat=heartbeat)))
    s.sendall(method_frame(0, m.ConnectionOpen(virtual_host="/")))
    assert isinstance(read_events(s, p, 1)[0].method, m.ConnectionOpenOk)
    return s, p


def test_server_properties_announce_rabbitmq_capabilities(conn):
    caps = conn._impl.server_properties["capabilities"]
    for cap in ("publisher_confirms", "basic.nack", "consumer_cancel_notify", "exchange_exchange_bindings",
                "connection.blocked", "authentication_failure_close", "per_consumer_qos"):
        assert caps[cap] is True


def test_wrong_protocol_header_gets_ours_back_then_close(node):
    with socket.create_connection(("127.0.0.1", node.port), timeout=read_timeout_s) as s:
        s.sendall(b"AMQP\x00\x00\x08\x00")
        data = b""
        while True:
            chunk = s.recv(64)
            if not chunk:
                break
            data += chunk
    assert data == PROTOCOL_HEADER


def test_bad_password_is_refused_with_403(node):
    params = pika.URLParameters(f"amqp://guest:wrong@127.0.0.1:{node.port}/%2F")
    with pytest.raises(px.ProbableAuthenticationError) as e:
        pika.BlockingConnection(params)
    assert "403" in str(e.value) and "ACCESS_REFUSED" in str(e.value)


def test_unknown_vhost_is_530(node):
    with pytest.raises(px.ProbableAccessDeniedError) as e:
        pika.BlockingConnection(pika.URLParameters(f"amqp://guest:guest@127.0.0.1:{node.port}/nope"))
    assert "(530) 'NOT_ALLOWED - vhost nope not found'" in str(e.value)


def test_heartbeats_are_sent_and_a_silent_client_is_dropped(node):
    s, p = handshake(node.port, heartbeat=1)
    with s:
        events = []
        while True:  # the server sends heartbeats, then closes after two silent intervals
            data = s.recv(65536)
            if not data:
                break
            events += p.receive_data(data)
    assert any(isinstance(e, Heartbeat) for e in events)


def test_channel_error_leaves_connection_and_others_alone(node):
    a = pika.BlockingConnection(pika.URLParameters(node.url))
    b = pika.BlockingConnection(pika.URLParameters(node.url))
    try:
        bad, good = a.channel(), a.channel()
        bad.basic_ack(99)
        with pytest.raises(px.ChannelClosedByBroker):
            bad.queue_declare("x-" + str(id(bad)))
        assert good.queue_declare("", exclusive=True).method.queue
        assert b.channel().queue_declare("", exclusive=True).method.queue
    finally:
        for c in (a, b):
            if c.is_open:
                c.close()


def test_connection_error_closes_only_that_connection(node):
    a = pika.BlockingConnection(pika.URLParameters(node.url))
    b = pika.BlockingConnection(pika.URLParameters(node.url))
    try:
        with pytest.raises(px.ConnectionClosedByBroker) as e:
            a.channel().basic_qos(prefetch_size=10)
        assert (e.value.reply_code, e.value.reply_text) == (540, "NOT_IMPLEMENTED - prefetch_size!=0 (10)")
        assert b.channel().queue_declare("", exclusive=True).method.queue
    finally:
        if b.is_open:
            b.close()


def server_closed(sock: socket.socket) -> bool:
    """The server closed its end: a read gives EOF (or a reset) before the socket's timeout."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_the_socket_closes_after_a_client_close_and_close_ok(node):
    s, p = handshake(node.port, heartbeat=0)
    with s:
        s.sendall(method_frame(0, m.ConnectionClose(reply_code=200, reply_text="bye", class_id=0, method_id=0)))
        assert isinstance(read_events(s, p, 1)[0].method, m.ConnectionCloseOk)
        assert server_closed(s)


def test_the_socket_closes_after_a_server_close_and_the_clients_close_ok(node):
    s, p = handshake(node.port, heartbeat=0)
    with s:
        s.sendall(method_frame(1, m.ChannelOpen()))
        read_events(s, p, 1)
        s.sendall(method_frame(1, m.BasicQos(prefetch_size=5)))
        assert read_events(s, p, 1)[0].method.reply_code == 540
        s.sendall(method_frame(0, m.ConnectionCloseOk()))
        assert server_closed(s)


def test_method_on_unopened_channel_is_504(node):
    s, p = handshake(node.port, heartbeat=0)
    with s:
        s.sendall(method_frame(3, m.BasicQos(prefetch_count=1)))
        close = read_events(s, p, 1)[0].method
    assert (close.reply_code, close.reply_text) == (504, "CHANNEL_ERROR - expected 'channel.open'")


def test_amqplain_login(node):
    from wire.codec import encode_table
    s = socket.create_connection(("127.0.0.1", node.port), timeout=read_timeout_s)
    with s:
        s.sendall(PROTOCOL_HEADER)
        p = InboundParser()
        p.receive_data(PROTOCOL_HEADER)
        read_events(s, p, 1)
        table = encode_table({"LOGIN": "guest", "PASSWORD": "guest"})[4:]
        s.sendall(method_frame(0, m.ConnectionStartOk(client_properties={}, mechanism="AMQPLAIN",
                                                      response=table, locale="en_US")))
        assert isinstance(read_events(s, p, 1)[0].method, m.ConnectionTune)


def test_a_second_node_on_a_port_in_use_refuses_to_start(node, tmp_path) -> None:
    # the connection hosts listen with SO_REUSEPORT: without the check, the second node would share
    # the first one's port and take half of its connections
    try:
        second = start_node(tmp_path / "second", port=node.port)
    except RuntimeError as e:
        assert "cannot listen on 127.0.0.1:%d: address in use" % node.port in str(e)
    else:
        second.stop()
        pytest.fail("a second node started on a port in use")
    with pika.BlockingConnection(pika.URLParameters(node.url)) as conn:
        assert conn.is_open
