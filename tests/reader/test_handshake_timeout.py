"""handshake_timeout (actors/reader/core.py): a connection not open within it is closed, with the
reason RabbitMQ logs for what it was waiting for; an open connection is never timed out so."""
from __future__ import annotations

from actors.reader.core import ConnectionCore, Settings
from effects import CloseSocket
from wire import methods as m
from wire.inbound import Command, ProtocolHeaderOk

SETTINGS = Settings(handshake_timeout_ms=1000, ticks_per_second=4, heartbeat=0)


def core() -> ConnectionCore:
    return ConnectionCore(SETTINGS, check_login=lambda user, password: True, peer_is_loopback=True,
                          vhost_exists=lambda vhost: True)


def ticks(c: ConnectionCore, n: int) -> list:
    return [c.tick() for _ in range(n)]


def test_silent_from_the_start_it_is_closed_waiting_for_the_handshake():
    c = core()
    assert ticks(c, 3) == [[], [], []]
    assert c.tick() == [CloseSocket("{handshake_timeout,handshake}")]
    assert c.tick() == []  # closed once


def test_stalled_after_the_protocol_header_it_is_closed_waiting_for_a_frame():
    c = core()
    c.receive(ProtocolHeaderOk())
    c.receive(Command(0, m.ConnectionStartOk(client_properties={}, mechanism="PLAIN", response=b"\0u\0p",
                                             locale="en_US"), None, None))
    assert ticks(c, 3) == [[], [], []]
    assert c.tick() == [CloseSocket("{handshake_timeout,frame_header}")]


def test_an_open_connection_is_not_timed_out():
    c = core()
    c.receive(ProtocolHeaderOk())
    for method in (m.ConnectionStartOk(client_properties={}, mechanism="PLAIN", response=b"\0u\0p", locale="en_US"),
                   m.ConnectionTuneOk(channel_max=2047, frame_max=131072, heartbeat=0),
                   m.ConnectionOpen(virtual_host="/")):
        c.receive(Command(0, method, None, None))
    assert ticks(c, 100) == [[]] * 100
