"""The stream reader's ledger: which deliveries Spark has planned, and which it has committed.

Theory of operation. One stream reader runs on the driver for the whole query and holds one AMQP
consumer; every delivery it gets is numbered 1, 2, 3 ... (its `seq`) in arrival order and kept here,
with its delivery tag and its row, until Spark commits a micro-batch that holds it. An offset is
`{"session": S, "seq": N}`: "the first N deliveries of reader session S". A micro-batch is the seqs
in (start, end]; committing `end` settles every delivery up to end.seq, and the shell acks them with
one basic.ack(multiple=true) of end's delivery tag (deliveries on one channel have increasing tags).

A restarted query gets a new session. Spark then replays the batch it had planned but not committed
with offsets of the old session: that batch is empty here, because its messages were never acked and
the broker has redelivered them to this session, where they arrive as new seqs (at-least-once). A
start offset of another session therefore means "nothing of this session is planned yet".

Invariants: seqs are contiguous; committed <= received; rows are kept for seqs in (committed,
received]; an end offset never passes what was received; a commit never goes backwards.
Left out: acknowledging through the connection (the shell does it), and time (the shell waits).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Offset:
    session: str
    seq: int

    def to_json(self) -> dict:
        return {"session": self.session, "seq": self.seq}

    @staticmethod
    def from_json(value: dict) -> "Offset":
        return Offset(str(value["session"]), int(value["seq"]))


@dataclass
class Ledger:
    session: str
    committed: int = 0
    _tags: list[int] = field(default_factory=list)  # delivery tags of seqs committed+1 ...
    _rows: list[Any] = field(default_factory=list)

    @property
    def received(self) -> int:
        return self.committed + len(self._rows)

    @property
    def pending(self) -> int:
        """Deliveries received and not yet committed (they hold prefetch credit)."""
        return len(self._rows)

    def initial(self) -> Offset:
        return Offset(self.session, 0)

    def receive(self, delivery_tag: int, row: Any) -> int:
        assert not self._tags or delivery_tag > self._tags[-1], "delivery tags go up on one channel"
        self._tags.append(delivery_tag)
        self._rows.append(row)
        return self.received

    def planned(self, start: Offset) -> int:
        """The last seq of this session that Spark has planned, given a batch's start offset."""
        return start.seq if start.session == self.session else self.committed

    def latest(self, start: Offset, rows_max: int | None) -> Offset:
        """The end offset of the next batch from `start`: every received delivery after it, at
        most `rows_max` of them; `start` itself when there is none (no new data)."""
        base = self.planned(start)
        assert self.committed <= base <= self.received, (start, self.committed, self.received)
        end = self.received if rows_max is None else min(self.received, base + rows_max)
        return start if end == base else Offset(self.session, end)

    def rows(self, start: Offset, end: Offset) -> list[Any]:
        if end.session != self.session:
            return []  # planned by an earlier session: redelivered here as new seqs
        lo = self.planned(start)
        assert self.committed <= lo <= end.seq <= self.received, (start, end, self.committed, self.received)
        return self._rows[lo - self.committed:end.seq - self.committed]

    def commit(self, end: Offset) -> int | None:
        """Settle every delivery up to `end`; the delivery tag to ack with multiple=true, or None
        when `end` settles nothing new (another session's offset, or one already committed)."""
        if end.session != self.session or end.seq <= self.committed:
            return None
        assert end.seq <= self.received, (end, self.received)
        n = end.seq - self.committed
        tag = self._tags[n - 1]
        del self._tags[:n], self._rows[:n]
        self.committed = end.seq
        return tag
