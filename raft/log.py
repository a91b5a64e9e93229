"""The Raft log as the core sees it: the `Log` protocol and its `Entry`.

Theory of operation: the core reads and mutates the log synchronously, but durability is
asynchronous, as in Ra's one-WAL-per-node design. `append` only queues entries for the WAL; they
count as durable once the shell reports `written(upto)` and the core calls `set_written(upto)`.
The core acts on `written_index()` for everything that promises durability: a follower acks an
append only up to its written index, and a leader counts itself in a commit majority only up to it.

Contract details every implementation keeps:
- `entries(lo, hi, max_bytes)` returns the contiguous entries with lo <= index < hi (half-open,
  as etcd's `Storage.Entries`); with `max_bytes` it stops before the entry that would pass the
  limit, but always returns at least one entry when lo < hi.
- `term_at(0) == 0`; `term_at(snapshot index) == snapshot term`; compacted or missing -> None.
- `truncate_from(i)` also lowers the written index to i - 1; a later `set_written(upto)` that
  was issued for entries since replaced must not mark the replacements written (Ra checks the
  written term; MemoryLog clamps to what its last sync covered).
- `install_snapshot` is durable when it returns. `save_hard_state` may become durable later
  (MemberLog: with the WAL's next group commit); the shell then holds every ToPeer that follows
  the PersistHardState until it is (driver.py).
- `install_snapshot(index, term, data)` keeps the log suffix if the log holds (index, term),
  otherwise discards the whole log; it never drops entries below index by itself -
  `compact_below(i)` (i <= snapshot index + 1) does, so live entries can outlive the snapshot.
- `snapshot_data()` returns the bytes of the current snapshot (added to the brief's protocol:
  a restarting member restores from it and a leader streams it to a lagging follower).
"""
from __future__ import annotations

from typing import NamedTuple, Protocol, Sequence


class Entry(NamedTuple):
    index: int
    term: int
    command: bytes  # opaque to storage; the core tags it with its kind (see commands.py)


class Log(Protocol):
    def first_index(self) -> int:
        """The lowest index `entries` may be asked for (1 until compaction)."""

    def last_index_term(self) -> tuple[int, int]: ...

    def term_at(self, index: int) -> int | None: ...

    def entries(self, lo: int, hi: int, max_bytes: int | None = None) -> list[Entry]: ...

    def append(self, entries: Sequence[Entry]) -> None: ...

    def truncate_from(self, index: int) -> None: ...

    def written_index(self) -> int: ...

    def set_written(self, upto: int) -> None: ...

    def hard_state(self) -> tuple[int, str | None]: ...

    def save_hard_state(self, term: int, voted_for: str | None) -> None: ...

    def snapshot_meta(self) -> tuple[int, int] | None: ...

    def snapshot_data(self) -> bytes | None: ...

    def install_snapshot(self, index: int, term: int, data: bytes) -> None: ...

    def compact_below(self, index: int) -> None: ...
