"""The control op `memory` (actors/runtime/memory_probe.py): table sizes by owner type, and the
allocation sites grown since a baseline when tracemalloc runs."""
from __future__ import annotations

import tracemalloc

from actors.runtime import memory_probe


class Table:
    __module__ = "actors.fake"  # counts as warren's: the walk goes into it

    def __init__(self, n: int) -> None:
        self.rows = {i: Row() for i in range(n)}


class Row:
    __module__ = "actors.fake"
    __slots__ = ("tags",)

    def __init__(self) -> None:
        self.tags = [1, 2]


class Foreign:
    def __init__(self) -> None:
        self.hidden = list(range(10))


def test_container_sizes_are_summed_per_owner_type_through_tables_of_warren_objects() -> None:
    sizes = memory_probe.container_sizes({"a": Table(3), "b": Table(2), "c": Foreign()})
    assert sizes == {"Table.rows": 5, "Row.tags": 10}  # a foreign object is not walked into


def test_a_shared_object_is_counted_once_and_under_its_owner_whatever_the_path() -> None:
    shared = Table(4)
    holder = Table(0)
    holder.rows = {"x": shared}
    assert memory_probe.container_sizes({"h": holder, "s": shared}) == {"Table.rows": 5, "Row.tags": 8}


def test_allocation_growth_is_against_the_kept_baseline() -> None:
    was = tracemalloc.is_tracing()
    tracemalloc.start(4)
    try:
        memory_probe.allocation_growth(5)  # the baseline
        kept = [bytes(1000) for _ in range(200)]
        first = memory_probe.allocation_growth(5, keep=True)
        assert first["top"][0]["size_diff"] >= 200_000 and "test_memory_probe.py" in first["top"][0]["where"][0]
        again = memory_probe.allocation_growth(5, keep=True)  # still against the baseline
        assert again["top"][0]["size_diff"] >= 200_000
        del kept
    finally:
        if not was:
            tracemalloc.stop()
