"""A small AMQP 0-9-1 client for the API's publish and get: the node talks AMQP to itself.

Why AMQP and not the runtime: a message published or fetched through the HTTP API must meet every
rule a client's does (permissions of the HTTP user, routing, mandatory returns, user-id checks,
the queue's get semantics), with RabbitMQ's error texts. Opening a connection to the node's own
listener as that user gets all of that from the code that already does it, for the price of a
connection per request (a few ms), which is what RabbitMQ's management plugin pays too (it opens a
direct connection per publish/get).

A shell: asyncio streams; frames are built and parsed with wire/ (the same codec the broker uses).
One connection, one channel, closed after the request. A broker's channel.close or
connection.close raises `BrokerError(code, text)`.
"""
from __future__ import annotations

import asyncio
from typing import Any

from wire import methods as m
from wire.frames import PROTOCOL_HEADER, content_frames, method_frame
from wire.inbound import Command, InboundParser
from wire.properties import BasicProperties, encode_content_header

FRAME_MAX = 131072
CONTENT_HEADER_BYTES = 12  # class id, weight, body size: the properties follow
read_bytes = 65536
timeout_s = 10.0


class BrokerError(Exception):
    def __init__(self, code: int, text: str) -> None:
        super().__init__(f"{code} {text}")
        self.code, self.text = code, text


class Session:
    """One connection with channel 1 open."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader, self._writer = reader, writer
        self._parser = InboundParser(FRAME_MAX)
        self._parser.receive_data(PROTOCOL_HEADER)  # the parser expects a client's first 8 octets
        self._pending: list[Command] = []

    @classmethod
    async def open(cls, port: int, user: str, password: str, vhost: str, host: str = "127.0.0.1") -> Session:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
        s = cls(reader, writer)
        writer.write(PROTOCOL_HEADER)
        await s._expect(m.ConnectionStart)
        s._send(0, m.ConnectionStartOk({"product": "warren management", "capabilities": {"publisher_confirms": True,
                                                                                         "basic.nack": True}},
                                       "PLAIN", b"\0" + user.encode() + b"\0" + password.encode(), "en_US"))
        tune = await s._expect(m.ConnectionTune)
        s._send(0, m.ConnectionTuneOk(channel_max=1, frame_max=min(tune.method.frame_max or FRAME_MAX, FRAME_MAX),
                                      heartbeat=0))
        s._send(0, m.ConnectionOpen(virtual_host=vhost))
        await s._expect(m.ConnectionOpenOk)
        s._send(1, m.ChannelOpen())
        await s._expect(m.ChannelOpenOk)
        return s

    async def close(self) -> None:
        try:
            self._send(0, m.ConnectionClose(reply_code=200, reply_text="Goodbye"))
            await asyncio.wait_for(self._expect(m.ConnectionCloseOk), timeout_s)
        except (BrokerError, OSError, asyncio.TimeoutError, ConnectionError):
            pass
        self._writer.close()

    async def publish(self, exchange: str, routing_key: str, props: BasicProperties, body: bytes) -> bool:
        """Publish with mandatory and a confirm; True when it was routed to a queue."""
        self._send(1, m.ConfirmSelect())
        await self._expect(m.ConfirmSelectOk)
        header = encode_content_header(60, len(body), props)
        self._writer.writelines(content_frames(1, m.BasicPublish(exchange=exchange, routing_key=routing_key,
                                                                 mandatory=True), header, body, FRAME_MAX))
        returned = False
        while True:
            cmd = await self._next()
            if isinstance(cmd.method, m.BasicReturn):
                returned = True
            elif isinstance(cmd.method, (m.BasicAck, m.BasicNack)):
                return not returned

    async def get(self, queue: str, count: int, ackmode: str) -> list[tuple[m.BasicGetOk, bytes, bytes]]:
        """Up to `count` messages, then settled as `ackmode` says (RabbitMQ's four modes)."""
        got = []
        no_ack = False
        for _ in range(count):
            self._send(1, m.BasicGet(queue=queue, no_ack=no_ack))
            cmd = await self._next()
            if isinstance(cmd.method, m.BasicGetEmpty):
                break
            got.append((cmd.method, cmd.header, cmd.body))
        if got:
            last = got[-1][0].delivery_tag
            if ackmode == "ack_requeue_false":
                self._send(1, m.BasicAck(delivery_tag=last, multiple=True))
            else:
                self._send(1, m.BasicNack(delivery_tag=last, multiple=True,
                                          requeue=ackmode in ("ack_requeue_true", "reject_requeue_true")))
        return got

    # ---------------------------------------------------------------- plumbing
    def _send(self, channel: int, method: m.Method) -> None:
        self._writer.write(method_frame(channel, method))

    async def _expect(self, kind: type) -> Command:
        cmd = await self._next()
        if not isinstance(cmd.method, kind):
            raise BrokerError(541, f"unexpected {cmd.method.NAME}")
        return cmd

    async def _next(self) -> Command:
        while not self._pending:
            data = await asyncio.wait_for(self._reader.read(read_bytes), timeout_s)
            if not data:
                raise BrokerError(320, "connection closed by the broker")
            self._pending.extend(e for e in self._parser.receive_data(data) if isinstance(e, Command))
        cmd = self._pending.pop(0)
        if isinstance(cmd.method, (m.ChannelClose, m.ConnectionClose)):
            raise BrokerError(cmd.method.reply_code, cmd.method.reply_text)
        return cmd


def properties(header: bytes) -> BasicProperties:
    return BasicProperties.decode(header, CONTENT_HEADER_BYTES)


def props_from_json(values: dict[str, Any]) -> BasicProperties:
    """The API's `properties` object as basic properties (unknown names ignored, as RabbitMQ)."""
    known = {k: v for k, v in values.items() if k in BasicProperties.__slots__}
    return BasicProperties(**known)


def props_to_json(props: BasicProperties) -> dict[str, Any]:
    return {name: getattr(props, name) for name in BasicProperties.__slots__ if getattr(props, name) is not None}
