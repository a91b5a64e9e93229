"""QueueDriver: plays a channel against one quorum queue, for tests and benchmarks.

An actor in the caller's own Runtime (a client host of the cluster's directory) that talks to the
queue's members through the channel-side core, `QuorumClient`, exactly as a channel will: publish
with confirms (`publish`, tracked by channel confirm seq), consume (`consume`: prefetch, acking
each delivery in the loop turn it arrives, or holding them for `ack`), `get`, `cancel`, and the
client's ticks (leader finding, re-sends). It records what a test checks: every body delivered,
in order, with its redelivered flag and x-delivery-count, the confirmed and rejected seqs, and
per-message confirm latency.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any

from actors.messages.calls import Reply
from actors.messages.channel_queue import (
    Cancel, ChannelDown, Confirm, Consume, ConsumerCancelled, Deliver, Get, Publish, Published, Rejected, Settle,
)
from actors.quorum.client import QuorumClient
from actors.quorum.front import DELIVERY_COUNT_HEADER
from actors.runtime.address import Address
from wire.properties import HEADER_PROPS_OFFSET, BasicProperties, encode_content_header

tick_s = 0.05


def header_for(body: bytes) -> bytes:
    return encode_content_header(60, len(body), BasicProperties(delivery_mode=2))


class Delivery:
    __slots__ = ("tag", "msg_id", "redelivered", "body", "delivery_count")

    def __init__(self, tag: str, msg_id: int, redelivered: bool, header: bytes, body: bytes) -> None:
        self.tag, self.msg_id, self.redelivered, self.body = tag, msg_id, redelivered, body
        headers = BasicProperties.decode(header, HEADER_PROPS_OFFSET).headers if redelivered else None
        self.delivery_count = (headers or {}).get(DELIVERY_COUNT_HEADER, 0)


class QueueDriver:
    def __init__(self, runtime: Any, name: str, members: list[str], leader: str | None = None,
                 *, retry_ticks: int = 20) -> None:
        self.runtime = runtime
        self.me = runtime.spawn(name, self)
        self.client = QuorumClient(members, leader, retry_ticks=retry_ticks)
        self.loop = asyncio.get_running_loop()
        self.next_seq = 1
        self.sent_at: dict[int, int] = {}  # confirm seq -> perf_counter_ns at publish
        self.confirmed = 0  # every seq up to here is confirmed
        self.rejected: list[int] = []
        self.latencies_ns: list[int] = []
        self.deliveries: list[Delivery] = []
        self.auto_ack: dict[str, bool] = {}
        self.to_ack: list[int] = []
        self.cancelled: list[str] = []
        self._rid = 0
        self._calls: dict[int, asyncio.Future] = {}
        self._progress = asyncio.Event()
        self._acking = False
        self._addresses: dict[str, Address] = {}
        self._handle = self.loop.call_later(tick_s, self._tick)

    def close(self) -> None:
        self._handle.cancel()

    # -- channel-side actions --------------------------------------------------------------------
    def publish(self, bodies: list[bytes]) -> list[int]:
        """Publish in confirm mode; the confirm seqs given."""
        seqs = list(range(self.next_seq, self.next_seq + len(bodies)))
        self.next_seq += len(bodies)
        now = time.perf_counter_ns()
        batch = []
        for seq, body in zip(seqs, bodies):
            self.sent_at[seq] = now
            batch.append(Published(seq, "", "q", header_for(body), body))
        self.client.send(Publish(batch))
        self._pump()
        return seqs

    async def consume(self, tag: str, prefetch: int, *, auto_ack: bool = True) -> None:
        self.auto_ack[tag] = auto_ack
        await self._call(lambda rid: Consume(rid, tag, True, prefetch, False, {}))

    async def cancel(self, tag: str) -> None:
        await self._call(lambda rid: Cancel(rid, tag))

    async def get(self, ack: bool = True) -> Any:
        return await self._call(lambda rid: Get(rid, ack))

    def ack(self, msg_ids: list[int]) -> None:
        self.client.send(Settle(list(msg_ids), [], []))
        self._pump()

    def requeue(self, msg_ids: list[int]) -> None:
        self.client.send(Settle([], list(msg_ids), []))
        self._pump()

    def channel_down(self) -> None:
        self.client.send(ChannelDown())
        self._pump()

    async def _call(self, request: Any) -> Any:
        self._rid += 1
        future = self.loop.create_future()
        self._calls[self._rid] = future
        self.client.send(request(self._rid))
        self._pump()
        reply = await future
        if reply.error is not None:
            raise RuntimeError(reply.error.text)
        return reply.value

    async def until(self, condition: Any, timeout_s: float = 30.0) -> None:
        """Wait until `condition()` holds, re-checking after every message."""
        deadline = self.loop.time() + timeout_s
        while not condition():
            self._progress.clear()
            left = deadline - self.loop.time()
            if left <= 0:
                raise TimeoutError("condition not met in time")
            try:
                await asyncio.wait_for(self._progress.wait(), left)
            except TimeoutError:
                pass

    def bodies(self) -> list[bytes]:
        return [d.body for d in self.deliveries]

    # -- the actor -------------------------------------------------------------------------------
    def receive(self, sender: Address, msg: Any) -> None:
        self.client.receive(str(sender), msg)
        self._pump()

    def _ack_turn(self) -> None:
        self._acking = False
        acks, self.to_ack = self.to_ack, []
        self.client.send(Settle(acks, [], []))
        self._pump()

    def _tick(self) -> None:
        self._handle = self.loop.call_later(tick_s, self._tick)
        self.client.tick()
        self._pump()

    def _pump(self) -> None:
        out, up = self.client.take()
        for msg in up:
            self._up(msg)
        if self.to_ack and not self._acking:  # the acks of a loop turn go as one Settle, as a channel's
            self._acking = True
            self.loop.call_soon(self._ack_turn)
        for send in out:
            to = self._addresses.get(send.to)
            if to is None:
                to = self._addresses[send.to] = Address.parse(send.to)
            self.runtime.send(to, send.msg, sender=self.me)
        self._progress.set()

    def _up(self, msg: Any) -> None:
        kind = type(msg)
        if kind is Deliver:
            for msg_id, redelivered, _exchange, _rk, header, body in msg.messages:
                self.deliveries.append(Delivery(msg.consumer_tag, msg_id, redelivered, header, body))
                if self.auto_ack.get(msg.consumer_tag):
                    self.to_ack.append(msg_id)
        elif kind is Confirm:
            now = time.perf_counter_ns()
            for seq in range(self.confirmed + 1, msg.upto + 1):
                started = self.sent_at.pop(seq, None)
                if started is not None:
                    self.latencies_ns.append(now - started)
            self.confirmed = max(self.confirmed, msg.upto)
        elif kind is Rejected:
            self.rejected.extend(msg.seqs)
        elif kind is Reply:
            future = self._calls.pop(msg.rid, None)
            if future is not None and not future.done():
                future.set_result(msg)
        elif kind is ConsumerCancelled:
            self.cancelled.append(msg.consumer_tag)
