"""A real disk (files under tmp_path) that can simulate kill -9 / power loss.

It records how many bytes of each file the last `sync` covered. `crash()` closes every descriptor and
truncates each file back to that synced length, so everything not synced is lost; with `torn=True`
a random prefix of each file's unsynced part survives instead, which is what a crash in the middle
of a write (or an early OS write-back) leaves: whole unsynced records and a torn one after them.
Simplifications: creating, renaming and removing a name count as durable at once (the engines
fsync_dir after each anyway), and a truncate is durable at once.
"""
from __future__ import annotations

import os
import random

from persist.disk import RealDisk


class CrashDisk(RealDisk):
    def __init__(self, root: str) -> None:
        super().__init__(root, sync_method="none")
        self.synced: dict[str, int] = {}

    def sync(self, path: str) -> None:
        super().sync(path)
        self.synced[path] = self.size(path)

    def truncate(self, path: str, size: int) -> None:
        super().truncate(path, size)
        self.synced[path] = min(self.synced.get(path, 0), size)

    def rename(self, src: str, dst: str) -> None:
        super().rename(src, dst)
        self.synced[dst] = self.synced.pop(src, 0)

    def remove(self, path: str) -> None:
        super().remove(path)
        self.synced.pop(path, None)

    def remove_tree(self, path: str) -> None:
        super().remove_tree(path)
        inside = path + "/"
        for rel in [r for r in self.synced if r.startswith(inside)]:
            del self.synced[rel]

    def crash(self, rng: random.Random, torn: bool = False) -> int:
        """Lose unsynced bytes; return how many bytes were lost."""
        self.close()
        lost = 0
        for dirpath, dirs, names in os.walk(self.root):
            dirs.sort()  # a seed must replay the same crash
            for name in sorted(names):
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, self.root).replace(os.sep, "/")
                size = os.path.getsize(full)
                keep = self.synced.get(rel, 0)
                if size > keep:
                    if torn:
                        keep += rng.randrange(0, size - keep)
                    os.truncate(full, keep)
                    self.synced[rel] = keep
                    lost += size - keep
        return lost
