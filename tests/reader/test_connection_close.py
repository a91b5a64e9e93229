"""The connection core's close handshake, both directions, and RabbitMQ's closing timeout for a
client that never answers the server's connection.close. Exact effects."""
from __future__ import annotations

from actors.reader.core import ConnectionCore, Settings, closing_timeout_s
from effects import ChannelsDown, CloseSocket, Write
from wire import methods as m
from wire.errors import NOT_IMPLEMENTED, AmqpError
from wire.frames import method_frame
from wire.inbound import Command, Heartbeat, ProtocolHeaderOk

TPS = Settings().ticks_per_second
ERROR = AmqpError(NOT_IMPLEMENTED, "prefetch_size!=0 (5)", 60, 10)
SERVER_CLOSE = Write([method_frame(0, m.ConnectionClose(reply_code=540, reply_text=ERROR.text,
                                                        class_id=60, method_id=10))])
TIMED_OUT = CloseSocket("no connection.close-ok from the client in time")


def opened(heartbeat: int = 0) -> ConnectionCore:
    c = ConnectionCore(Settings(), check_login=lambda user, password: True, peer_is_loopback=True,
                       vhost_exists=lambda vhost: True)
    c.receive(ProtocolHeaderOk())
    c.receive(cmd(m.ConnectionStartOk(client_properties={}, mechanism="PLAIN", response=b"\0guest\0guest",
                                      locale="en_US")))
    c.receive(cmd(m.ConnectionTuneOk(channel_max=2047, frame_max=131072, heartbeat=heartbeat)))
    c.receive(cmd(m.ConnectionOpen(virtual_host="/")))
    return c


def cmd(method: m.Method) -> Command:
    return Command(0, method, None, None)


def ticks(c: ConnectionCore, n: int) -> list:
    return [effect for _ in range(n) for effect in c.tick()]


def test_a_client_close_is_answered_and_the_socket_closed_at_once():
    c = opened()
    assert c.receive(cmd(m.ConnectionClose(reply_code=200, reply_text="bye", class_id=0, method_id=0))) == [
        ChannelsDown(), Write([method_frame(0, m.ConnectionCloseOk())]), CloseSocket("closed by client")]


def test_a_server_close_closes_the_socket_on_close_ok():
    c = opened()
    assert c.channel_error(ERROR) == [ChannelsDown(), SERVER_CLOSE]
    assert c.receive(cmd(m.BasicQos(prefetch_size=0, prefetch_count=1, global_=False))) == []  # ignored
    assert c.receive(cmd(m.ConnectionCloseOk())) == [CloseSocket("closed by server")]
    assert ticks(c, closing_timeout_s * TPS) == []


def test_a_client_that_never_answers_the_close_is_cut_off_after_30_s():
    c = opened()
    c.channel_error(ERROR)
    assert ticks(c, closing_timeout_s * TPS - 1) == []
    assert c.tick() == [TIMED_OUT]
    assert ticks(c, TPS) == []


def test_with_a_shorter_heartbeat_the_closing_timeout_is_the_heartbeat():
    c = opened(heartbeat=5)
    c.channel_error(ERROR)
    effects = []
    for _ in range(5 * TPS - 1):
        c.receive(Heartbeat())  # the client is alive: only the closing timeout can end it
        effects += c.tick()
    assert all(isinstance(e, Write) for e in effects)  # our own heartbeats, nothing else
    assert c.tick() == [TIMED_OUT]
