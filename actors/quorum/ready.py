"""The ready messages of a quorum queue: compact columns, two priority levels, and the returns.

Theory of operation (rabbit_fifo_q and rabbit_fifo's `returns`, RabbitMQ 4.0): a ready message is
its Raft index plus a small header - body size, expiry (absolute ms, NO_EXPIRY when none) and
delivery count. The body stays in the Raft log. Three FIFOs hold them:
- `returns`: messages given back by consumers; they go out first ("near the head"). A plain deque
  of (index, size, expiry, count) tuples: it holds what consumers had unacked, so it stays small.
- `high` and `normal`: enqueued messages (priority above 4 is high), and, in `normal`, messages
  requeued to the back with a new index. Each is a `Column`: chunks of `CHUNK_ENTRIES` entries
  kept as parallel arrays (8 bytes of index, 4 of size, and 8 of expiry only in chunks where some
  message expires), delivery counts in a dict for the few messages that have one. A backlog of
  fresh messages costs 12 bytes each (20 with a TTL), not the ~100 of a tuple per message.
Which level goes next is rabbit_fifo_q's 2:1 fair share: a turn counter cycles 0, 1, 2 on every
take from a level; on turn 2 the normal level goes unless the high level's head is older (a lower
index), otherwise the high level goes whenever it has messages.

Invariants: indexes in a column ascend (they are appended in log order); `len` and `bytes` are the
sums over the three FIFOs. Every message that leaves a column is added to `tracked`, the set of
live indexes held outside the columns (returns, consumers' unacked, dead-letter holding), so the
columns' heads and `tracked` together name every live index. Left out: per-level counts in stats
(cheap to add, not asked for yet).
"""
from __future__ import annotations

import sys
from array import array
from collections import deque
from typing import Iterator

CHUNK_ENTRIES = 4096
NO_EXPIRY = -1
PRIORITY_TURNS = 2  # rabbit_fifo_q's ?WEIGHT: 2 high priority messages for 1 normal one
SIZE_MAX_BYTES = 2**32 - 1  # the size column is 32-bit; RabbitMQ caps messages at 512 MiB

# (raft index, body size, expiry ms or NO_EXPIRY, delivery count)
Entry = tuple[int, int, int, int]


def _little_endian(values: array) -> bytes:
    if sys.byteorder == "big":
        values = array(values.typecode, values)
        values.byteswap()
    return values.tobytes()


def _from_little_endian(typecode: str, data: bytes) -> array:
    values = array(typecode, data)
    if sys.byteorder == "big":
        values.byteswap()
    return values


class _Chunk:
    __slots__ = ("index", "size", "expiry")

    def __init__(self, index: array | None = None, size: array | None = None,
                 expiry: array | None = None) -> None:
        self.index = index if index is not None else array("q")
        self.size = size if size is not None else array("I")
        self.expiry = expiry


class Column:
    """A FIFO of entries with ascending indexes, stored as chunked arrays."""

    __slots__ = ("_chunks", "_head", "_len", "bytes", "_counts")

    def __init__(self) -> None:
        self._chunks: deque[_Chunk] = deque()
        self._head = 0  # offset of the first entry in _chunks[0]
        self._len = 0
        self.bytes = 0
        self._counts: dict[int, int] = {}  # index -> delivery count, only where it is not 0

    def __len__(self) -> int:
        return self._len

    def append(self, index: int, size: int, expiry: int, count: int) -> None:
        assert 0 <= size <= SIZE_MAX_BYTES, size
        chunks = self._chunks
        if not chunks or len(chunks[-1].index) >= CHUNK_ENTRIES:
            chunks.append(_Chunk())
        tail = chunks[-1]
        if expiry != NO_EXPIRY:
            if tail.expiry is None:
                tail.expiry = array("q", [NO_EXPIRY]) * len(tail.index)
            tail.expiry.append(expiry)
        elif tail.expiry is not None:
            tail.expiry.append(NO_EXPIRY)
        tail.index.append(index)
        tail.size.append(size)
        if count:
            self._counts[index] = count
        self._len += 1
        self.bytes += size

    def head_index(self) -> int:
        return self._chunks[0].index[self._head]

    def head_expiry(self) -> int:
        expiry = self._chunks[0].expiry
        return NO_EXPIRY if expiry is None else expiry[self._head]

    def popleft(self) -> Entry:
        chunk, head = self._chunks[0], self._head
        index, size = chunk.index[head], chunk.size[head]
        expiry = NO_EXPIRY if chunk.expiry is None else chunk.expiry[head]
        count = self._counts.pop(index, 0) if self._counts else 0
        head += 1
        if head == len(chunk.index):
            self._chunks.popleft()
            head = 0
        self._head = head
        self._len -= 1
        self.bytes -= size
        return index, size, expiry, count

    def clear(self) -> None:
        self._chunks.clear()
        self._head = self._len = self.bytes = 0
        self._counts.clear()

    def expiring(self) -> int:
        """How many entries have an expiry (a walk: for restoring)."""
        head, total = self._head, 0
        for chunk in self._chunks:
            if chunk.expiry is not None:
                total += len(chunk.expiry) - head - chunk.expiry[head:].count(NO_EXPIRY)
            head = 0
        return total

    def indexes(self) -> Iterator[int]:
        head = self._head
        for chunk in self._chunks:
            yield from chunk.index[head:]
            head = 0

    def _columns(self) -> tuple[array, array, array | None]:
        index, size = array("q"), array("I")
        timed = any(chunk.expiry is not None for chunk in self._chunks)
        expiry = array("q") if timed else None
        head = self._head
        for chunk in self._chunks:
            index.extend(chunk.index[head:])
            size.extend(chunk.size[head:])
            if expiry is not None:
                expiry.extend(chunk.expiry[head:] if chunk.expiry is not None
                              else array("q", [NO_EXPIRY]) * (len(chunk.index) - head))
            head = 0
        return index, size, expiry

    def to_value(self) -> list:
        index, size, expiry = self._columns()
        return [_little_endian(index), _little_endian(size),
                None if expiry is None else _little_endian(expiry), list(self._counts.items())]

    @classmethod
    def from_value(cls, value: list) -> Column:
        column = cls()
        index = _from_little_endian("q", value[0])
        size = _from_little_endian("I", value[1])
        expiry = None if value[2] is None else _from_little_endian("q", value[2])
        for start in range(0, len(index), CHUNK_ENTRIES):
            end = start + CHUNK_ENTRIES
            column._chunks.append(_Chunk(index[start:end], size[start:end],
                                         None if expiry is None else expiry[start:end]))
        column._len = len(index)
        column.bytes = sum(size)
        column._counts = {i: c for i, c in value[3]}
        return column


class ReadyQueue:
    """Returns first, then the two levels in 2:1 fair share; see the module docstring."""

    __slots__ = ("high", "normal", "returns", "returns_bytes", "turn", "tracked", "count", "expiring")

    def __init__(self, tracked: set[int]) -> None:
        self.high = Column()
        self.normal = Column()
        self.returns: deque[Entry] = deque()
        self.returns_bytes = 0
        self.turn = 0
        self.tracked = tracked
        self.count = 0     # ready messages (the hot paths read this, not len())
        self.expiring = 0  # how many of them have an expiry: none, and no head needs a look

    def __len__(self) -> int:
        return self.count

    @property
    def bytes(self) -> int:
        return self.returns_bytes + self.high.bytes + self.normal.bytes

    def enqueue(self, index: int, size: int, expiry: int, count: int, high: bool) -> None:
        (self.high if high else self.normal).append(index, size, expiry, count)
        self.count += 1
        if expiry != NO_EXPIRY:
            self.expiring += 1

    def give_back(self, entry: Entry) -> None:
        """A consumer's message returns near the head (behind earlier returns)."""
        self.returns.append(entry)
        self.returns_bytes += entry[1]
        self.count += 1
        if entry[2] != NO_EXPIRY:
            self.expiring += 1

    def _level(self) -> Column | None:
        high, normal = self.high, self.normal
        if high._len:
            if normal._len and self.turn == PRIORITY_TURNS and normal.head_index() < high.head_index():
                return normal
            return high
        return normal if normal._len else None

    def next_expiry(self) -> int | None:
        """The expiry of the message `take` would return (NO_EXPIRY), None when empty."""
        if not self.expiring:
            return NO_EXPIRY if self.count else None
        if self.returns:
            return self.returns[0][2]
        level = self._level()
        return None if level is None else level.head_expiry()

    def take(self) -> Entry | None:
        """The next message, now tracked; None when there is none."""
        if self.returns:
            entry = self.returns.popleft()
            self.returns_bytes -= entry[1]
        else:
            level = self._level()
            if level is None:
                return None
            self.turn = 0 if self.turn == PRIORITY_TURNS else self.turn + 1
            entry = level.popleft()
            self.tracked.add(entry[0])
        self.count -= 1
        if entry[2] != NO_EXPIRY:
            self.expiring -= 1
        return entry

    def purge(self) -> int:
        """Drop every ready message; how many there were."""
        count = self.count
        self.count = self.expiring = 0
        for entry in self.returns:
            self.tracked.discard(entry[0])
        self.returns.clear()
        self.returns_bytes = 0
        self.high.clear()
        self.normal.clear()
        self.turn = 0
        return count

    def indexes(self) -> Iterator[int]:
        """The live indexes held in the columns (the returns' are in `tracked`)."""
        yield from self.high.indexes()
        yield from self.normal.indexes()

    def lowest_index(self) -> int | None:
        heads = [c.head_index() for c in (self.high, self.normal) if c._len]
        return min(heads) if heads else None

    def to_value(self) -> list:
        return [self.high.to_value(), self.normal.to_value(), [list(e) for e in self.returns],
                self.turn]

    @classmethod
    def from_value(cls, value: list, tracked: set[int]) -> ReadyQueue:
        ready = cls(tracked)
        ready.high = Column.from_value(value[0])
        ready.normal = Column.from_value(value[1])
        ready.returns = deque(tuple(e) for e in value[2])
        ready.returns_bytes = sum(e[1] for e in ready.returns)
        ready.turn = value[3]
        tracked.update(e[0] for e in ready.returns)
        ready.count = len(ready.returns) + len(ready.high) + len(ready.normal)
        ready.expiring = (sum(1 for e in ready.returns if e[2] != NO_EXPIRY) + ready.high.expiring()
                          + ready.normal.expiring())
        return ready
