"""The ready list of a durable classic queue: `ReadyList`'s interface over a `DurableBacking`.

Theory of operation: the queue core takes, requeues and counts ready messages through one small
interface (`ready.py`); this class gives it the same interface over the backing's variable queue,
so a durable queue keeps its ready messages in RAM or on disk as the backing's paging decides, and
a queue of millions of messages holds only the RAM target's worth of bodies. The backing also keeps
every message it handed out until the core says where it went: `forget(ids)` when it left for good
(acked, discarded, dead-lettered, delivered without ack), `requeue(messages)` when it comes back.
The core calls `forget` for the in-memory list too, where it costs nothing.

Invariants: len() is the backing's ready count; `body_bytes` is the body bytes of the ready
messages published or requeued in this run (what x-max-length-bytes limits). Messages recovered from
disk are counted by number only: their sizes are not read back, so until they are consumed
x-max-length-bytes undercounts them (clamped at zero).

IO happens inside the backing (appends, reads of paged-out bodies); the durability point, `flush`,
is the shell's (actor.py), never this class's.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from actors.queue.message import BODY, MSG_ID, Message

if TYPE_CHECKING:  # persist.classic imports actors.queue.message: a runtime import would be a cycle
    from persist.classic.durable_queue import DurableBacking


class BackedReady:
    __slots__ = ("backing", "_body_bytes")

    def __init__(self, backing: DurableBacking) -> None:
        self.backing = backing
        self._body_bytes = 0

    def __len__(self) -> int:
        return len(self.backing.vq)

    @property
    def bytes(self) -> int:
        """Payload bytes held in RAM (header + body of the ready messages whose body is loaded)."""
        return self.backing.vq.alpha_bytes

    @property
    def body_bytes(self) -> int:
        return self._body_bytes

    def head_id(self) -> int:
        return self.backing.vq.head_seq()

    def extend(self, messages: list[Message], body_bytes: int) -> None:
        self.backing.publish(messages)
        self._body_bytes += body_bytes

    def requeue(self, messages: Iterable[Message]) -> None:
        ids = []
        for message in messages:
            ids.append(message[MSG_ID])
            self._body_bytes += len(message[BODY])
        self.backing.requeue(ids)

    def take(self, n: int) -> list[Message]:
        out = self.backing.fetch(n)
        if out:
            self._body_bytes = max(0, self._body_bytes - sum([len(m[BODY]) for m in out]))
        return out

    def forget(self, msg_ids: Sequence[int]) -> None:
        if msg_ids:
            self.backing.ack(msg_ids)

    def clear(self) -> int:
        self._body_bytes = 0
        return self.backing.purge()
