"""The classic queue actor: a thin shell that feeds mailbox messages to `ClassicQueue` and sends
what its effects say. Message kinds (from channels unless noted):

publish (batch) | consume (rid, tag, ack_required, credit, exclusive, args) | cancel (rid, tag) |
grant ((tag, n), ...) | settle (acked, requeued, discarded) | get (rid, ack_required) |
channel_down () | purge (rid,) | stats (rid,) and delete (rid, if_unused, if_empty) from the node.

Replies use actors/replies.py. A reply to a call is sent before the deliveries that call caused, so
the channel has answered consume-ok before the first basic.deliver.
"""
from __future__ import annotations

from typing import Any, Callable

import structlog

from actors.placement import NODE
from actors.queue.core import ClassicQueue
from actors.queue.effects import AutoDelete, Confirmed, ConsumerCancelled, Deliver
from actors.replies import err, ok
from actors.runtime.address import Address
from wire.errors import AmqpError

log = structlog.get_logger("warren.queue")


class QueueActor:
    def __init__(self, runtime: Any, core: ClassicQueue, on_deleted: Callable[[str], None]) -> None:
        self.runtime = runtime
        self.core = core
        self.name = f"q:{core.vhost}:{core.name}"
        self.address = Address(runtime.host, self.name)
        self._on_deleted = on_deleted

    def _send(self, to: Address, kind: str, body: Any) -> None:
        self.runtime.send(to, kind, body, sender=self.address)

    def _effects(self, effects: list) -> None:
        for e in effects:
            if isinstance(e, Deliver):
                self._send(e.channel, "deliver", (e.consumer_tag, e.messages))
            elif isinstance(e, Confirmed):
                self._send(e.channel, "confirm", e.upto)
            elif isinstance(e, ConsumerCancelled):
                self._send(e.channel, "cancelled", e.consumer_tag)
            elif isinstance(e, AutoDelete):
                self._send(NODE, "autodelete", (self.core.vhost, self.core.name))

    def receive(self, sender: Address, kind: str, body: Any) -> None:
        core = self.core
        if kind == "publish":
            self._effects(core.publish(sender, body))
        elif kind == "settle":
            acked, requeued, discarded = body
            self._effects(core.settle(sender, acked=acked, requeued=requeued, discarded=discarded))
        elif kind == "grant":
            for tag, n in body:
                self._effects(core.grant(sender, tag, n))
        elif kind == "consume":
            rid, tag, ack_required, credit, exclusive, args = body
            res = core.consume(sender, tag, ack_required=ack_required, credit=credit, exclusive=exclusive,
                               arguments=args)
            if isinstance(res, AmqpError):
                self._send(sender, "reply", (rid, err(res)))
                return
            self._send(sender, "reply", (rid, ok()))
            self._effects(res)
        elif kind == "cancel":
            rid, tag = body
            effects = core.cancel(sender, tag)
            self._send(sender, "reply", (rid, ok()))
            self._effects(effects)
        elif kind == "get":
            rid, ack_required = body
            self._send(sender, "reply", (rid, ok(core.get(sender, ack_required=ack_required))))
        elif kind == "channel_down":
            self._effects(core.channel_down(sender))
        elif kind == "purge":
            self._send(sender, "reply", (body[0], ok(core.purge())))
        elif kind == "stats":
            self._send(sender, "reply", (body[0], ok((core.message_count, core.consumer_count))))
        elif kind == "delete":
            rid, if_unused, if_empty = body
            res = core.delete(if_unused=if_unused, if_empty=if_empty)
            if isinstance(res, AmqpError):
                self._send(sender, "reply", (rid, err(res)))
                return
            count, effects = res
            self._effects(effects)
            self._send(sender, "reply", (rid, ok(count)))
            self._on_deleted(self.name)
        else:
            log.warning("queue.unknown_kind", queue=self.name, kind=kind)


class QueueManager:
    """Creates queue actors on this host when the node asks (create (rid, vhost, name, auto_delete, args))."""

    def __init__(self, runtime: Any, name: str) -> None:
        self.runtime = runtime
        self.address = Address(runtime.host, name)
        self.queues: dict[str, QueueActor] = {}

    def _deleted(self, name: str) -> None:
        self.queues.pop(name, None)
        self.runtime.remove(name)

    def receive(self, sender: Address, kind: str, body: Any) -> None:
        if kind != "create":
            log.warning("qmgr.unknown_kind", kind=kind)
            return
        rid, vhost, name, auto_delete, arguments = body
        actor = QueueActor(self.runtime, ClassicQueue(vhost, name, auto_delete=auto_delete,
                                                      arguments=dict(arguments)), self._deleted)
        if actor.name not in self.queues:
            self.queues[actor.name] = actor
            self.runtime.spawn(actor.name, actor)
        self.runtime.send(sender, "reply", (rid, ok()), sender=self.address)

    def stats(self) -> list[dict]:
        return [a.core.stats() for a in self.queues.values()]
