"""Reading and atomically replacing the node's definitions file (the shell side of
metadata/definitions.py, which decides the format).

write_atomic: write a temporary file next to the target, fsync it, rename it over the target, fsync
the directory - so after a crash the file is either the old one or the new one, never a torn mix.
"""
from __future__ import annotations

import os
from pathlib import Path


def read_bytes(path: Path) -> bytes | None:
    """The file's bytes, or None when there is none yet (first start)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # it holds password hashes
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
