"""The node's log sinks (actors/runtime/logs.py): one line per event on the terminal, one JSON line in
the shared, rotated log file; processes writing at once never split or lose a line."""
from __future__ import annotations

import io
import json
import multiprocessing

import pytest
import structlog

from actors.runtime import logs
from actors.runtime.logs import SharedLogFile


def lines(path) -> list[str]:
    files = sorted(path.parent.glob(path.name + "*"))
    return [line for f in files if not f.name.endswith(".lock") for line in f.read_text().splitlines()]


@pytest.fixture
def restored_structlog():
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


def test_an_event_is_one_console_line_and_one_json_line(tmp_path, restored_structlog):
    terminal = io.StringIO()
    logs.configure("queue0", tmp_path, terminal=terminal)
    structlog.get_logger("t").warning("store.torn_tail", cut_bytes=12)
    structlog.get_logger("t").info("supervisor.host_exited", host="conn1")
    first, second = terminal.getvalue().splitlines()
    assert first.endswith("[warning  ] store.torn_tail                cut_bytes=12 host=queue0")
    assert second.endswith("supervisor.host_exited         host=conn1")  # names its host: kept
    a, b = (json.loads(line) for line in logs.log_path(tmp_path).read_text().splitlines())
    assert {k: a[k] for k in ("event", "level", "host", "cut_bytes")} == {
        "event": "store.torn_tail", "level": "warning", "host": "queue0", "cut_bytes": 12}
    assert a["timestamp"].endswith("Z") and "T" in a["timestamp"] and b["host"] == "conn1"


def test_rotation_keeps_whole_lines_and_at_most_the_named_number_of_old_files(tmp_path):
    path = tmp_path / "log" / "warren.log"
    log = SharedLogFile(path, bytes_max=1000, files_kept=3)
    for i in range(200):
        log.write(json.dumps({"n": i, "pad": "x" * 40}))
    names = sorted(f.name for f in path.parent.iterdir())
    assert names == ["warren.log", "warren.log.1", "warren.log.2", "warren.log.3", "warren.log.lock"]
    assert all(f.stat().st_size <= 1000 for f in path.parent.iterdir())
    kept = [json.loads(line)["n"] for line in lines(path)]
    assert sorted(kept) == list(range(200 - len(kept), 200))  # the newest, none torn or repeated


def _writer(path: str, who: int, n: int) -> None:
    log = SharedLogFile(path, bytes_max=4000, files_kept=1000)
    for i in range(n):
        log.write(json.dumps({"who": who, "i": i, "pad": "y" * (i % 50)}))


def test_processes_writing_at_once_through_rotations_lose_and_split_no_line(tmp_path):
    path = tmp_path / "log" / "warren.log"
    shared = SharedLogFile(path, bytes_max=4000, files_kept=1000)
    shared.write(json.dumps({"who": -1, "i": 0}))  # opened here first: children must open their own
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(path), who, 300)) for who in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    seen = sorted((rec["who"], rec["i"]) for rec in map(json.loads, lines(path)))
    assert seen == [(-1, 0)] + [(who, i) for who in range(4) for i in range(300)]
    assert len(list(path.parent.glob("warren.log.*"))) > 10  # it did rotate, many times
