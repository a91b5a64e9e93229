"""Where every process of a node writes its structlog events: one line each on the terminal (the
stderr the node's main process was started with) and one JSON object per line in
`<data_dir>/log/warren.log`, rotated.

Each process calls `configure(name, data_dir)` once: its main process, the supervisor, every host.
An event is tagged host=NAME unless it names a host itself, and rendered once per sink: "2026-01-02 03:04:05 [info     ] event   key=value host=NAME"
for people, {"timestamp": ISO-8601 UTC, "level", "event", "host", ...} for programs. Records of the
standard library's logging in the main process (asyncio's, a library's) take the same way.

The file is shared by the node's processes. Each appends whole lines with O_APPEND and, around each
line, holds an flock on `warren.log.lock`: under it, a process that finds the file longer than
`log_file_bytes_max` rotates it (warren.log -> warren.log.1 -> ... up to `log_files_kept` old files,
as logging's RotatingFileHandler names them), and a process whose open file was rotated by another
reopens it, so no line is split or lost across a rotation. A forked process opens its own
descriptors (an flock is held per open file, and a forked one shares its parent's).

A log line costs an flock, two stats and a write (~10 µs): events are per connection, host or
error, never per message.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any, TextIO

import structlog

log_file_bytes_max = 10 * 1024 * 1024
log_files_kept = 5
LOG_FILE = "warren.log"
console_time_format = "%Y-%m-%d %H:%M:%S"


def log_path(data_dir: str | os.PathLike) -> Path:
    return Path(data_dir) / "log" / LOG_FILE


class SharedLogFile:
    """Whole lines appended to a file several processes share, rotated by size under an flock."""

    def __init__(self, path: str | os.PathLike, bytes_max: int = log_file_bytes_max,
                 files_kept: int = log_files_kept) -> None:
        self.path = Path(path)
        self.bytes_max = bytes_max
        self.files_kept = files_kept
        self._pid = -1
        self._fd = -1
        self._lock = -1

    def write(self, line: str) -> None:
        data = (line + "\n").encode("utf-8", "replace")
        if self._pid != os.getpid():
            self._open()
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        try:
            if self._rotated_away():
                self._reopen()
            if os.fstat(self._fd).st_size + len(data) > self.bytes_max > 0:
                self._rotate()
            os.write(self._fd, data)
        finally:
            fcntl.flock(self._lock, fcntl.LOCK_UN)

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._pid = os.getpid()  # descriptors inherited from a parent are left to the parent
        self._lock = os.open(f"{self.path}.lock", os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self._fd = self._open_log()

    def _open_log(self) -> int:
        return os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def _reopen(self) -> None:
        os.close(self._fd)
        self._fd = self._open_log()

    def _rotated_away(self) -> bool:
        try:
            return os.stat(self.path).st_ino != os.fstat(self._fd).st_ino
        except FileNotFoundError:
            return True

    def _rotate(self) -> None:
        for n in range(self.files_kept - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{n}")
            if older.exists():
                older.replace(self.path.with_name(f"{self.path.name}.{n + 1}"))
        if self.files_kept:
            self.path.replace(self.path.with_name(f"{self.path.name}.1"))
        else:
            self.path.unlink(missing_ok=True)
        self._reopen()


class TeeLogger:
    """structlog's logger: writes the two renderings `_render` made, one to each sink."""

    def __init__(self, terminal: TextIO, file: SharedLogFile | None) -> None:
        self._terminal = terminal
        self._file = file

    def msg(self, console: str, json_line: str) -> None:
        try:
            print(console, file=self._terminal, flush=True)
        except (OSError, ValueError):
            pass  # a closed terminal must not stop the node; the file still gets the line
        if self._file is not None:
            self._file.write(json_line)

    debug = info = warning = warn = error = critical = exception = fatal = log = msg


def configure(process: str, data_dir: str | os.PathLike | None, *, terminal: TextIO | None = None,
              level: int = logging.INFO) -> None:
    """Send this process's structlog events (tagged host=`process`) to the terminal and, with a
    data dir, to its log file."""
    file = SharedLogFile(log_path(data_dir)) if data_dir else None
    tee = TeeLogger(terminal or sys.stderr, file)
    console = structlog.dev.ConsoleRenderer(colors=False)

    def tag(_logger: Any, _method: str, event: dict) -> dict:
        event.setdefault("host", process)  # an event about a host (supervisor.host_exited) names it
        return event

    def render(_logger: Any, _method: str, event: dict) -> dict:
        now = time.time()
        event["timestamp"] = time.strftime(console_time_format, time.localtime(now))
        line = console(_logger, _method, dict(event))
        event["timestamp"] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"
        return {"console": line, "json_line": json.dumps(event, default=repr)}

    structlog.configure(
        processors=[structlog.processors.add_log_level, tag, structlog.processors.StackInfoRenderer(),
                    structlog.processors.format_exc_info, render],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=lambda *_: tee, cache_logger_on_first_use=False)


class StandardLibraryRecords(logging.Handler):
    """The standard library's log records, as structlog events (logger name and message)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            event = record.getMessage()
        except Exception:  # a broken %-format in a library's call
            event = str(record.msg)
        log = structlog.get_logger(record.name)
        if record.exc_info:
            log.log(record.levelno, event, logger=record.name, exc_info=record.exc_info)
        else:
            log.log(record.levelno, event, logger=record.name)


def route_standard_library(level: int = logging.INFO) -> None:
    """Hand the standard library's logging in this process to `configure`'s sinks."""
    root = logging.getLogger()
    root.handlers[:] = [StandardLibraryRecords()]
    root.setLevel(level)
