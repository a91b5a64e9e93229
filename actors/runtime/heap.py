"""A host process's heap keeper: every `check_interval_s` it asks the C allocator how many free bytes
it holds and, when flow/heap.py's policy says so, has it give whole free pages back to the OS.

A shell: glibc's mallinfo2 and malloc_trim through ctypes, an asyncio task. Where the C library is
not glibc (or is older than 2.33, without mallinfo2), it does nothing and says so once.
"""
from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import time

import structlog

from effects import TrimHeap
from effects.interpreter import Interpreter
from flow.heap import HeapTrim

log = structlog.get_logger("warren.heap")

check_interval_s = 5.0
_running: set[asyncio.Task] = set()  # the loop holds tasks weakly: a started one lives here


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                      "fsmblks", "uordblks", "fordblks", "keepcost")]


def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
        return libc
    except (OSError, AttributeError):
        return None


class HeapKeeper:
    def __init__(self, host: str, policy: HeapTrim | None = None) -> None:
        self.host = host
        self.policy = policy or HeapTrim()
        self.libc = _glibc()
        self.trims = 0
        self.run_effects = Interpreter({TrimHeap: self._trim})

    def check(self) -> None:
        if self.libc is not None:
            self.run_effects(self.policy.observe(self.libc.mallinfo2().fordblks))

    def _trim(self, _e: TrimHeap) -> None:
        free = self.libc.mallinfo2().fordblks
        started = time.perf_counter()
        self.libc.malloc_trim(0)
        self.trims += 1
        log.info("heap.trimmed", host=self.host, free_bytes=free, ms=round((time.perf_counter() - started) * 1000, 1))

    def start(self) -> asyncio.Task | None:
        if self.libc is None:
            log.info("heap.keeper_off", host=self.host, reason="no glibc mallinfo2/malloc_trim here")
            return None
        task = asyncio.get_running_loop().create_task(self._run())
        _running.add(task)
        task.add_done_callback(_running.discard)
        return task

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(check_interval_s)
            self.check()
