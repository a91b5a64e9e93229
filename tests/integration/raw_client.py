"""A raw AMQP 0-9-1 client over a plain socket, for tests that need what client libraries hide: the
exact frames the broker sends (heartbeats, connection.blocked), or a publisher that keeps writing
while the broker stops reading it."""
from __future__ import annotations

import socket
import threading
import time

from wire import methods as m
from wire.frames import HEARTBEAT_FRAME, PROTOCOL_HEADER, content_frames_bytes, method_frame
from wire.inbound import Command, Heartbeat, InboundParser
from wire.properties import BasicProperties, encode_content_header

FRAME_MAX = 131072


class RawClient:
    def __init__(self, port: int, *, heartbeat: int = 0, capabilities: dict | None = None,
                 timeout_s: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
        self.parser = InboundParser()
        self.parser.receive_data(PROTOCOL_HEADER)  # the broker's stream has no protocol header
        self.events: list = []
        self.sock.sendall(PROTOCOL_HEADER)
        self.expect(m.ConnectionStart)
        props = {"capabilities": capabilities} if capabilities is not None else {}
        self.send(method_frame(0, m.ConnectionStartOk(client_properties=props, mechanism="PLAIN",
                                                      response=b"\0guest\0guest", locale="en_US")))
        self.expect(m.ConnectionTune)
        self.send(method_frame(0, m.ConnectionTuneOk(channel_max=2047, frame_max=FRAME_MAX, heartbeat=heartbeat)))
        self.send(method_frame(0, m.ConnectionOpen(virtual_host="/")))
        self.expect(m.ConnectionOpenOk)
        self.send(method_frame(1, m.ChannelOpen()))
        self.expect(m.ChannelOpenOk)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read(self) -> list:
        """What the next recv brings (raises ConnectionError when the broker closed the socket)."""
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("the broker closed the socket")
        return self.parser.receive_data(data)

    def expect(self, cls: type, deadline_s: float = 10.0) -> Command:
        """The next command of class `cls`, skipping heartbeats; anything else fails the test."""
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            while self.events:
                event = self.events.pop(0)
                if isinstance(event, Heartbeat):
                    continue
                assert isinstance(event, Command) and isinstance(event.method, cls), (cls, event)
                return event
            self.events += self.read()
        raise AssertionError(f"no {cls.__name__} within {deadline_s} s")

    def method_frame(self, method: m.Method, channel: int = 1) -> bytes:
        return method_frame(channel, method)

    def expect_delivery(self, deadline_s: float = 10.0) -> Command:
        """The next basic.deliver with its content (the parser joins the three frames)."""
        return self.expect(m.BasicDeliver, deadline_s)

    def publish_frames(self, routing_key: str, body: bytes, exchange: str = "", persistent: bool = False) -> bytes:
        header = encode_content_header(60, len(body), BasicProperties(delivery_mode=2 if persistent else None))
        return content_frames_bytes(1, m.BasicPublish(exchange=exchange, routing_key=routing_key), header, body,
                                    FRAME_MAX)

    def publish(self, routing_key: str, body: bytes) -> None:
        self.send(self.publish_frames(routing_key, body))

    def flood(self, frames: bytes, stop: threading.Event) -> threading.Thread:
        """Write `frames` again and again from a thread until `stop` is set (or the socket closes):
        a publisher faster than anything behind the broker's socket."""
        self.sock.settimeout(None)  # the broker may not read for a long while: that is the point

        def run() -> None:
            while not stop.is_set():
                try:
                    self.sock.sendall(frames)
                except OSError:
                    return
        thread = threading.Thread(target=run, name="flood", daemon=True)
        thread.start()
        return thread

    def heartbeat(self) -> None:
        self.send(HEARTBEAT_FRAME)

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes a flood thread blocked in sendall
        except OSError:
            pass
        self.sock.close()
