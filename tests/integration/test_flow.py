"""Credit flow end to end: a publisher into a queue that stops taking messages ends in TCP
back-pressure (the reader stops reading the socket), not in memory growing inside the broker; and
when the queue resumes every accepted message arrives."""
from __future__ import annotations

import os
import select
import signal
import socket

import pika
import pytest

from actors.runtime.client import control
from tests.integration.nodes import start_node
from wire import methods as m
from wire.frames import PROTOCOL_HEADER, content_frames_bytes, method_frame
from wire.inbound import InboundParser
from wire.properties import BasicProperties, encode_content_header

pytestmark = pytest.mark.integration
stalled_after_s = 3.0      # the socket counts as stalled when it stays unwritable this long
attempts_max = 400_000     # 400 MB of publishes: far beyond any buffer if flow control were missing
body_bytes = 1024


def raw_publisher(port: int, queue: str) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    p = InboundParser()
    p.receive_data(PROTOCOL_HEADER)

    def expect(cls):
        while True:
            events = p.receive_data(s.recv(65536))
            if events:
                assert isinstance(events[0].method, cls), events
                return
    s.sendall(PROTOCOL_HEADER)
    expect(m.ConnectionStart)
    s.sendall(method_frame(0, m.ConnectionStartOk(client_properties={}, mechanism="PLAIN",
                                                  response=b"\0guest\0guest", locale="en_US")))
    expect(m.ConnectionTune)
    s.sendall(method_frame(0, m.ConnectionTuneOk(channel_max=2047, frame_max=131072, heartbeat=0)))
    s.sendall(method_frame(0, m.ConnectionOpen(virtual_host="/")))
    expect(m.ConnectionOpenOk)
    s.sendall(method_frame(1, m.ChannelOpen()))
    expect(m.ChannelOpenOk)
    return s


def test_stopped_queue_pushes_back_to_the_publisher_socket(tmp_path):
    node = start_node(tmp_path / "flow")
    admin = int((node.data_dir / "admin_port").read_text())
    queue_pid = control(admin, "queue0", "pid", {})
    try:
        c = pika.BlockingConnection(pika.URLParameters(node.url))
        c.channel().queue_declare("flow-q")
        pub = raw_publisher(node.port, "flow-q")
        header = encode_content_header(60, body_bytes, BasicProperties())
        one = content_frames_bytes(1, m.BasicPublish(exchange="", routing_key="flow-q"), header,
                                   b"x" * body_bytes, 131072)
        burst = one * 64
        os.kill(queue_pid, signal.SIGSTOP)
        pub.setblocking(False)
        sent_bytes = 0
        while sent_bytes < attempts_max * len(one):
            try:
                sent_bytes += pub.send(burst[sent_bytes % len(burst):])
            except BlockingIOError:
                _, writable, _ = select.select([], [pub], [], stalled_after_s)
                if not writable:
                    break
        accepted = sent_bytes // len(one)
        assert accepted < attempts_max, "the broker kept reading: no back-pressure"
        states = [conn["state"] for host in ("conn0", "conn1")
                  for conn in control(admin, host, "list_connections", {})]
        assert "flow" in states
        # let the queue run again, then finish the last partial message
        os.kill(queue_pid, signal.SIGCONT)
        pub.setblocking(True)
        pub.sendall(burst[sent_bytes % len(burst):][:(-sent_bytes) % len(one)])
        expected = -(-sent_bytes // len(one))
        ch = c.channel()
        for _ in range(600):  # poll the count with a deadline; the queue drains the backlog
            if ch.queue_declare("flow-q", passive=True).method.message_count == expected:
                break
            c.process_data_events(0.1)
        assert ch.queue_declare("flow-q", passive=True).method.message_count == expected
        pub.close()
        c.close()
    finally:
        try:
            os.kill(queue_pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
        node.stop()
