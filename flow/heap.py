"""When a host process gives the memory it freed back to the OS.

Theory of operation
-------------------
Message bodies above 512 bytes are not Python's small objects: the C allocator (glibc's malloc)
holds them, in heaps it grows as a queue grows. When the queue drains, the bodies are freed but
the heaps keep the pages: glibc returns memory to the OS only from the top of a heap, and one
live chunk above the freed ones (a message that came later, a buffer) pins all of them. So a
queue host kept its peak RSS after a long queue drained (bench/memory_release.py: 150 MiB held
after 100k messages of 1 KiB came and went, 47 MiB after `malloc_trim(0)`, which gives back
every whole free page of every heap).

Trimming costs the time to walk the free chunks and advise the kernel (about 65 ms for 300 MiB
freed), so it is done only when there is something to give back: the shell reports the free
bytes the allocator holds (`mallinfo2().fordblks`) every few seconds, and `HeapTrim.observe`
returns `TrimHeap` when they stand `trim_after_bytes` above the lowest level seen since the last
trim (a drain under way: give back what it freed so far), or `settle_bytes` above it once they
stopped growing (the drain is over: give back the rest). A trim does not lower that count (the
chunks stay free, only their pages go back), so the level it leaves is the new floor; memory
reused by new messages lowers the floor, and only a new drain trims again. Free bytes that
cannot be given back (chunks interleaved with live ones on the same pages) therefore cost one
trim, not one per check.

Invariants: `floor` <= every free level observed since the last trim; a trim is returned only
when the level is at least `settle_bytes` above `floor`, and then `floor` becomes that level.
Left out: Python's own small-object arenas. CPython unmaps an arena once it is empty, but a few
objects that outlive a drain (allocated while it was long) keep theirs: after 100k persistent
messages of 1 KiB came and went, about 30 MiB of them stayed with the queue host.
"""
from __future__ import annotations

from effects import TrimHeap

TRIM_AFTER_BYTES = 64 * 1024 * 1024
SETTLE_BYTES = 8 * 1024 * 1024


class HeapTrim:
    __slots__ = ("trim_after_bytes", "settle_bytes", "floor", "last")

    def __init__(self, trim_after_bytes: int = TRIM_AFTER_BYTES, settle_bytes: int = SETTLE_BYTES) -> None:
        assert 0 < settle_bytes <= trim_after_bytes, (settle_bytes, trim_after_bytes)
        self.trim_after_bytes = trim_after_bytes
        self.settle_bytes = settle_bytes
        self.floor: int | None = None  # the lowest free level since the last trim
        self.last: int | None = None  # the level at the previous observation

    def observe(self, free_bytes: int) -> list[TrimHeap]:
        """The allocator holds `free_bytes` free now: trim, or not yet."""
        assert free_bytes >= 0, free_bytes
        growing = self.last is None or free_bytes > self.last
        self.last = free_bytes
        if self.floor is None or free_bytes < self.floor:
            self.floor = free_bytes
        above = free_bytes - self.floor
        if above < (self.trim_after_bytes if growing else self.settle_bytes):
            return []
        self.floor = free_bytes
        return [TrimHeap()]
