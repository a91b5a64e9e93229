"""The ready list of a non-durable classic queue: in RAM until paging needs its backing.

Theory of operation: a non-durable queue's messages are all transient, so its `DurableBacking`
(durable=False) only matters when bodies must leave RAM: in lazy mode, or while the node's memory
monitor sets a RAM target. Until then the queue runs on a plain `ReadyList`, and the hot path (a
transient auto-ack queue whose consumers keep up) pays one branch per batch, not the backing's
per-message bookkeeping. "Spilling" moves the ready messages into the backing, in msg_id order, and
from then on new messages go there; when neither lazy mode nor a target holds any more and the
backing has handed back everything (nothing ready, nothing unacked in it), the queue returns to RAM.

Ownership of a taken (unacknowledged) message: the backing must see `forget`/`requeue` for exactly
the messages it handed out. Every message the backing took in during the current spill has an id
>= `_backed_from` (the first id it got: messages arrive in id order, and spilling moves the ReadyList
over front to back); everything taken from RAM before has a lower id. So, while spilled, ids below
`_backed_from` are RAM's: their requeue goes to the RAM list (which then only holds such requeued
messages, all below the backing's ids, so RAM ++ backing is still the ready order) and their forget
is a no-op. Returning to RAM requires the backing to hold no unacked message, so in RAM mode every
taken message is RAM's.

Invariants: while spilled, every id in `_ram` < `_backed_from` <= every id in the backing;
len() = len(_ram) + len(backing's ready list). IO happens inside the backing, as for `BackedReady`.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from persist.classic.backed import BackedReady
from persist.classic.message import BODY, MSG_ID, Message
from persist.classic.ready import ReadyList

if TYPE_CHECKING:  # persist.classic imports persist.classic.message: a runtime import would be a cycle
    from persist.classic.durable_queue import BackingStats, DurableBacking


class SpillReady:
    """`ReadyList`'s interface: RAM while nothing pages, the backing (`BackedReady`) while it does."""

    __slots__ = ("backing", "_ram", "_backed", "_spilled", "_backed_from", "_lazy", "_target")

    def __init__(self, backing: DurableBacking, *, lazy: bool = False) -> None:
        assert not backing.durable, "a durable queue's messages belong in its backing from the start"
        self.backing = backing
        self._ram = ReadyList()
        self._backed = BackedReady(backing)
        self._spilled = False
        self._backed_from: int | None = None
        self._lazy = lazy
        self._target: int | None = None
        if lazy:
            self._spill()

    @property
    def spilled(self) -> bool:
        return self._spilled

    # -- the ready-list interface -----------------------------------------------------------------
    def __len__(self) -> int:
        if self._spilled:
            return len(self._ram) + len(self._backed)
        return len(self._ram)

    @property
    def bytes(self) -> int:
        return self._ram.bytes + (self._backed.bytes if self._spilled else 0)

    @property
    def body_bytes(self) -> int:
        return self._ram.body_bytes + (self._backed.body_bytes if self._spilled else 0)

    def attach_expiry(self, expiry: dict[int, int]) -> None:
        """Share the core's msg_id -> expires-at map with both lists (the backing keeps it on disk)."""
        self._ram.attach_expiry(expiry)
        self._backed.attach_expiry(expiry)

    def head_id(self) -> int:
        return self._ram.head_id() if self._ram or not self._spilled else self._backed.head_id()

    def extend(self, messages: list[Message], body_bytes: int) -> None:
        if not self._spilled:
            self._ram.extend(messages, body_bytes)
            return
        if self._backed_from is None and messages:
            self._backed_from = messages[0][MSG_ID]
        self._backed.extend(messages, body_bytes)

    def pass_on(self, messages: list[Message], body_bytes: int) -> list[Message]:
        if not self._spilled:
            return self._ram.pass_on(messages, body_bytes)
        self.extend(messages, body_bytes)
        return self.take(len(messages))

    def requeue(self, messages: Iterable[Message]) -> None:
        if not self._spilled:
            self._ram.requeue(messages)
            return
        ram: list[Message] = []
        backed: list[Message] = []
        start = self._backed_from
        for message in messages:
            (ram if start is None or message[MSG_ID] < start else backed).append(message)
        if ram:
            self._ram.requeue(ram)
        if backed:
            self._backed.requeue(backed)

    def take(self, n: int) -> list[Message]:
        if not self._spilled:
            return self._ram.take(n)
        out = self._ram.take(n) if self._ram else []
        if len(out) < n:
            out.extend(self._backed.take(n - len(out)))
        return out

    def forget(self, msg_ids: Sequence[int]) -> None:
        if not self._spilled or self._backed_from is None:
            return
        start = self._backed_from
        mine = [i for i in msg_ids if i >= start]
        if mine:
            self._backed.forget(mine)
            self._maybe_unspill()

    def clear(self) -> int:
        n = self._ram.clear()
        if self._spilled:
            n += self._backed.clear()
            self._maybe_unspill()
        return n

    # -- paging ------------------------------------------------------------------------------------
    @property
    def ram_messages(self) -> int:
        """Ready messages whose body is in RAM (what a RAM target limits)."""
        return len(self._ram) + (self.backing.vq.alpha_count if self._spilled else 0)

    def set_ram_target(self, max_messages: int | None, max_bytes: int | None = None) -> None:
        self._target = max_messages
        if max_messages is not None or max_bytes is not None:
            self._spill()
        self.backing.set_ram_target(max_messages, max_bytes)
        self._maybe_unspill()

    def set_lazy(self, lazy: bool) -> None:
        self._lazy = lazy
        if lazy:
            self._spill()
        self.backing.set_lazy(lazy)
        self._maybe_unspill()

    def _spill(self) -> None:
        """Move the RAM list into the backing, front to back; new messages follow it there.
        Requeued messages below what the backing already numbered (taken before an earlier spill)
        stay in RAM, in front."""
        if self._spilled:
            return
        self._spilled = True
        self._backed_from = None
        ram = self._ram
        messages = ram.take(len(ram))
        floor = self.backing.next_msg_id
        keep = [m for m in messages if m[MSG_ID] < floor]
        move = messages[len(keep):]
        if keep:
            ram.requeue(keep)
        if move:
            self.extend(move, sum([len(m[BODY]) for m in move]))

    def _maybe_unspill(self) -> None:
        """Back to RAM once nothing asks for paging and the backing holds nothing ready or unacked;
        its flush then deletes the index segments that paging wrote."""
        if (not self._spilled or self._lazy or self._target is not None or len(self._backed)
                or self.backing.stats().unacked):
            return
        self._spilled = False
        self._backed_from = None
        self.backing.flush()

    def stats(self) -> BackingStats:
        """The backing's figures with the RAM list's messages added (all of them in RAM)."""
        b = self.backing.stats()
        ram = len(self._ram)
        return type(b)(b.ready + ram, b.unacked, b.ram_messages + ram,
                       b.ram_bytes + self._ram.bytes, b.ram_index_entries + ram,
                       b.disk_only_messages, self._lazy, 0)
