"""A simulated disk for deterministic tests: persist.disk.Disk in memory, with crashes.

Theory of operation: each file has its current bytes and its synced bytes; `sync` copies one to the
other. Names live in two namespaces: the current one and the durable one; `fsync_dir(d)` makes the
current names under `d` durable. `remove_tree(d)` takes `d` and everything under it out of the
current namespace at once; the removal is durable at `fsync_dir` of `d`'s parent. `crash()` throws
away everything not durable: the namespace reverts to the durable one (a removed tree whose removal
was not durable comes back with its durable files) and every file to its synced bytes.
`crash(torn=True)` additionally keeps a random, strictly partial prefix of the most recent unsynced
append (if that file's unsynced part is pure appended data), or of the most recent unsynced
`write_at` (if it is that file's only unsynced change), so recovery meets a torn record.
Directories are durable as soon as they are made (a deliberate simplification: warren makes its
directories at start-up, or once per queue before anything is written into them). All randomness
comes from the injected `random.Random`, so a seed replays a run.
"""
from __future__ import annotations

import random


class SimCrash(Exception):
    """Raised by an armed sync point: the node stops there (see SimDisk.arm_crash)."""


class _File:
    __slots__ = ("data", "synced")

    def __init__(self) -> None:
        self.data = bytearray()
        self.synced = b""


class SimDisk:
    def __init__(self, rng: random.Random | None = None) -> None:
        self.rng = rng or random.Random(0)
        self._names: dict[str, _File] = {}
        self._durable: dict[str, _File] = {}
        self._dirs: set[str] = {""}
        self._removed: dict[str, set[str]] = {}  # tree removed, not yet durably -> its directories
        # the last write: file, offset, length, and whether it was a write_at (else an append)
        self._last_write: tuple[_File, int, int, bool] | None = None
        self.syncs = 0
        self.dir_syncs = 0
        self.crashes = 0
        self._sync_points_left: int | None = None

    # -- the Disk interface ------------------------------------------------------------------
    def open(self, path: str) -> None:
        self._check_parent(path)
        self._names.setdefault(path, _File())

    def append_parts(self, path: str, parts: list[bytes]) -> int:
        return self.append(path, b"".join(parts))  # one append: it tears as one

    def append(self, path: str, data: bytes) -> int:
        f = self._get(path)
        offset = len(f.data)
        f.data += data
        self._last_write = (f, offset, len(data), False)
        return offset

    def write_at(self, path: str, offset: int, parts: list[bytes]) -> None:
        f = self._get(path)
        data = b"".join(parts)
        if offset > len(f.data):
            f.data += bytes(offset - len(f.data))
        f.data[offset:offset + len(data)] = data
        self._last_write = (f, offset, len(data), True)

    def read(self, path: str, offset: int = 0, size: int | None = None) -> bytes:
        f = self._get(path)
        end = len(f.data) if size is None else offset + size
        return bytes(f.data[offset:end])

    def read_file(self, path: str) -> bytes:
        return bytes(self._get(path).data)

    def size(self, path: str) -> int:
        return len(self._get(path).data)

    def exists(self, path: str) -> bool:
        return path in self._names or path in self._dirs

    def truncate(self, path: str, size: int) -> None:
        f = self._get(path)
        del f.data[size:]

    def sync(self, path: str) -> None:
        self._sync_point()
        f = self._get(path)
        f.synced = bytes(f.data)
        self.syncs += 1

    def rename(self, src: str, dst: str) -> None:
        self._check_parent(dst)
        self._names[dst] = self._names.pop(src)

    def remove(self, path: str) -> None:
        del self._names[path]

    def remove_tree(self, path: str) -> None:
        if path not in self._dirs:
            return
        inside = path + "/"
        for name in [n for n in self._names if n.startswith(inside)]:
            del self._names[name]
        gone = {d for d in self._dirs if d == path or d.startswith(inside)}
        for pending in [r for r in self._removed if r.startswith(inside)]:
            gone |= self._removed.pop(pending)  # a tree inside it, removed earlier: one removal now
        self._dirs -= gone
        self._removed[path] = gone | self._removed.get(path, set())

    def listdir(self, path: str) -> list[str]:
        prefix = path + "/" if path else ""
        names = {p[len(prefix):] for p in self._names if _parent(p) == path}
        names |= {d[len(prefix):] for d in self._dirs if d and _parent(d) == path}
        return sorted(names)

    def makedirs(self, path: str) -> None:
        while path and path not in self._dirs:
            self._dirs.add(path)
            path = _parent(path)

    def fsync_dir(self, path: str) -> None:
        self._sync_point()
        self.dir_syncs += 1
        for name in [n for n in self._durable if _parent(n) == path]:
            del self._durable[name]
        for name, f in self._names.items():
            if _parent(name) == path:
                self._durable[name] = f
        for root in [r for r in self._removed if _parent(r) == path]:
            del self._removed[root]
            inside = root + "/"
            # durable files of the removed tree are gone for good; a file made durable in a
            # directory re-made at the same place since then is not one of them
            for name in [n for n, f in self._durable.items() if n.startswith(inside) and self._names.get(n) is not f]:
                del self._durable[name]

    def close(self) -> None:
        """Nothing is held open in memory."""

    def files(self) -> list[str]:
        """Every file's path (tests compare whole disks with it)."""
        return sorted(self._names)

    # -- faults --------------------------------------------------------------------------------
    def arm_crash(self, sync_points: int) -> None:
        """Let `sync_points` more syncs/fsync_dirs happen; the next one raises SimCrash instead.

        The caller then calls `crash()`: this is how a test stops a node between a write and its
        sync, or halfway through a rollover, the way a power cut would.
        """
        self._sync_points_left = sync_points

    def _sync_point(self) -> None:
        if self._sync_points_left is None:
            return
        if self._sync_points_left == 0:
            self._sync_points_left = None
            raise SimCrash()
        self._sync_points_left -= 1

    def crash(self, torn: bool = False) -> None:
        """Lose everything not durable; with `torn`, keep part of the last unsynced append, or of
        the last unsynced write_at."""
        self.crashes += 1
        self._sync_points_left = None
        keep: tuple[_File, bytes] | None = None
        if torn and self._last_write is not None and self._last_write[3]:
            keep = self._torn_write_at(*self._last_write[:3])
        elif torn and self._last_write is not None:
            f, offset, length, _ = self._last_write
            unsynced_append = (len(f.synced) <= offset and len(f.data) >= offset + length
                               and bytes(f.data[:len(f.synced)]) == f.synced)
            if unsynced_append and length > 1:
                cut = offset + self.rng.randrange(1, length)
                keep = (f, bytes(f.data[:cut]))
        self._names = dict(self._durable)
        for dirs in self._removed.values():
            self._dirs |= dirs
        self._removed.clear()
        for f in set(self._names.values()):
            f.data = bytearray(f.synced)
        if keep is not None:
            f, data = keep
            f.data = bytearray(data)
            f.synced = data
        self._last_write = None

    def _torn_write_at(self, f: _File, offset: int, length: int) -> tuple[_File, bytes] | None:
        """The synced bytes with a strict prefix of that write over them, when that write is all
        that is unsynced in the file."""
        def over_synced(end: int) -> bytearray:
            out = bytearray(f.synced)
            if offset > len(out):
                out += bytes(offset - len(out))
            out[offset:end] = f.data[offset:end]
            return out
        if length < 2 or over_synced(offset + length) != f.data:
            return None
        return f, bytes(over_synced(offset + self.rng.randrange(1, length)))

    def flip_byte(self, path: str, offset: int) -> None:
        """Corrupt one byte durably (a media error, not a crash)."""
        f = self._get(path)
        f.data[offset] ^= 0xFF
        if offset < len(f.synced):
            synced = bytearray(f.synced)
            synced[offset] ^= 0xFF
            f.synced = bytes(synced)

    def _get(self, path: str) -> _File:
        try:
            return self._names[path]
        except KeyError:
            raise FileNotFoundError(path) from None

    def _check_parent(self, path: str) -> None:
        if _parent(path) not in self._dirs:
            raise FileNotFoundError(_parent(path))


def _parent(path: str) -> str:
    return path.rpartition("/")[0]
