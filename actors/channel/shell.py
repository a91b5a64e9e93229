"""ChannelActor: the mailbox face of one AMQP channel, owned by its connection's Reader.

A shell only. Messages from queues, the node's replica and other channels go to the channel's core
(`ChannelCore.receive`); the effects it produces, here and after every command the reader hands
it, are taken with `flush()` and carried out by one Interpreter: sends leave through the runtime
(credit on the channel's link to each queue), frames are written by the reader, and a finished
channel or a connection-level error goes back to the reader. A bug while handling a message costs
this connection only (the reader closes it with 541), never the host.
"""
from __future__ import annotations

from typing import Any, Protocol

from actors.channel.core import ChannelCore
from actors.runtime.address import Address
from actors.runtime.effects import ActorEffects
from effects import ChannelFinished, CloseConnection, Write
from effects.interpreter import Interpreter


class Connection(Protocol):
    """What a channel needs of the reader that owns it."""

    writable: bool

    def write(self, e: Write) -> None: ...

    def forget_channel(self, ch: ChannelActor) -> None: ...

    def channel_error(self, error: Any) -> None: ...

    def internal_error(self) -> None: ...

    def maybe_resume(self) -> None: ...


class ChannelActor:
    def __init__(self, connection: Connection, core: ChannelCore, address: Address, runtime: Any) -> None:
        self.connection = connection
        self.core = core
        self.address = address
        self.run = Interpreter({
            **ActorEffects(runtime, address).handlers(), Write: connection.write,
            ChannelFinished: lambda _: connection.forget_channel(self),
            CloseConnection: lambda e: connection.channel_error(e.error)})

    def receive(self, sender: Address, msg: Any) -> None:
        try:
            self.core.receive(sender, msg)
            self.flush()
        except Exception:  # a bug must cost this connection only, never the host
            self.connection.internal_error()

    def flush(self) -> None:
        """Carry out what the core produced since the last flush."""
        self.run(self.core.flush(self.connection.writable))

    def on_unblocked(self) -> None:
        self.connection.maybe_resume()
