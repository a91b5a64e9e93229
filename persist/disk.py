"""The file-system interface the Raft log storage goes through, and its real implementation.

Every path is relative to the disk's root and uses "/" separators, so the same storage code runs on
`RealDisk` and on the simulator's `SimDisk` (tests/sim/simdisk.py), which loses unsynced bytes on a
simulated crash. Durability contract (what both implementations honour):
- `append` and `truncate` change a file's content; only `sync(path)` makes that content durable.
- creating, renaming and removing a name is durable only after `fsync_dir` of its directory; so is
  removing a directory tree (`remove_tree`), after `fsync_dir` of the tree's parent.
`sync_method` chooses what `sync` does on a real disk: "fdatasync" (default: the data and the size,
not the timestamps), "fsync", or "none" (tests and benchmarks of the CPU side only).

A RealDisk can also *defer* its syncs (`deferring`): inside that block `sync` and `fsync_dir` sync
nothing and collect a duplicate of the descriptor instead, and `DeferredSyncs.run` syncs them
later, on another thread, while the caller's event loop goes on (a queue host delivers while its
group commit's fdatasync runs; actors/queue/group_commit.py). A duplicate descriptor shares the
open file, so a sync started after the writes covers them even if the file is closed, renamed or
removed meanwhile; the content is durable only once `run` has returned.
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

SYNC_METHODS = ("fdatasync", "fsync", "none")
iov_max = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024  # pieces per writev


class Disk(Protocol):
    def open(self, path: str) -> None:
        """Create `path` empty if it does not exist (the name needs fsync_dir to be durable)."""

    def append(self, path: str, data: bytes) -> int:
        """Append `data`; return the offset it starts at."""

    def append_parts(self, path: str, parts: list[bytes]) -> int:
        """Append the pieces back to back (a gathered write); return the offset they start at."""

    def write_at(self, path: str, offset: int, parts: list[bytes]) -> None:
        """Write the pieces back to back from `offset`, over what is there and past the end (a
        file written ahead with zeros is then overwritten in place: see persist/wal/writer.py)."""

    def read(self, path: str, offset: int = 0, size: int | None = None) -> bytes: ...

    def read_file(self, path: str) -> bytes:
        """The whole of a small file, read and let go (`read` keeps a descriptor open for the
        appends to come); FileNotFoundError if there is none."""

    def size(self, path: str) -> int: ...

    def exists(self, path: str) -> bool: ...

    def truncate(self, path: str, size: int) -> None: ...

    def sync(self, path: str) -> None: ...

    def rename(self, src: str, dst: str) -> None: ...

    def remove(self, path: str) -> None: ...

    def remove_tree(self, path: str) -> None:
        """Remove directory `path` and everything under it; nothing if it does not exist."""

    def listdir(self, path: str) -> list[str]:
        """Names in directory `path` (sorted); [] if it does not exist."""

    def makedirs(self, path: str) -> None: ...

    def fsync_dir(self, path: str) -> None: ...

    def close(self) -> None:
        """Let go of every open file (their content stays as it is)."""


def write_atomic(disk: Disk, path: str, data: bytes) -> None:
    """Replace `path` with `data` so that a crash leaves either the old or the new content."""
    tmp = path + ".tmp"
    if disk.exists(tmp):
        disk.remove(tmp)
    disk.open(tmp)
    disk.append(tmp, data)
    disk.sync(tmp)
    disk.rename(tmp, path)
    disk.fsync_dir(parent(path))


def parent(path: str) -> str:
    return path.rpartition("/")[0]


class DeferredSyncs:
    """The syncs a RealDisk was asked for inside `deferring`: duplicated descriptors, each synced
    and closed by `run` (on any thread: the syscalls release the GIL and touch no shared state)."""

    __slots__ = ("_files", "_method")

    def __init__(self, method: str) -> None:
        self._files: list[tuple[int, bool]] = []  # (descriptor, is a directory)
        self._method = method

    def __len__(self) -> int:
        return len(self._files)

    def add(self, fd: int, directory: bool) -> None:
        self._files.append((fd, directory))

    def discard(self) -> None:
        """Close every collected descriptor unsynced."""
        for fd, _ in self._files:
            os.close(fd)
        self._files = []

    def run(self) -> None:
        """Sync every collected file in order, then close them all (even after a failed sync,
        whose error propagates: what it covered is not durable)."""
        try:
            for fd, directory in self._files:
                if directory or self._method == "fsync":
                    os.fsync(fd)
                elif self._method == "fdatasync":
                    os.fdatasync(fd)
        finally:
            self.discard()


class RealDisk:
    """The OS file system under `root`. Keeps one descriptor per open file; every write names its
    offset (pwrite), an append the file's size."""

    def __init__(self, root: str, sync_method: str = "fdatasync") -> None:
        if sync_method not in SYNC_METHODS:
            raise ValueError(f"sync_method must be one of {SYNC_METHODS}, not {sync_method!r}")
        self.root = root
        self.sync_method = sync_method
        self.syncs = 0  # syncs asked for (deferred ones included)
        self._fds: dict[str, int] = {}
        self._deferred: DeferredSyncs | None = None
        os.makedirs(root, exist_ok=True)

    @contextmanager
    def deferring(self) -> Iterator[DeferredSyncs]:
        """Collect the syncs asked for inside the block instead of doing them; the caller runs
        what it yields (see the module docstring)."""
        assert self._deferred is None, "deferring blocks do not nest"
        self._deferred = deferred = DeferredSyncs(self.sync_method)
        try:
            yield deferred
        except BaseException:
            deferred.discard()
            raise
        finally:
            self._deferred = None

    def _abs(self, path: str) -> str:
        return os.path.join(self.root, path)

    def _fd(self, path: str) -> int:
        fd = self._fds.get(path)
        if fd is None:
            fd = os.open(self._abs(path), os.O_RDWR | os.O_CREAT, 0o644)
            self._fds[path] = fd
        return fd

    def _forget(self, path: str) -> None:
        fd = self._fds.pop(path, None)
        if fd is not None:
            os.close(fd)

    def open(self, path: str) -> None:
        self._fd(path)

    def append(self, path: str, data: bytes) -> int:
        return self.append_parts(path, [data])

    def append_parts(self, path: str, parts: list[bytes]) -> int:
        fd = self._fd(path)
        offset = os.fstat(fd).st_size
        self._write(fd, offset, parts)
        return offset

    def write_at(self, path: str, offset: int, parts: list[bytes]) -> None:
        self._write(self._fd(path), offset, parts)

    @staticmethod
    def _write(fd: int, offset: int, parts: list[bytes]) -> None:
        for k in range(0, len(parts), iov_max):
            chunk = parts[k:k + iov_max]
            done = os.pwritev(fd, chunk, offset)
            size = sum(map(len, chunk))
            if done < size:  # a short write: finish it plainly
                rest = memoryview(b"".join(chunk))[done:]
                at = offset + done
                while rest:
                    n = os.pwrite(fd, rest, at)
                    rest, at = rest[n:], at + n
            offset += size

    def read(self, path: str, offset: int = 0, size: int | None = None) -> bytes:
        fd = self._fd(path)
        if size is None:
            size = os.fstat(fd).st_size - offset
        return os.pread(fd, size, offset)

    def read_file(self, path: str) -> bytes:
        with open(self._abs(path), "rb") as f:
            return f.read()

    def size(self, path: str) -> int:
        return os.stat(self._abs(path)).st_size

    def exists(self, path: str) -> bool:
        return os.path.exists(self._abs(path))

    def truncate(self, path: str, size: int) -> None:
        os.ftruncate(self._fd(path), size)

    def sync(self, path: str) -> None:
        self.syncs += 1
        if self._deferred is not None:
            if self.sync_method != "none":
                self._deferred.add(os.dup(self._fd(path)), False)
            return
        if self.sync_method == "fdatasync":
            os.fdatasync(self._fd(path))
        elif self.sync_method == "fsync":
            os.fsync(self._fd(path))

    def rename(self, src: str, dst: str) -> None:
        self._forget(src)
        self._forget(dst)
        os.rename(self._abs(src), self._abs(dst))

    def remove(self, path: str) -> None:
        self._forget(path)
        os.remove(self._abs(path))

    def remove_tree(self, path: str) -> None:
        top = self._abs(path)
        if not os.path.isdir(top):
            return
        for directory, _, names in os.walk(top):  # let go of what is held open under it first
            sub = os.path.relpath(directory, top)
            base = path if sub == "." else f"{path}/{sub}"
            for name in names:
                self._forget(f"{base}/{name}")
        shutil.rmtree(top)

    def listdir(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(self._abs(path)))
        except FileNotFoundError:
            return []

    def makedirs(self, path: str) -> None:
        os.makedirs(self._abs(path), exist_ok=True)

    def fsync_dir(self, path: str) -> None:
        self.syncs += 1
        if self.sync_method == "none":
            return
        fd = os.open(self._abs(path), os.O_RDONLY | os.O_DIRECTORY)
        if self._deferred is not None:
            self._deferred.add(fd, True)
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        for path in list(self._fds):
            self._forget(path)
