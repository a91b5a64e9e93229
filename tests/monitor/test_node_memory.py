"""NodeMemory (actors/monitor/node_memory.py) over the real process table."""
from __future__ import annotations

import json
import os

import psutil

from actors.monitor.node_memory import NodeMemory


def test_node_memory_is_this_process_until_the_node_is_ready_then_every_process_of_its_command(tmp_path):
    me = psutil.Process()
    memory = NodeMemory(str(tmp_path))
    assert 0 < memory.pss(now=0.0) <= psutil.virtual_memory().total
    (tmp_path / "ready").write_text(json.dumps({"pid": os.getpid()}))
    pss = memory.pss(now=1.0)  # not found yet: looks again at once
    assert me.pid in [p.pid for p in memory._procs] and pss >= me.memory_full_info().pss // 2
    assert all(p.cmdline() == me.cmdline() for p in memory._procs if p.is_running())
