"""The ready list of a durable classic queue: `ReadyList`'s interface over a `DurableBacking`.

Theory of operation: the queue core takes, requeues and counts ready messages through one small
interface (`ready.py`); this class gives it the same interface over the backing's variable queue,
so a durable queue keeps its ready messages in RAM or on disk as the backing's paging decides, and
a queue of millions of messages holds only the RAM target's worth of bodies. The backing also keeps
every message it handed out until the core says where it went: `forget(ids)` when it left for good
(acked, discarded, dead-lettered, delivered without ack), `requeue(messages)` when it comes back.
The core calls `forget` for the in-memory list too, where it costs nothing.

Expiry: the core's msg_id -> expires-at map is shared with the backing (`attach_expiry`), which
writes each message's expiry to disk and fills the map for every entry it reads back. The core
checks expiry only at the head, so this class keeps the head's index entry read (and its expiry in
the map) whenever the queue is not empty: at `attach_expiry` (a recovered queue is all on disk) and
after every `take` (the next head may be the first entry of a segment still on disk). Reading it
early costs nothing extra: `take` would read the same segment next.

Invariants: len() is the backing's ready count; `body_bytes` is the body bytes of every ready
message, recovered ones included (the variable queue counts them, from the sizes in the queue
index): what x-max-length-bytes limits.

IO happens inside the backing (appends, reads of paged-out bodies); the durability point, `flush`,
is the shell's (actor.py), never this class's.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from persist.classic.message import MSG_ID, Message

if TYPE_CHECKING:  # persist.classic imports persist.classic.message: a runtime import would be a cycle
    from persist.classic.durable_queue import DurableBacking


class BackedReady:
    __slots__ = ("backing",)

    def __init__(self, backing: DurableBacking) -> None:
        self.backing = backing

    def __len__(self) -> int:
        return len(self.backing.vq)

    @property
    def bytes(self) -> int:
        """Payload bytes held in RAM (header + body of the ready messages whose body is loaded)."""
        return self.backing.vq.alpha_bytes

    @property
    def body_bytes(self) -> int:
        return self.backing.vq.body_bytes

    def attach_expiry(self, expiry: dict[int, int]) -> None:
        """Share the core's msg_id -> expires-at map with the backing; read the head back."""
        self.backing.attach_expiry(expiry)
        self._read_head()

    def _read_head(self) -> None:
        vq = self.backing.vq
        if len(vq):
            vq.head_seq()

    def head_id(self) -> int:
        return self.backing.vq.head_seq()

    def extend(self, messages: list[Message], body_bytes: int) -> None:
        self.backing.publish(messages)  # the backing counts body bytes itself

    def pass_on(self, messages: list[Message], body_bytes: int) -> list[Message]:
        self.backing.publish_taken(messages)
        return messages

    def requeue(self, messages: Iterable[Message]) -> None:
        self.backing.requeue([message[MSG_ID] for message in messages])

    def take(self, n: int) -> list[Message]:
        out = self.backing.fetch(n)
        self._read_head()
        return out

    def forget(self, msg_ids: Sequence[int]) -> None:
        if msg_ids:
            self.backing.ack(msg_ids)

    def clear(self) -> int:
        return self.backing.purge()
