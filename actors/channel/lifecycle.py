"""A channel's life and the channel class's methods.

Theory of operation: a channel is OPEN until it is closed. The client closes it with channel.close
(answered with close-ok at once, CLOSED); the server closes it on a soft error by sending
channel.close (CLOSING) and then drops every command until the client's close-ok arrives (CLOSED),
answering a crossing channel.close with close-ok, as RabbitMQ does. channel.flow can only stay
active (RabbitMQ answers active=false with 540 NOT_IMPLEMENTED), and a second channel.open is a
connection error.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from effects import ChannelFinished
from wire import methods as m
from wire.errors import CHANNEL_ERROR, NOT_IMPLEMENTED, AmqpError
from wire.inbound import Command

if TYPE_CHECKING:
    from actors.channel.core import ChannelCore

OPEN, CLOSING, CLOSED = "open", "closing", "closed"


def channel_close(ch: ChannelCore, cmd: Command) -> None:
    ch.release()
    ch.send_method(m.ChannelCloseOk())
    ch.state = CLOSED
    ch.out.emit(ChannelFinished())


def channel_flow(ch: ChannelCore, cmd: Command) -> None:
    if not cmd.method.active:
        ch.error(AmqpError(NOT_IMPLEMENTED, "active=false", connection=True), cmd.method)
        return
    ch.send_method(m.ChannelFlowOk(active=True))


def channel_open(ch: ChannelCore, cmd: Command) -> None:
    ch.error(AmqpError(CHANNEL_ERROR, "second 'channel.open' seen", connection=True), cmd.method)


def while_closing(ch: ChannelCore, method: m.Method) -> None:
    """A command on a channel that is no longer open."""
    if isinstance(method, m.ChannelCloseOk) and ch.state == CLOSING:
        ch.state = CLOSED
        ch.out.emit(ChannelFinished())
    elif isinstance(method, m.ChannelClose) and ch.state == CLOSING:
        ch.send_method(m.ChannelCloseOk())
    # everything else on a closing channel is dropped, as RabbitMQ does
