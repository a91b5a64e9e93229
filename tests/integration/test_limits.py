"""Limits RabbitMQ enforces, on a real node (issue 14, 7): handshake_timeout closes a connection that
does not finish the AMQP handshake; a publish larger than max_message_size (default 128 MiB) gets
RabbitMQ's channel error 406 and text, and nothing else breaks."""
from __future__ import annotations

import socket
import time

import pika
import pytest

from tests.integration.nodes import start_node
from tests.waiting import until
from wire.frames import PROTOCOL_HEADER

pytestmark = pytest.mark.integration
HANDSHAKE_TIMEOUT_MS = 2000
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    directory = tmp_path_factory.mktemp("limits")
    conf = directory / "warren.conf"
    conf.write_text(f"handshake_timeout = {HANDSHAKE_TIMEOUT_MS}\n")
    n = start_node(directory / "data", "--config", str(conf))
    yield n
    n.stop()


def closed_after(sock: socket.socket) -> tuple[float, bytes]:
    """Seconds until the broker closes `sock`, and what it sent before."""
    start, got = time.monotonic(), b""
    sock.settimeout(30)
    try:
        while data := sock.recv(65536):
            got += data
    except ConnectionResetError:
        pass
    return time.monotonic() - start, got


def test_a_connection_that_does_not_finish_the_handshake_is_closed(node):
    opened = pika.BlockingConnection(pika.URLParameters(node.url))  # open before: never timed out
    silent = socket.create_connection(("127.0.0.1", node.port))
    header_only = socket.create_connection(("127.0.0.1", node.port))
    header_only.sendall(PROTOCOL_HEADER)
    took, got = closed_after(silent)
    assert HANDSHAKE_TIMEOUT_MS / 1000 - 0.5 <= took and got == b""
    _, got = closed_after(header_only)
    assert got.startswith(b"\x01\x00\x00")  # connection.start, and nothing after it
    until(lambda: "{handshake_timeout,frame_header}" in node.log(), "the timeout logged")
    assert "{handshake_timeout,handshake}" in node.log()
    ch = opened.channel()  # the open connection outlived the timeout
    ch.queue_declare("limits.alive")
    opened.close()


def test_a_publish_above_max_message_size_closes_its_channel_only(node):
    conn = pika.BlockingConnection(pika.URLParameters(node.url))
    try:
        ch = conn.channel()
        ch.queue_declare("limits.big")
        ch.basic_publish("", "limits.big", b"x" * (200 * MIB))
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as closed:
            ch.queue_declare("limits.big", passive=True)
        assert closed.value.args == (406, "PRECONDITION_FAILED - message size 209715200 is larger than "
                                          "configured max size 134217728")
        ch = conn.channel()
        ch.basic_publish("", "limits.big", b"small")
        until(lambda: ch.queue_declare("limits.big", passive=True).method.message_count == 1, "the small one queued")
    finally:
        conn.close()
