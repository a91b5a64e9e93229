"""The node actor: owner of the registry (vhosts, exchanges, queues, bindings) and the one that
creates and deletes queue actors.

It is a shell: every decision about names, equivalence, bindings and errors is the Registry's
(actors/metadata). What the shell adds is orchestration, one request at a time in arrival order so
the registry sees a serial history: create the queue actor before answering declare-ok, ask the
queue whether delete's if-unused/if-empty hold before removing it, and publish every change to the
connection hosts' replicas BEFORE replying to the caller. The reply and the change travel the same
node->host pipe, so a channel that got declare-ok routes with a replica that has the queue.

Message kinds: call (rid, op, args) from channels; subscribe from replicas (answered with a
snapshot); autodelete (vhost, name) from queues; connection_closed (owner,) from readers; reply
(rid, result) for the node's own calls.
"""
from __future__ import annotations

import asyncio
from typing import Any

import structlog

from actors.placement import queue_address, queue_host, queue_manager
from actors.replies import err, is_ok, ok
from actors.runtime.address import Address
from wire.errors import AmqpError

log = structlog.get_logger("warren.node")


class NodeActor:
    def __init__(self, runtime: Any, name: str, registry: Any, queue_hosts: int) -> None:
        self.runtime = runtime
        self.address = Address(runtime.host, name)
        self.registry = registry
        self.queue_hosts = queue_hosts
        self.subscribers: set[Address] = set()
        self._pending: dict[int, asyncio.Future] = {}
        self._rid = 0
        self._work: asyncio.Queue = asyncio.Queue()
        self._task = asyncio.get_running_loop().create_task(self._worker())

    # ------------------------------------------------------------------ mailbox
    def receive(self, sender: Address, kind: str, body: Any) -> None:
        if kind == "reply":
            fut = self._pending.pop(body[0], None)
            if fut is not None and not fut.done():
                fut.set_result(body[1])
        elif kind == "subscribe":
            self.subscribers.add(sender)
            self._send(sender, "meta", (self.registry.snapshot(), ()))
        elif kind == "call":
            rid, op, args = body
            self._work.put_nowait((sender, rid, op, tuple(args)))
        elif kind == "autodelete":
            self._work.put_nowait((None, 0, "queue.autodelete", tuple(body)))
        elif kind == "connection_closed":
            self._work.put_nowait((None, 0, "connection.closed", tuple(body)))
        else:
            log.warning("node.unknown_kind", kind=kind)

    def _send(self, to: Address, kind: str, body: Any) -> None:
        self.runtime.send(to, kind, body, sender=self.address)

    async def _call(self, to: Address, kind: str, *args: Any) -> Any:
        self._rid += 1
        fut = asyncio.get_running_loop().create_future()
        self._pending[self._rid] = fut
        self._send(to, kind, (self._rid, *args))
        return await fut

    def _publish(self, changes: list, gone: list[tuple[str, str]] = ()) -> None:
        if changes or gone:
            for sub in self.subscribers:
                self._send(sub, "meta", (changes, list(gone)))

    async def _worker(self) -> None:
        while True:
            sender, rid, op, args = await self._work.get()
            try:
                result = await getattr(self, "_op_" + op.replace(".", "_"))(*args)
            except Exception:  # a bug in one request must not stop the node's metadata service
                log.exception("node.op_failed", op=op)
                result = ("err", 541, f"internal error in {op}", True)
            if sender is not None:
                self._send(sender, "reply", (rid, result))

    # ------------------------------------------------------------------ operations
    @staticmethod
    def _answer(result: Any, value: Any = None) -> tuple:
        return err(result) if isinstance(result, AmqpError) else ok(value)

    async def _op_exchange_declare(self, vhost, name, type_, passive, durable, auto_delete, internal, arguments):
        res, changes = self.registry.declare_exchange(vhost, name, type_, passive=passive, durable=durable,
                                                      auto_delete=auto_delete, internal=internal,
                                                      arguments=arguments)
        self._publish(changes)
        return self._answer(res)

    async def _op_exchange_delete(self, vhost, name, if_unused):
        res, changes = self.registry.delete_exchange(vhost, name, if_unused=if_unused)
        self._publish(changes)
        return self._answer(res)

    async def _op_exchange_bind(self, vhost, destination, source, routing_key, arguments):
        res, changes = self.registry.bind_exchange(vhost, destination, source, routing_key, arguments)
        self._publish(changes)
        return self._answer(res)

    async def _op_exchange_unbind(self, vhost, destination, source, routing_key, arguments):
        res, changes = self.registry.unbind_exchange(vhost, destination, source, routing_key, arguments)
        self._publish(changes)
        return self._answer(res)

    async def _op_queue_bind(self, vhost, queue, exchange, routing_key, arguments, owner):
        res, changes = self.registry.bind_queue(vhost, queue, exchange, routing_key, arguments, owner)
        self._publish(changes)
        return self._answer(res)

    async def _op_queue_unbind(self, vhost, queue, exchange, routing_key, arguments, owner):
        res, changes = self.registry.unbind_queue(vhost, queue, exchange, routing_key, arguments, owner)
        self._publish(changes)
        return self._answer(res)

    async def _op_queue_declare(self, vhost, name, passive, durable, exclusive, auto_delete, arguments, owner):
        rec, changes = self.registry.declare_queue(vhost, name, passive=passive, durable=durable,
                                                   exclusive=exclusive, auto_delete=auto_delete,
                                                   arguments=arguments, owner=owner)
        if isinstance(rec, AmqpError):
            return err(rec)
        if rec.created:
            host = queue_host(vhost, rec.name, self.queue_hosts)
            await self._call(queue_manager(host), "create", vhost, rec.name, rec.auto_delete, rec.arguments)
            self._publish(changes)
            return ok((rec.name, 0, 0))
        self._publish(changes)
        stats = await self._call(queue_address(vhost, rec.name, self.queue_hosts), "stats")
        messages, consumers = stats[1]
        return ok((rec.name, messages, consumers))

    async def _delete_queue(self, vhost: str, name: str, owner: Any, if_unused: bool, if_empty: bool) -> tuple:
        rec = self.registry.check_queue_access(vhost, name, owner)
        if isinstance(rec, AmqpError):
            # deleting a queue that does not exist is not an error in RabbitMQ
            return ok(0) if rec.code == 404 else err(rec)
        return await self._delete_record(rec, if_unused, if_empty)

    async def _delete_record(self, rec: Any, if_unused: bool, if_empty: bool) -> tuple:
        vhost, name = rec.vhost, rec.name
        reply = await self._call(queue_address(vhost, name, self.queue_hosts), "delete", if_unused, if_empty)
        if not is_ok(reply):
            return reply
        res, changes = self.registry.delete_queue(vhost, name, rec.exclusive_owner)
        self._publish(changes, [(vhost, name)])
        return reply

    async def _op_queue_delete(self, vhost, name, if_unused, if_empty, owner):
        return await self._delete_queue(vhost, name, owner, if_unused, if_empty)

    async def _op_queue_autodelete(self, vhost, name):
        rec = next((q for q in self.registry.queues(vhost) if q.name == name), None)
        if rec is None:
            return ok(0)
        return await self._delete_record(rec, True, False)

    async def _op_connection_closed(self, owner):
        records, changes = self.registry.connection_closed(owner)
        for rec in records:
            await self._call(queue_address(rec.vhost, rec.name, self.queue_hosts), "delete", False, False)
        self._publish(changes, [(rec.vhost, rec.name) for rec in records])
        return ok()
