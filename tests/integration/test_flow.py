"""Credit flow end to end: a publisher into a queue that stops taking messages ends in TCP
back-pressure (the reader stops reading the socket), not in memory growing inside the broker; and
when the queue resumes every accepted message arrives."""
from __future__ import annotations

import os
import select
import signal

import pika
import pytest

from actors.runtime.client import control
from tests.integration.nodes import start_node_with_queue_host
from tests.integration.raw_client import RawClient

pytestmark = pytest.mark.integration
stalled_after_s = 3.0      # the socket counts as stalled when it stays unwritable this long
attempts_max = 400_000     # 400 MB of publishes: far beyond any buffer if flow control were missing
body_bytes = 1024


def test_stopped_queue_pushes_back_to_the_publisher_socket(tmp_path):
    node = start_node_with_queue_host(tmp_path / "flow")
    admin = int((node.data_dir / "admin_port").read_text())
    queue_pid = control(admin, "queue0", "pid", {})
    try:
        c = pika.BlockingConnection(pika.URLParameters(node.url))
        c.channel().queue_declare("flow-q")
        client = RawClient(node.port)
        pub = client.sock
        one = client.publish_frames("flow-q", b"x" * body_bytes)
        burst = one * 64
        os.kill(queue_pid, signal.SIGSTOP)
        pub.setblocking(False)
        writable = select.poll()  # not select(): a long test run leaves descriptors above 1024
        writable.register(pub, select.POLLOUT)
        sent_bytes = 0
        while sent_bytes < attempts_max * len(one):
            try:
                sent_bytes += pub.send(burst[sent_bytes % len(burst):])
            except BlockingIOError:
                if not writable.poll(stalled_after_s * 1000):
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
