"""The heap keeper (actors/runtime/heap.py) on the real C allocator: bodies allocated by a thread, as
a host's loop allocates them, then freed under one that outlives them, stay with the process until
the keeper sees the free bytes and trims."""
from __future__ import annotations

import threading

import psutil
import pytest

from actors.runtime.heap import HeapKeeper

MIB = 1024 * 1024


def rss() -> int:
    return psutil.Process().memory_info().rss


def test_a_drain_is_given_back_to_the_os():
    keeper = HeapKeeper("test")
    if keeper.libc is None:
        pytest.skip("not glibc: the keeper is off")
    seen: dict[str, int] = {}

    def host_loop() -> None:
        keeper.check()  # the level before the queue grew
        bodies = [b"x" * 1024 + bytes([i % 256]) for i in range(200_000)]  # ~200 MiB of 1 KiB bodies
        pin = b"y" * 1024  # allocated last, above them: the heap cannot shrink from the top
        del bodies
        seen["freed"] = rss()
        keeper.check()
        seen["trimmed"] = rss()
        del pin
    thread = threading.Thread(target=host_loop)
    thread.start()
    thread.join()
    assert keeper.trims == 1
    assert seen["freed"] - seen["trimmed"] > 150 * MIB
