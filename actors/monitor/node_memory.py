"""The node's memory counted once across its processes (PSS summed), as the node's resource monitor
reads it once a second (actors/monitor/resources.py) for the memory alarm and for the queue hosts'
paging (it tells them each reading)."""
from __future__ import annotations

import json
from pathlib import Path

import psutil


class NodeMemory:
    """The node's memory counted once: PSS summed over every process running the node's command line
    (its main process, whose pid is in <data_dir>/ready, the Thespian admin and logger, the
    supervisor and the hosts); this process alone until the node is ready. The processes share
    pages, the interpreter's above all: RSS summed over them would count a shared page once per
    process that maps it, PSS charges each of them its share.

    Finding them walks every process on the machine (~5 ms), so the set is kept and walked again
    only when one of them is gone (a restarted host has a new pid) or `rescan_interval_s` passed.
    One reading (smaps_rollup of each process) costs ~3.5 ms for a node of 8 processes."""

    rescan_interval_s = 30.0

    def __init__(self, data_dir: str) -> None:
        self.data_dir = data_dir
        self._procs: list[psutil.Process] = []
        self._found_at = float("-inf")

    def pss(self, now: float) -> int:
        if now - self._found_at >= self.rescan_interval_s:
            self._find(now)
        sizes = [_pss(p) for p in self._procs]
        if None in sizes:
            self._found_at = float("-inf")  # one of them is gone (a host restarted): walk again next time
        return sum(size for size in sizes if size is not None)

    def _find(self, now: float) -> None:
        try:
            cmdline = psutil.Process(json.loads(Path(self.data_dir, "ready").read_text())["pid"]).cmdline()
            self._procs = [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == cmdline]
            self._found_at = now
        except (OSError, ValueError, KeyError, psutil.Error):
            self._procs = [psutil.Process()]  # not ready yet: look again next time


def _pss(process: psutil.Process) -> int | None:
    try:
        return process.memory_full_info().pss
    except psutil.Error:
        return None
