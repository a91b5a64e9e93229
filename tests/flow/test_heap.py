"""When a process gives freed memory back (flow/heap.py): during a drain once enough was freed, at
its end what is left, never twice for the same free bytes, and again after memory was reused."""
from __future__ import annotations

from effects import TrimHeap
from flow.heap import HeapTrim

MIB = 1024 * 1024


def levels(policy: HeapTrim, *free_mib: int) -> list[bool]:
    """Whether each observation (free MiB) trimmed."""
    return [policy.observe(level * MIB) == [TrimHeap()] for level in free_mib]


def test_nothing_free_is_nothing_to_do():
    assert levels(HeapTrim(), 0, 0, 1, 1, 0) == [False] * 5


def test_a_long_drain_is_trimmed_as_it_goes_and_what_is_left_when_it_ends():
    #                              start  growing ...          stopped  still
    assert levels(HeapTrim(), 1, 30, 70, 100, 150, 160, 160, 160) == [
        False, False, True, False, True, False, True, False]


def test_a_small_settled_amount_is_trimmed_once_and_a_tiny_one_never():
    assert levels(HeapTrim(), 0, 9, 9, 9) == [False, False, True, False]
    assert levels(HeapTrim(), 0, 7, 7, 7) == [False] * 4


def test_free_bytes_that_cannot_go_back_cost_one_trim_not_one_per_check():
    """After a trim the count stays (the chunks are still free): the floor is where it left it."""
    assert levels(HeapTrim(), 0, 100, 100, 100, 100) == [False, True, False, False, False]


def test_memory_reused_lowers_the_floor_so_the_next_drain_trims_again():
    assert levels(HeapTrim(), 0, 100, 20, 20, 90, 90) == [False, True, False, False, True, False]
