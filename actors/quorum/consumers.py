"""Consumers of a quorum queue: credit, unacked deliveries, and the order they are served in.

Theory of operation (rabbit_fifo's #consumer{}, service queue and waiting list, RabbitMQ 4.0):
a consumer is (channel, tag). It may receive while its status is UP and it has credit; each
delivery takes one credit. An acking consumer keeps its deliveries in `checked` (msg_id -> entry)
until they are settled, returned or discarded, and each of those gives a credit back, up to its
prefetch (rabbit_fifo's simple_prefetch). A no-ack consumer's deliveries are settled as they leave,
so only a `Credit` from its channel gives it more. A consumer with `once` set (a basic.get's
one-message consumer, or a cancelled one) is removed as soon as it has no credit and nothing
unacked.

`ServiceQueue` orders the consumers waiting for messages: the highest consumer priority first and
round-robin within a priority, one message per turn (a served consumer goes to the back of its
level if it still has credit). Entries are not removed when a consumer loses credit or goes away;
they are skipped when popped, as in rabbit_fifo. With single active consumer on, the consumers not
active wait in a list kept sorted by priority (highest first), then credit (most first), then the
order they attached in (`attached`, the Raft index of their checkout).

Invariants: a key is in the service queue at most once; `credit >= 0`; a waiting consumer has
nothing unacked and status UP.
"""
from __future__ import annotations

from collections import deque

Key = tuple[str, str]  # (channel, consumer tag)

UP = "up"
CANCELLED = "cancelled"
QUIESCING = "quiescing"  # a single active consumer giving way to a higher priority one
CREDIT_UNLIMITED = 2000  # prefetch 0 means this much (rabbit_fifo_client ?UNLIMITED_PREFETCH_COUNT)
_STATUSES = {status: status for status in (UP, CANCELLED, QUIESCING)}  # compared with `is`


class Consumer:
    __slots__ = ("priority", "ack", "prefetch", "credit", "status", "once", "attached",
                 "exclusive", "delivered", "checked")

    def __init__(self, priority: int, ack: bool, prefetch: int, credit: int, *, attached: int,
                 once: bool = False, exclusive: bool = False) -> None:
        self.priority = priority
        self.ack = ack
        self.prefetch = prefetch
        self.credit = credit
        self.status = UP
        self.once = once
        self.attached = attached
        self.exclusive = exclusive
        self.delivered = 0  # deliveries so far (Deliver.delivered_before)
        self.checked: dict[int, tuple[int, int, int, int]] = {}

    def refill(self, settled: int) -> None:
        """Credit back for settled/returned deliveries (simple prefetch; not for once/no-ack)."""
        if self.ack and not self.once:
            self.credit = min(self.prefetch, self.credit + settled)

    def reconfigure(self, priority: int, ack: bool, prefetch: int, exclusive: bool) -> None:
        """A checkout of an existing key (e.g. re-consuming after a cancel): up again, with its
        new settings, and credit for what its prefetch leaves beside its unacked deliveries."""
        self.priority, self.ack, self.prefetch, self.exclusive = priority, ack, prefetch, exclusive
        self.once = False
        self.status = UP
        self.credit = max(0, prefetch - len(self.checked))

    def to_value(self) -> list:
        return [self.priority, self.ack, self.prefetch, self.credit, self.status, self.once,
                self.attached, self.exclusive, self.delivered,
                [[msg_id, *entry] for msg_id, entry in self.checked.items()]]

    @classmethod
    def from_value(cls, value: list) -> Consumer:
        priority, ack, prefetch, credit, status, once, attached, exclusive, delivered, checked = value
        con = cls(priority, ack, prefetch, credit, attached=attached, once=once, exclusive=exclusive)
        con.status, con.delivered = _STATUSES[status], delivered
        con.checked = {c[0]: (c[1], c[2], c[3], c[4]) for c in checked}
        return con


class ServiceQueue:
    """Consumers waiting for messages: highest priority first, round-robin within one."""

    __slots__ = ("_levels", "_order", "_members")

    def __init__(self) -> None:
        self._levels: dict[int, deque[Key]] = {}
        self._order: list[int] = []  # the priorities in _levels, highest first
        self._members: set[Key] = set()

    def push(self, key: Key, priority: int) -> None:
        if key not in self._members:
            self._members.add(key)
            level = self._levels.get(priority)
            if level is None:
                self._levels[priority] = level = deque()
                self._order.append(priority)
                self._order.sort(reverse=True)
            level.append(key)

    def pop(self) -> Key | None:
        if not self._order:
            return None
        priority = self._order[0]
        level = self._levels[priority]
        key = level.popleft()
        if not level:
            del self._levels[priority]
            del self._order[0]
        self._members.discard(key)
        return key

    def to_value(self) -> list:
        return [[priority, [list(k) for k in level]] for priority, level in self._levels.items()]

    @classmethod
    def from_value(cls, value: list) -> ServiceQueue:
        queue = cls()
        for priority, keys in value:
            queue._levels[priority] = deque(tuple(k) for k in keys)
            queue._members.update(tuple(k) for k in keys)
        queue._order = sorted(queue._levels, reverse=True)
        return queue


def waiting_order(item: tuple[Key, Consumer]) -> tuple[int, int, int]:
    """Sort key of the single-active-consumer waiting list (rabbit_fifo:sort_waiting/1)."""
    con = item[1]
    return -con.priority, -con.credit, con.attached
