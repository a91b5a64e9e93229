"""A raw AMQP 0-9-1 client for the protocol fuzzers: opens a connection with the handshake built from
wire/ (so what follows it reaches an open connection), sends whatever octets it is given and
reports how the broker ended the connection: its connection.close (code and text), or the socket
closed without one, or still open when the time-out ran out."""
from __future__ import annotations

import socket
import time
from dataclasses import dataclass

from wire.frames import PROTOCOL_HEADER, method_frame
from wire.inbound import Command, InboundParser
from wire.methods import (ConnectionClose, ConnectionCloseOk, ConnectionOpen, ConnectionOpenOk, ConnectionStart,
                          ConnectionStartOk, ConnectionTune, ConnectionTuneOk)

read_bytes = 65536


@dataclass(frozen=True)
class Ending:
    """How the broker answered: `close` (code, text) from its connection.close, else `dropped`
    (the socket closed without one) or `open` (nothing within the time-out)."""

    kind: str                       # "close" | "dropped" | "open"
    code: int = 0
    text: str = ""
    commands: tuple[str, ...] = ()  # the names of the other methods it sent meanwhile

    def __str__(self) -> str:
        return f"{self.code} {self.text}" if self.kind == "close" else self.kind


class RawConnection:
    def __init__(self, host: str, port: int, *, timeout_s: float = 5.0, frame_max: int = 131072) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.timeout_s = timeout_s
        self.parser = InboundParser(0)  # the server's frames, read as the inbound parser reads a client's
        self.parser.receive_data(PROTOCOL_HEADER)
        self.sock.sendall(PROTOCOL_HEADER)
        self._expect(ConnectionStart)
        self.send(method_frame(0, ConnectionStartOk(client_properties={"product": "warren-fuzz"},
                                                    mechanism="PLAIN", response=b"\x00guest\x00guest",
                                                    locale="en_US")))
        tune = self._expect(ConnectionTune)
        self.frame_max = min(frame_max, tune.frame_max or frame_max)
        self.send(method_frame(0, ConnectionTuneOk(channel_max=tune.channel_max, frame_max=self.frame_max,
                                                   heartbeat=0)))
        self.send(method_frame(0, ConnectionOpen(virtual_host="/")))
        self._expect(ConnectionOpenOk)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _commands(self, deadline: float) -> list[Command] | None:
        """The next commands the server sent; None when the socket closed."""
        self.sock.settimeout(max(deadline - time.monotonic(), 0.001))
        data = self.sock.recv(read_bytes)
        if not data:
            return None
        return [e for e in self.parser.receive_data(data) if isinstance(e, Command)]

    def _expect(self, kind: type) -> object:
        deadline = time.monotonic() + self.timeout_s
        while True:
            commands = self._commands(deadline)
            if commands is None:
                raise ConnectionError(f"closed while waiting for {kind.__name__}")
            for c in commands:
                if isinstance(c.method, kind):
                    return c.method
                if isinstance(c.method, ConnectionClose):
                    raise ConnectionError(f"closed: {c.method.reply_code} {c.method.reply_text}")

    def ending(self, timeout_s: float | None = None) -> Ending:
        """Read until the broker closes the connection (answering its close) or the time-out."""
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        seen: list[str] = []
        try:
            while time.monotonic() < deadline:
                commands = self._commands(deadline)
                if commands is None:
                    return Ending("dropped", commands=tuple(seen))
                for c in commands:
                    if isinstance(c.method, ConnectionClose):
                        try:
                            self.send(method_frame(0, ConnectionCloseOk()))
                        except OSError:
                            pass
                        return Ending("close", c.method.reply_code, c.method.reply_text, tuple(seen))
                    seen.append(c.method.NAME)
        except socket.timeout:
            pass
        except OSError:
            return Ending("dropped", commands=tuple(seen))
        return Ending("open", commands=tuple(seen))

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
