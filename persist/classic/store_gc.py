"""The message store's file table and its garbage-collection decisions (pure: no IO).

Theory of operation: the store appends records to numbered files and only ever writes to the
highest one (the "current" file). Each file has a summary: `valid` bytes (records some queue still
references) and `garbage` bytes (records nobody references any more); valid + garbage is the file's
size. Removing a message only moves its bytes from valid to garbage. `plan()` then says what to
reclaim, in this order:
  1. `Delete(f)`: a non-current file holding only garbage is removed whole;
  2. `Merge(left, right)`: two ADJACENT non-current files (neighbours in file-number order among the
     files that exist) whose live data fits in one file (`valid_l + valid_r <= file_size_limit`) and
     whose garbage is above `garbage_fraction` (0.5) of their total are compacted into `left`, and
     `right` disappears.
A planned action locks the files it touches (`lock`), and `plan` never picks a locked file: this is
RabbitMQ's per-file GC lock, kept here as state so that a shell running GC concurrently knows that
reads of a locked file must wait and nothing else is blocked. `finish` applies the outcome to the
table and unlocks; `gc_runs` counts merges, `files_deleted` whole-file deletions.

Invariants: valid, garbage >= 0; the current file is never locked, merged or deleted; a file is in
at most one planned action at a time.
"""
from __future__ import annotations

from dataclasses import dataclass, field

GARBAGE_FRACTION = 0.5


@dataclass(slots=True)
class FileSummary:
    valid: int = 0
    garbage: int = 0
    locked: bool = False

    @property
    def total(self) -> int:
        return self.valid + self.garbage


@dataclass(frozen=True, slots=True)
class Delete:
    file: int


@dataclass(frozen=True, slots=True)
class Merge:
    left: int
    right: int


@dataclass(slots=True)
class FileTable:
    file_size_limit: int
    garbage_fraction: float = GARBAGE_FRACTION
    files: dict[int, FileSummary] = field(default_factory=dict)
    current: int = 0
    gc_runs: int = 0
    files_deleted: int = 0

    def __post_init__(self) -> None:
        self.files.setdefault(self.current, FileSummary())

    # -- bookkeeping -----------------------------------------------------------------------------
    def roll(self) -> int:
        """Start a new current file; return its number."""
        assert not self.files[self.current].locked
        self.current += 1
        self.files[self.current] = FileSummary()
        return self.current

    def add_live(self, file: int, nbytes: int) -> None:
        self.files[file].valid += nbytes

    def add_garbage(self, file: int, nbytes: int) -> None:
        """Bytes in `file` that nothing references (scanned duplicates, unsynced leftovers)."""
        self.files[file].garbage += nbytes

    def release(self, file: int, nbytes: int) -> None:
        """A record of `nbytes` in `file` lost its last reference."""
        summary = self.files[file]
        summary.valid -= nbytes
        summary.garbage += nbytes
        assert summary.valid >= 0

    def is_locked(self, file: int) -> bool:
        return self.files[file].locked

    # -- decisions -------------------------------------------------------------------------------
    def plan(self) -> Delete | Merge | None:
        order = sorted(f for f in self.files if f != self.current)
        for f in order:
            s = self.files[f]
            if s.valid == 0 and not s.locked:
                return Delete(f)
        for left, right in zip(order, order[1:]):
            a, b = self.files[left], self.files[right]
            if a.locked or b.locked:
                continue
            if a.valid + b.valid > self.file_size_limit:
                continue
            if a.garbage + b.garbage > self.garbage_fraction * (a.total + b.total):
                return Merge(left, right)
        return None

    def lock(self, action: Delete | Merge) -> None:
        for f in _files_of(action):
            assert f != self.current and not self.files[f].locked
            self.files[f].locked = True

    def finish(self, action: Delete | Merge) -> None:
        """The action was carried out: `left` now holds exactly both files' valid bytes."""
        if isinstance(action, Delete):
            assert self.files[action.file].valid == 0
            del self.files[action.file]
            self.files_deleted += 1
            return
        left, right = self.files[action.left], self.files.pop(action.right)
        left.valid += right.valid
        left.garbage = 0
        left.locked = False
        self.gc_runs += 1

    # -- inspection ------------------------------------------------------------------------------
    @property
    def valid_bytes(self) -> int:
        return sum(s.valid for s in self.files.values())

    @property
    def garbage_bytes(self) -> int:
        return sum(s.garbage for s in self.files.values())


def _files_of(action: Delete | Merge) -> tuple[int, ...]:
    return (action.file,) if isinstance(action, Delete) else (action.left, action.right)
