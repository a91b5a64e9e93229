"""An in-memory `Log` that models the difference between written and durable.

Theory of operation: `append` and `truncate_from` change the in-memory view at once (that is
what the core reads), but only `sync()` - the simulated WAL's fsync - copies the view into the
durable image. `crash()` throws the view away and rebuilds it from the durable image, so
whatever was appended since the last sync is lost, exactly the failure a real WAL has. Hard
state, snapshots and compaction are durable on return (the real shell syncs them inline).
`written_index()` is what the last sync covered, clamped by later truncations, so a stale
written notification can never mark a replaced entry as durable.
"""
from __future__ import annotations

from typing import Sequence

from raft.log import Entry


class MemoryLog:
    def __init__(self) -> None:
        self._first = 1                   # index of self._entries[0]
        self._entries: list[Entry] = []
        self._snapshot: tuple[int, int, bytes] | None = None
        self._hard: tuple[int, str | None] = (0, None)
        self._synced = 0                  # highest index the last sync made durable (clamped)
        self._written = 0                 # what the core has been told (set_written), <= _synced
        self._durable: tuple[int, list[Entry]] = (1, [])
        self._dirty = False               # the view differs from the durable image

    # -- reads ------------------------------------------------------------------------------
    def last_index_term(self) -> tuple[int, int]:
        if self._entries:
            last = self._entries[-1]
            return last.index, last.term
        if self._snapshot:
            return self._snapshot[0], self._snapshot[1]
        return self._first - 1, 0

    def first_index(self) -> int:
        return self._first

    def term_at(self, index: int) -> int | None:
        if index == 0:
            return 0
        if self._snapshot and index == self._snapshot[0]:
            return self._snapshot[1]
        pos = index - self._first
        if 0 <= pos < len(self._entries):
            return self._entries[pos].term
        return None

    def entries(self, lo: int, hi: int, max_bytes: int | None = None) -> list[Entry]:
        assert lo >= self._first, f"entries({lo}) below first index {self._first}"
        out = self._entries[lo - self._first:hi - self._first]
        if max_bytes is None or not out:
            return out
        size, n = 0, 0
        for e in out:
            size += len(e.command)
            if n and size > max_bytes:
                break
            n += 1
        return out[:n]

    def written_index(self) -> int:
        return self._written

    def hard_state(self) -> tuple[int, str | None]:
        return self._hard

    def durable_hard_state(self) -> tuple[int, str | None]:
        return self._hard  # durable on return here

    def snapshot_meta(self) -> tuple[int, int] | None:
        return (self._snapshot[0], self._snapshot[1]) if self._snapshot else None

    def snapshot_data(self) -> bytes | None:
        return self._snapshot[2] if self._snapshot else None

    # -- writes -----------------------------------------------------------------------------
    def append(self, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        last, _ = self.last_index_term()
        assert entries[0].index == last + 1, f"append at {entries[0].index}, last is {last}"
        if not self._entries:
            self._first = entries[0].index
        self._entries.extend(entries)
        self._dirty = True

    def truncate_from(self, index: int) -> None:
        assert index >= self._first, "cannot truncate below the first index"
        del self._entries[index - self._first:]
        self._dirty = True
        self._synced = min(self._synced, index - 1)
        self._written = min(self._written, index - 1)

    def set_written(self, upto: int) -> None:
        self._written = max(self._written, min(upto, self._synced))

    def save_hard_state(self, term: int, voted_for: str | None) -> None:
        self._hard = (term, voted_for)

    def install_snapshot(self, index: int, term: int, data: bytes) -> None:
        if self.term_at(index) != term or (self._snapshot and index < self._snapshot[0]):
            self._entries = []
            self._first = index + 1
            self._synced = self._written = index
            self._durable = (index + 1, [])
            self._dirty = False
        self._snapshot = (index, term, data)

    def compact_below(self, index: int) -> None:
        snap = self._snapshot[0] if self._snapshot else 0
        index = min(index, snap + 1)
        if index <= self._first:
            return
        del self._entries[:index - self._first]
        self._first = index
        first, durable = self._durable
        self._durable = (index, durable[max(0, index - first):])

    # -- simulation -------------------------------------------------------------------------
    def unsynced(self) -> bool:
        return self._dirty

    def sync(self) -> int:
        """The WAL's fsync: make the whole current view durable; returns the index it covers."""
        self._durable = (self._first, list(self._entries))
        self._dirty = False
        self._synced, _ = self.last_index_term()
        return self._synced

    def crash(self) -> None:
        """Lose everything not synced; the next core starts from the durable image."""
        self._first, durable = self._durable
        self._entries = list(durable)
        snap = self._snapshot[0] if self._snapshot else 0
        if self.last_index_term()[0] < snap:
            # the snapshot was taken at an applied index the WAL had not synced yet
            self._entries, self._first = [], snap + 1
        self._synced = self._written = self.last_index_term()[0]
        self._durable = (self._first, list(self._entries))
        self._dirty = False
