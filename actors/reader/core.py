"""The connection core: AMQP handshake, tuning, heartbeats and channel bookkeeping, without IO.

Theory of operation. The reader feeds the core the events its InboundParser produced (protocol
header, commands, heartbeats, parse errors) and one `tick()` per `ticks_per_second`; the core returns
effects. The handshake is RabbitMQ's: protocol header -> connection.start; start-ok (PLAIN or
AMQPLAIN) -> connection.tune; tune-ok -> wait for connection.open; open -> open-ok. Errors before
connection.open close the socket without a frame, except a refused login, which is reported with
connection.close 403 when the client announced `authentication_failure_close` (as RabbitMQ does).

After open, channel 0 carries connection methods and other channels carry channel methods; the core
checks channel numbers and open/closed state and forwards each command to its channel
(`ToChannel`). A connection error sends connection.close and waits for close-ok, ignoring everything
else, then closes the socket; a client that never answers is cut off after RabbitMQ's closing
timeout (30 s, or the heartbeat interval when that is shorter). A client's connection.close is
answered with close-ok and the socket closes at once (RabbitMQ waits up to that timeout for the
client to close it first; closing it ourselves frees the client's reader all the same).

Handshake timeout: a connection that has not opened `handshake_timeout_ms` after it was accepted
(counted in ticks) is closed without a word, as RabbitMQ's `handshake_timeout`; the reason it logs
says what it was waiting for, RabbitMQ's way: `{handshake_timeout,handshake}` for the protocol
header, `{handshake_timeout,frame_header}` for a frame.

Heartbeats: with a negotiated interval H > 0 the core asks for a heartbeat frame when nothing was
sent for H/2 seconds and drops the connection when nothing at all was received for 2*H seconds
while the socket was being read (a connection blocked by credit or by an alarm is not read, so the
client's silence is not its fault: RabbitMQ pauses its heartbeat monitor the same way).

Who may connect (login.py): the `Gatekeeper`, backed by the host's registry replica, answers which
mechanisms connection.start offers (PLAIN, AMQPLAIN, and EXTERNAL on a TLS connection when
configured), the login (the core reports every decided attempt as `LoginAttempt`, which the shell
counts and, for a refusal, logs with RabbitMQ's text), and at connection.open the limits and the
permissions (530, as RabbitMQ 3.10: the vhost's max-connections, the user's, then "access to vhost
'v' refused for user 'u'"); at channel.open the user's max-channels (a 530 connection error). A
refused login is reported with connection.close 403 only when the client announced
`authentication_failure_close`; the text is RabbitMQ's safe one, whatever the reason. A
mechanism that is not registered or not offered, or a malformed response, closes the socket (a
handshake error in RabbitMQ). The user's tags at login travel in `Opened` (the channels'
impersonator check reads them, as rabbit_channel reads the connection's #user record).

Deliberately left to others: what a channel does (actors/channel/core.py), resource alarms and
connection.blocked (flow/blocking.py, run by the reader shell).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from actors.reader.login import Gatekeeper, Login, Malformed, PasswordOnly, Peer, parse_credentials
from effects import ChannelsDown, CloseSocket, LoginAttempt, Opened, OpenChannel, SetFrameMax, ToChannel, Write
from wire import methods as m
from wire.errors import (
    ACCESS_REFUSED, CHANNEL_ERROR, COMMAND_INVALID, NOT_ALLOWED, UNEXPECTED_FRAME, AmqpError,
)
from wire.frames import HEARTBEAT_FRAME, PROTOCOL_HEADER, method_frame
from wire.inbound import BadProtocolHeader, Command, ConnectionErrorEvent, Heartbeat, ProtocolHeaderOk

FRAME_MIN_SIZE = 4096
closing_timeout_s = 30  # rabbit_reader's ?CLOSING_TIMEOUT


@dataclass(frozen=True, slots=True)
class Settings:
    frame_max: int = 131072
    channel_max: int = 2047
    heartbeat: int = 60
    handshake_timeout_ms: int = 10_000
    ticks_per_second: int = 4
    product: str = "warren"
    version: str = "0.1.0"
    cluster_name: str = "warren"


START, START_OK, TUNE_OK, OPEN_WAIT, OPEN, CLOSING, CLOSED = (
    "start", "start_ok", "tune_ok", "open_wait", "open", "closing", "closed")
HANDSHAKE = frozenset({START, START_OK, TUNE_OK, OPEN_WAIT})

CAPABILITIES = {
    "publisher_confirms": True,
    "exchange_exchange_bindings": True,
    "basic.nack": True,
    "consumer_cancel_notify": True,
    "connection.blocked": True,
    "authentication_failure_close": True,
    "per_consumer_qos": True,
}


class ConnectionCore:
    def __init__(self, settings: Settings, *, check_login: Callable[[str, str], bool] | Gatekeeper,
                 peer_is_loopback: bool, vhost_exists: Callable[[str], bool],
                 loopback_users: frozenset[str] = frozenset({"guest"}), peer: Peer | None = None) -> None:
        """`check_login`: the host's Gatekeeper, or a bare (user, password) check (no permissions,
        limits or EXTERNAL); `peer`: the connection's facts beyond loopback (TLS, certificate)."""
        self.settings = settings
        self.gatekeeper: Any = (check_login if isinstance(check_login, Gatekeeper)
                                else PasswordOnly(check_login, loopback_users))
        self.peer = peer if peer is not None else Peer(peer_is_loopback)
        self.vhost_exists = vhost_exists
        self.state = START
        self.user = ""
        self.tags: tuple[str, ...] = ()
        self.vhost = ""
        self.client_properties: dict = {}
        self.capabilities: dict = {}
        self.frame_max = settings.frame_max
        self.channel_max = settings.channel_max
        self.heartbeat = 0
        self.channels: set[int] = set()
        self._idle_in = 0
        self._idle_out = 0
        self._closing_ticks = 0
        self._handshake_ticks = 0

    # ------------------------------------------------------------------ inputs
    def receive(self, event: object) -> list:
        self._idle_in = 0
        if isinstance(event, Command):
            return self._command(event)
        if isinstance(event, ProtocolHeaderOk):
            mechanisms = " ".join(self.gatekeeper.offered(self.peer)).encode()
            return self._send(m.ConnectionStart(
                version_major=0, version_minor=9, server_properties=self._server_properties(),
                mechanisms=mechanisms, locales=b"en_US")) + self._to(START_OK)
        if isinstance(event, BadProtocolHeader):
            self.state = CLOSED
            return [Write([PROTOCOL_HEADER]), CloseSocket("bad protocol header")]
        if isinstance(event, Heartbeat):
            return []
        if isinstance(event, ConnectionErrorEvent):
            return self._connection_error(event.error)
        raise TypeError(f"unexpected event {event!r}")

    def tick(self, reading: bool = True) -> list:
        """Called `ticks_per_second` times a second; `reading`: whether the shell reads the socket."""
        if self.state == CLOSING:
            self._closing_ticks += 1
            timeout_s = min(self.heartbeat, closing_timeout_s) if self.heartbeat else closing_timeout_s
            if self._closing_ticks >= timeout_s * self.settings.ticks_per_second:
                self.state = CLOSED
                return [CloseSocket("no connection.close-ok from the client in time")]
        if self.state in HANDSHAKE:
            self._handshake_ticks += 1
            if self._handshake_ticks * 1000 >= self.settings.handshake_timeout_ms * self.settings.ticks_per_second:
                waiting_for = "handshake" if self.state == START else "frame_header"
                self.state = CLOSED
                return [CloseSocket(f"{{handshake_timeout,{waiting_for}}}")]
        if not self.heartbeat or self.state == CLOSED:
            return []
        self._idle_in = self._idle_in + 1 if reading else 0
        self._idle_out += 1
        tps = self.settings.ticks_per_second
        if self._idle_in >= 2 * self.heartbeat * tps:
            self.state = CLOSED
            return [ChannelsDown(), CloseSocket(f"missed heartbeats from client, timeout: {self.heartbeat}s")]
        if self._idle_out * 2 >= self.heartbeat * tps:
            self._idle_out = 0
            return [Write([HEARTBEAT_FRAME])]
        return []

    def sent(self) -> None:
        """The shell wrote something to the socket."""
        self._idle_out = 0

    def channel_finished(self, number: int) -> None:
        self.channels.discard(number)

    def channel_error(self, error: AmqpError) -> list:
        """A channel found a connection-level error."""
        return self._connection_error(error)

    def resume(self, user: str, vhost: str, frame_max: int, channel_max: int, heartbeat: int,
               client_properties: dict, channels: Iterable[int], tags: tuple[str, ...] = ()) -> list:
        """Take over an open connection another host negotiated (actors/reader/handover.py): the
        effects that set the shell up as connection.open did, without a frame to the client."""
        self.user, self.vhost, self.tags = user, vhost, tuple(tags)
        self.frame_max, self.channel_max, self.heartbeat = frame_max, channel_max, heartbeat
        self.client_properties = client_properties
        caps = client_properties.get("capabilities")
        self.capabilities = dict(caps) if isinstance(caps, dict) else {}
        self.channels = set(channels)
        self.state = OPEN
        return [SetFrameMax(frame_max), Opened(vhost, user, frame_max, self.capabilities, self.tags)]

    # ------------------------------------------------------------------ internals
    def _to(self, state: str) -> list:
        self.state = state
        return []

    def _send(self, method: m.Method, channel: int = 0) -> list:
        return [Write([method_frame(channel, method)])]

    def _server_properties(self) -> dict:
        s = self.settings
        return {
            "product": s.product, "version": s.version, "platform": "Python",
            "cluster_name": s.cluster_name, "capabilities": dict(CAPABILITIES),
            "copyright": "warren contributors", "information": "Licensed under the Apache License 2.0",
        }

    def _connection_error(self, error: AmqpError) -> list:
        if self.state in (CLOSING, CLOSED):
            return []
        if self.state != OPEN:
            self.state = CLOSED
            return [CloseSocket(error.text)]
        self.state = CLOSING
        close = m.ConnectionClose(reply_code=error.code, reply_text=error.text,
                                  class_id=error.class_id, method_id=error.method_id)
        return [ChannelsDown(), *self._send(close)]

    def _command(self, cmd: Command) -> list:
        method = cmd.method
        if self.state == CLOSING:
            if isinstance(method, m.ConnectionCloseOk):
                self.state = CLOSED
                return [CloseSocket("closed by server")]
            if isinstance(method, m.ConnectionClose):
                return self._send(m.ConnectionCloseOk())
            return []
        if self.state == CLOSED:
            return []
        if self.state != OPEN:
            return self._handshake(method)
        if cmd.channel == 0:
            return self._channel_zero(cmd)
        if method.CLASS_ID == 10:
            return self._connection_error(
                AmqpError(COMMAND_INVALID, "unimplemented method", method.CLASS_ID, method.METHOD_ID))
        if isinstance(method, m.ChannelOpen):
            if cmd.channel in self.channels:
                return self._connection_error(
                    AmqpError(CHANNEL_ERROR, "second 'channel.open' seen", 20, 10))
            if cmd.channel > self.channel_max:
                return self._connection_error(AmqpError(
                    NOT_ALLOWED, f"channel_max of {self.channel_max} exceeded by channel {cmd.channel}", 20, 10))
            refused = self.gatekeeper.channel_refusal(self.user)  # the user's max-channels
            if refused is not None:
                return self._connection_error(refused)
            self.channels.add(cmd.channel)
            return [OpenChannel(cmd.channel), *self._send(m.ChannelOpenOk(), cmd.channel)]
        if cmd.channel not in self.channels:
            if isinstance(method, m.ChannelCloseOk):
                return []
            return self._connection_error(
                AmqpError(CHANNEL_ERROR, "expected 'channel.open'", method.CLASS_ID, method.METHOD_ID))
        return [ToChannel(cmd.channel, cmd)]

    def _channel_zero(self, cmd: Command) -> list:
        method = cmd.method
        if isinstance(method, m.ConnectionClose):
            self.state = CLOSED
            return [ChannelsDown(), *self._send(m.ConnectionCloseOk()), CloseSocket("closed by client")]
        if isinstance(method, m.ConnectionUpdateSecret):
            return self._send(m.ConnectionUpdateSecretOk())
        if isinstance(method, (m.ConnectionBlocked, m.ConnectionUnblocked)):
            return []
        return self._connection_error(AmqpError(
            UNEXPECTED_FRAME if method.CLASS_ID != 10 else COMMAND_INVALID,
            f"expected content header for class {method.CLASS_ID}, got non content header frame instead"
            if method.CLASS_ID != 10 else "unimplemented method", method.CLASS_ID, method.METHOD_ID))

    def _handshake(self, method: m.Method) -> list:
        if self.state == START_OK and isinstance(method, m.ConnectionStartOk):
            return self._start_ok(method)
        if self.state == TUNE_OK and isinstance(method, m.ConnectionTuneOk):
            return self._tune_ok(method)
        if self.state == OPEN_WAIT and isinstance(method, m.ConnectionOpen):
            return self._open(method)
        self.state = CLOSED
        return [CloseSocket(f"unexpected {method.NAME} during the handshake")]

    def _start_ok(self, x: m.ConnectionStartOk) -> list:
        self.client_properties = dict(x.client_properties)
        caps = self.client_properties.get("capabilities")
        self.capabilities = dict(caps) if isinstance(caps, dict) else {}
        mechanism = x.mechanism
        if mechanism not in self.gatekeeper.offered(self.peer):
            self.state = CLOSED
            known = mechanism in ("PLAIN", "AMQPLAIN", "EXTERNAL")
            return [CloseSocket(f"{'invalid' if known else 'unknown'} authentication mechanism '{mechanism}'")]
        outcome = self.gatekeeper.login(mechanism, bytes(x.response), self.peer)
        if isinstance(outcome, Malformed):
            self.state = CLOSED
            return [LoginAttempt("", False, outcome.reason), CloseSocket(outcome.reason)]
        if not isinstance(outcome, Login):
            self.state = CLOSED
            refused = [LoginAttempt(outcome.user, False, outcome.reason)]
            if self.capabilities.get("authentication_failure_close"):
                text = (f"Login was refused using authentication mechanism {mechanism}. "
                        "For details see the broker logfile.")
                err = AmqpError(ACCESS_REFUSED, text)
                refused += self._send(m.ConnectionClose(reply_code=err.code, reply_text=err.text))
            return [*refused, CloseSocket(outcome.reason)]
        self.user, self.tags = outcome.user, outcome.tags
        s = self.settings
        return [LoginAttempt(self.user, True), *self._send(m.ConnectionTune(
            channel_max=s.channel_max, frame_max=s.frame_max, heartbeat=s.heartbeat)), *self._to(TUNE_OK)]

    def _tune_ok(self, x: m.ConnectionTuneOk) -> list:
        s = self.settings
        for name, got, limit in (("channel_max", x.channel_max, s.channel_max),
                                 ("frame_max", x.frame_max, s.frame_max)):
            if got == 0 or got > limit:
                self.state = CLOSED
                shown = "0 (no limit)" if got == 0 else str(got)
                return [CloseSocket(f"failed to negotiate connection parameters: negotiated {name} = "
                                    f"{shown} is higher than the maximum allowed value ({limit})")]
        if x.frame_max < FRAME_MIN_SIZE:
            self.state = CLOSED
            return [CloseSocket(f"failed to negotiate connection parameters: negotiated frame_max = "
                                f"{x.frame_max} is lower than the minimum allowed value ({FRAME_MIN_SIZE})")]
        self.channel_max, self.frame_max, self.heartbeat = x.channel_max, x.frame_max, x.heartbeat
        return [SetFrameMax(self.frame_max)] + self._to(OPEN_WAIT)

    def _open(self, x: m.ConnectionOpen) -> list:
        if not self.vhost_exists(x.virtual_host):
            self.state = OPEN  # RabbitMQ reports this one with connection.close 530
            return self._connection_error(AmqpError(NOT_ALLOWED, f"vhost {x.virtual_host} not found", 10, 40))
        refused = self.gatekeeper.open_refusal(self.user, x.virtual_host)  # limits, then permissions
        if refused is not None:
            self.state = OPEN  # reported with connection.close 530 too
            return self._connection_error(refused)
        self.vhost = x.virtual_host
        self.state = OPEN
        return [Opened(self.vhost, self.user, self.frame_max, self.capabilities, self.tags),
                *self._send(m.ConnectionOpenOk())]


__all__ = ["ConnectionCore", "Gatekeeper", "Peer", "Settings", "parse_credentials"]
