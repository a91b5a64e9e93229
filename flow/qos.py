"""Prefetch (basic.qos) as consumer credit, for one channel.

Theory of operation: a queue delivers to a consumer only against credit the channel granted it (one
credit per message). The channel turns RabbitMQ's prefetch rules into credit:

- a consumer with a per-consumer limit L (basic.qos global=false before basic.consume) may hold at most
  L unacknowledged deliveries: its credit is topped up to ``L - unacked - credit_out`` once that room
  is at least L/4, or whenever the queue holds no credit for it (so a client that waits for more
  messages before acking is never starved). Batching the top-ups turns one grant and one delivery
  message per ack into one per L/4 acks: the queue-channel round trip is paid per batch;
- a channel-wide limit G (basic.qos global=true) bounds the sum over the channel's ack-requiring
  consumers of ``unacked + credit_out``; spare room is handed out round-robin, one credit at a time;
- a consumer with no limit, and every no-ack consumer (RabbitMQ ignores prefetch for them), gets flow
  credit instead: topped up to `flow_credit` once half is used, and only while the socket is writable,
  so a slow client means TCP back-pressure on the queue rather than memory growth in the channel.

Known difference from RabbitMQ: with a channel-wide limit, credit granted to a consumer whose queue is
empty stays with it until it is used or the consumer is cancelled, so it can leave other consumers on
the same channel below the limit. RabbitMQ asks the channel's limiter per delivery instead.

Invariants: credit_out >= 0 and unacked >= 0 for every consumer; for a limited consumer
unacked + credit_out <= L; with G > 0, sum(unacked + credit_out) over ack-requiring consumers <= G
(except right after a basic.qos that lowered G, until deliveries drain).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable

grant_batch_divisor = 4  # a limited consumer's credit is topped up once a quarter of its limit is free


@dataclass(slots=True)
class ConsumerCredit:
    queue: Hashable
    ack_required: bool
    limit: int          # per-consumer prefetch; 0 = unlimited
    unacked: int = 0
    credit_out: int = 0  # granted to the queue, not yet used by a delivery


class QosLedger:
    def __init__(self, flow_credit: int = 400) -> None:
        self.flow_credit = flow_credit
        self.consumer_limit = 0     # basic.qos global=false: applies to consumers created afterwards
        self.channel_limit = 0      # basic.qos global=true
        self._consumers: dict[str, ConsumerCredit] = {}
        self._order: list[str] = []  # round-robin order for channel-wide credit

    def set_qos(self, prefetch_count: int, global_: bool) -> None:
        if global_:
            self.channel_limit = prefetch_count
        else:
            self.consumer_limit = prefetch_count

    def add(self, tag: str, queue: Hashable, ack_required: bool) -> None:
        self._consumers[tag] = ConsumerCredit(queue, ack_required, self.consumer_limit if ack_required else 0)
        self._order.append(tag)

    def remove(self, tag: str) -> None:
        if self._consumers.pop(tag, None) is not None:
            self._order.remove(tag)

    def __contains__(self, tag: str) -> bool:
        return tag in self._consumers

    def delivered(self, tag: str, n: int) -> None:
        c = self._consumers.get(tag)
        if c is None:
            return
        c.credit_out = max(0, c.credit_out - n)
        if c.ack_required:
            c.unacked += n

    def settled(self, tag: str, n: int) -> None:
        c = self._consumers.get(tag)
        if c is not None:
            c.unacked = max(0, c.unacked - n)

    def _limited(self, c: ConsumerCredit) -> bool:
        return c.ack_required and (c.limit > 0 or self.channel_limit > 0)

    def take_grants(self, writable: bool) -> list[tuple[Hashable, str, int]]:
        """Credit to send now, as (queue, consumer_tag, n)."""
        return self._grant(self._consumers, writable)

    def take_grant(self, tag: str, writable: bool) -> int:
        """Credit for consumer `tag` alone (its first grant travels with basic.consume)."""
        grants = self._grant({tag: self._consumers[tag]}, writable)
        return grants[0][2] if grants else 0

    def _grant(self, consumers: dict[str, ConsumerCredit], writable: bool) -> list[tuple[Hashable, str, int]]:
        """Top up `consumers`, recording what is granted; the others keep what they hold."""
        grants: dict[str, int] = {}
        for tag, c in consumers.items():
            if self._limited(c):
                if c.limit > 0:
                    room = c.limit - c.unacked - c.credit_out
                    # batch top-ups while the queue still holds credit; never wait when it holds none
                    due = room >= max(1, c.limit // grant_batch_divisor) or c.credit_out == 0
                    if room > 0 and due and self.channel_limit == 0:
                        grants[tag] = room
            elif writable and c.credit_out <= self.flow_credit // 2:
                grants[tag] = self.flow_credit - c.credit_out
        if self.channel_limit > 0:
            self._share_channel_room(grants, consumers)
        out = []
        for tag, n in grants.items():
            c = self._consumers[tag]
            c.credit_out += n
            out.append((c.queue, tag, n))
        return out

    def _share_channel_room(self, grants: dict[str, int], consumers: dict[str, ConsumerCredit]) -> None:
        held = sum(c.unacked + c.credit_out for c in self._consumers.values() if c.ack_required)
        room = self.channel_limit - held
        if room <= 0:
            return
        eligible = [t for t in self._order if t in consumers and self._limited(self._consumers[t])]
        progressed = True
        while room > 0 and progressed:
            progressed = False
            for tag in eligible:
                if room == 0:
                    break
                c = self._consumers[tag]
                if c.limit and c.unacked + c.credit_out + grants.get(tag, 0) >= c.limit:
                    continue
                grants[tag] = grants.get(tag, 0) + 1
                room -= 1
                progressed = True
        if eligible:  # rotate so the next top-up starts with another consumer
            first = eligible[0]
            self._order.remove(first)
            self._order.append(first)
