"""DeadLetterActor: the quorum host's dead-letter worker (actors/quorum/dead_letter_worker.py), an
actor so that target queues' confirms come back to it.

The host's members hand it what their fronts dead-lettered (`from_member`, a call inside the host
process); it routes with the host's registry replica (the queue host's `qrouter` twin, kept current by
the node) and sends the copies: to a classic queue directly, to a quorum queue through a
QuorumClient per queue (actors/channel/quorum_links.py, as a channel does), whose Confirms and
Rejecteds come back here as the queue's. A message confirmed by all its targets is settled by
calling its member (`settle(member_id, msg_ids)`, the host's). The host's ticker calls `tick`:
clients ask who leads when their target went quiet, and unroutable or rejected copies go again.

Its name is new in every incarnation of the host, and shaped as a channel's (`ch:INCARNATION.dlx`,
the host's registry replica's incarnation): a target quorum queue knows a publisher by name and
takes its sequence numbers in order, dropping (and confirming) one it has seen, so a worker that
restarted under the old name with its sequence at 1 would have had its first copies taken for
duplicates, confirmed and settled, and lost. RabbitMQ's worker is a new process, a new enqueuer,
each time. And as a channel of a connection host that restarted, the worker of a quorum host's
earlier incarnation is gone for good: the node tells every quorum host so (HostChannelsGone, by
that incarnation prefix), and the target queues forget its sequence (a ChannelDown), as
rabbit_fifo forgets an enqueuer whose process went down.
"""
from __future__ import annotations

from typing import Any, Callable

import structlog

from actors.channel.quorum_links import QuorumLinks
from actors.messages.channel_queue import Confirm, Rejected
from actors.placement import queue_address
from actors.quorum.dead_letter_worker import DeadLetters, Source
from actors.quorum.front import DeadLetterHanded, DeadLettered, DeadLetterWorkerStopped
from actors.runtime.address import Address
from actors.runtime.clock import now_ms
from effects import Send

log = structlog.get_logger("warren.quorum.dead_letters")

def dead_letters_name(incarnation: int) -> str:
    """The worker's actor name for this incarnation of its host."""
    return f"ch:{incarnation:x}.dlx"

RETRY_TICKS = 4  # a quorum target's client asks who leads after this many host ticks of silence


class DeadLetterActor:
    def __init__(self, runtime: Any, registry: Any, settle: Callable[[str, list[int]], None],
                 incarnation: int) -> None:
        self.runtime = runtime
        self.name = dead_letters_name(incarnation)
        self.me = Address(runtime.host, self.name)
        self.registry = registry
        self.settle = settle
        self.worker = DeadLetters(registry, self._place)
        self.links = QuorumLinks(registry.quorum_members, retry_ticks=RETRY_TICKS)

    def _place(self, vhost: str, name: str) -> Address:
        return queue_address(self.registry.queue_home(vhost, name), vhost, name)

    def from_member(self, member: str, vhost: str, queue: str, e: Any) -> None:
        """What a leading member's front dead-lettered (front.DeadLettered, DeadLetterHanded,
        DeadLetterWorkerStopped)."""
        kind = type(e)
        if kind is DeadLetterWorkerStopped:
            self.worker.forget(member)
            return
        source = Source(member, vhost, queue, e.exchange, e.routing_key)
        if kind is DeadLettered:
            self._send(self.worker.at_most_once(source, e.reason, e.messages, now_ms()))
        elif kind is DeadLetterHanded:
            self._send(self.worker.hand(source, e.items, now_ms()))

    def receive(self, sender: Address, msg: Any) -> None:
        """A target queue's (or quorum member's) answer to the worker's publishes."""
        via = self.links.receive(sender, msg)
        if via is not None:
            queue, ups, sends = via
            self._send(sends)
            for up in ups:
                self._answer(queue, up)
            return
        self._answer(sender, msg)

    def tick(self) -> None:
        self._send(self.links.tick())
        self._send(self.worker.retry(now_ms()))

    def _answer(self, queue: Address, msg: Any) -> None:
        kind = type(msg)
        if kind is Rejected:
            self.worker.rejected(queue, msg.seqs, now_ms())
        elif kind is Confirm:
            for member, msg_ids in self.worker.confirmed(queue, msg.upto).items():
                self.settle(member, msg_ids)
        # anything else a queue may say to a publisher (a ResendFrom went to the client) is not ours

    def _send(self, sends: list[Send]) -> None:
        for e in self.links.route(sends):
            self.runtime.send(e.to, e.msg, sender=self.me, credit=e.credit)
