"""The durable storage of one queue host: its message stores, its queues' index directories, the
group commit, garbage collection and the memory target. A shell module: it owns files and asks
psutil; every decision about what a message's state is lives in persist/classic.

Layout under the node's data dir:
    msg_stores/<host>/persistent/N.rdq   the host's shared store (clean.dat after a clean stop)
    msg_stores/<host>/transient/         paged-out transient bodies, wiped at every start
    queues/<digest>/N.idx                one queue index per durable queue (clean.terms after a
    queues/<digest>/queue.name           clean stop); queue.name holds [vhost, name], or
                                         [vhost, name, max_priority] for a priority queue, whose
    queues/<digest>/<p>/N.idx            index is one directory per level p = 0..max_priority
    transient_queues/<host>/<digest>[/<p>]/N.idx   what non-durable queues paged out; made at a
                                         queue's first page-out (never per declare), and the whole
                                         host's tree is wiped at every start
The store lives inside the queue host process, so "the msg store crashed" and "the queue host
crashed" are the same event: the supervisor restarts the host, the node re-creates its queues, and
`recover` below rebuilds everything from these files.

Recovery (`recover`, once per host process, before its first queue is created): open the stores;
for every queue directory placed on this host, recover its index if the queue is durable and in the
registry (a crash loses no confirmed message; a priority queue per level, and it goes on from the
highest msg_id of any level), or delete it (the queue was deleted, or was exclusive); non-durable
queues' index directories are all deleted (their messages never outlive the run); only then `finish_recovery()` on the store, since the store's reference counts are
rebuilt from every index. The backings wait in `_recovered` until the node's create asks for them.

Group commit (`mark` / `_commit`), THE ORDERING RULE of durable queues:
    a queue actor holds back every `confirm` it would send; after the current loop turn (all the
    frames the mailbox drained in it) `_commit` calls `flush()` on every queue touched in that turn:
    the store's fdatasync, then the index's, THEN the held confirms go out. Acks and deliveries
    written in the turn become durable in the same flush, so after kill -9 only the acks of the
    last turn can come back (as redeliveries). The interval is one loop turn: never per message,
    and never longer than the work already waiting.

Non-durable queues (`open_transient_queue`) get a `SpillReady` per level: RAM until lazy mode or
a RAM target asks for paging. They are never part of the group commit (their confirms leave at
once); the housekeeping flushes the ones that paged, once per interval, so that their index drops
the segments whose messages all left.

Memory (`apply_memory`): when the node's RSS passes paging_ratio x watermark x total RAM, every
queue's (every level's) RAM target is cut to (its bodies in RAM) x threshold / used x `ram_target_headroom`, so a
growing backlog pages out instead of raising the alarm; below `ram_release_ratio` of the threshold
the targets are lifted again.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

import psutil
import structlog

from persist.classic.spill import SpillReady
from persist.classic.durable_queue import DurableBacking
from persist.classic.msg_store import MsgStore
from persist.disk import RealDisk

log = structlog.get_logger("warren.queue.storage")

NAME_FILE = "queue.name"
housekeeping_interval_s = 1.0  # memory check and store GC
ram_target_headroom = 0.8
ram_release_ratio = 0.7

Key = tuple[str, str]  # (vhost, name)
Pageable = DurableBacking | SpillReady  # what a RAM target applies to: a queue, or one level of it


class Flushable(Protocol):
    def flush(self) -> None: ...


def _digest(vhost: str, name: str) -> str:
    return hashlib.blake2b(f"{vhost}\0{name}".encode(), digest_size=12).hexdigest()


def queue_dir(vhost: str, name: str) -> str:
    return "queues/" + _digest(vhost, name)


def level_dirs(directory: str, max_priority: int | None) -> list[str]:
    """The index directories of a queue: itself, or one per priority level."""
    if max_priority is None:
        return [directory]
    return [f"{directory}/{p}" for p in range(max_priority + 1)]


def ram_messages(p: Pageable) -> int:
    return p.ram_messages if isinstance(p, SpillReady) else p.vq.alpha_count


class NodeMemory:
    """RSS of the node: every process running the node's command line (its main process, whose
    pid is in <data_dir>/ready, the Thespian admin and the hosts, which the admin's daemonising
    takes out of the main process's tree); this process alone until the node is ready.

    Finding them walks every process on the machine (~5 ms), so the set is kept and walked again
    only when one of them is gone (a restarted host has a new pid) or `rescan_interval_s` passed."""

    rescan_interval_s = 30.0

    def __init__(self, data_dir: str) -> None:
        self.data_dir = data_dir
        self._procs: list[psutil.Process] = []
        self._found_at = float("-inf")

    def rss(self, now: float) -> int:
        if now - self._found_at >= self.rescan_interval_s:
            self._find(now)
        total = 0
        for p in self._procs:
            try:
                total += p.memory_info().rss
            except psutil.Error:
                self._found_at = float("-inf")  # gone: walk again next time
        return total

    def _find(self, now: float) -> None:
        try:
            cmdline = psutil.Process(json.loads(Path(self.data_dir, "ready").read_text())["pid"]).cmdline()
            self._procs = [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == cmdline]
            self._found_at = now
        except (OSError, ValueError, KeyError, psutil.Error):
            self._procs = [psutil.Process()]  # not ready yet: look again next time


class HostStorage:
    def __init__(self, data_dir: str, host: str, *, embed_below: int, file_size_limit: int,
                 placed_here: Callable[[str, str], bool]) -> None:
        self.data_dir = data_dir
        self.host = host
        self.embed_below = embed_below
        self.placed_here = placed_here
        self.disk = RealDisk(data_dir)
        self.store = MsgStore(self.disk, f"msg_stores/{host}/persistent", file_size_limit=file_size_limit)
        self.transient = MsgStore(self.disk, f"msg_stores/{host}/transient", transient=True,
                                  file_size_limit=file_size_limit)
        self.recovered = False
        self.backings: dict[Key, DurableBacking] = {}  # durable queues
        self.priority_backings: dict[Key, list[DurableBacking]] = {}  # durable priority queues
        self.spills: dict[Key, list[SpillReady]] = {}  # non-durable queues (one per level)
        # durable queues recovered, waiting for their create: (backing per level, max_priority, next id)
        self._recovered: dict[Key, tuple[list[DurableBacking], int | None, int]] = {}
        self._dirty: dict[int, Flushable] = {}
        self._commit_scheduled = False
        self._paging = False
        self.task: asyncio.Task | None = None  # `run`, kept here so it is not collected

    # -- start and stop --------------------------------------------------------------------------
    def recover(self, durable_queues: Iterable[Key]) -> None:
        """Open the stores and recover every queue index of this host (see the module doc)."""
        assert not self.recovered
        keep = set(durable_queues)
        clean = self.store.open()
        self.transient.open()
        queues = messages = torn = dropped = deleted = 0
        transient_dir = os.path.join(self.data_dir, self._transient_root())
        if os.path.isdir(transient_dir):
            deleted += len(os.listdir(transient_dir))
            shutil.rmtree(transient_dir)
        for entry in self.disk.listdir("queues"):
            directory = f"queues/{entry}"
            named = self._read_name(directory)
            if named is None or not self.placed_here(*named[0]):
                continue
            key, max_priority = named
            if key not in keep:
                self._remove_dir(directory)
                deleted += 1
                continue
            levels = [self._backing(d, lazy=False) for d in level_dirs(directory, max_priority)]
            next_id = 0
            for backing in levels:
                r = backing.recover()
                next_id = max(next_id, r.next_msg_id)
                messages += r.ready
                torn += r.torn_bytes
                dropped += r.dropped
            self._recovered[key] = (levels, max_priority, next_id)
            queues += 1
        unreferenced = self.store.finish_recovery() if self.store.recovering else 0
        self.recovered = True
        # a crash recovery is worth a warning: it says what the crash cost
        crashed = not clean and (queues or torn or unreferenced or dropped)
        (log.warning if crashed else log.info)("queue_storage.recovered", host=self.host, store_clean=clean, queues=queues,
                 messages=messages, torn_bytes_cut=torn, index_entries_dropped=dropped,
                 store_unreferenced_dropped=unreferenced, stale_queue_dirs_deleted=deleted,
                 store=self.store.summary())

    def close(self) -> None:
        """Clean stop: every index closed (recovery terms), THEN the stores (their clean files are
        trusted only when every queue stopped cleanly too)."""
        for backing in self._durable_backings():
            backing.close()
        self.store.close()
        self.transient.close()
        self.disk.close()
        log.info("queue_storage.closed", host=self.host, queues=len(self.backings))

    # -- queues ----------------------------------------------------------------------------------
    def open_queue(self, vhost: str, name: str, *, lazy: bool) -> tuple[DurableBacking, int]:
        """The backing of a durable queue (recovered, or new and empty) and the msg_id to go on from."""
        (backing,), next_id = self._open_durable(vhost, name, None, lazy)
        self.backings[(vhost, name)] = backing
        return backing, next_id

    def open_priority_queue(self, vhost: str, name: str, max_priority: int, *,
                            lazy: bool) -> tuple[list[DurableBacking], int]:
        """The backings of a durable priority queue, one per level 0..max_priority (recovered, or
        new and empty), and the msg_id to go on from (above every level's)."""
        levels, next_id = self._open_durable(vhost, name, max_priority, lazy)
        self.priority_backings[(vhost, name)] = levels
        return levels, next_id

    def open_transient_queue(self, vhost: str, name: str, *, lazy: bool,
                             max_priority: int | None = None) -> list[SpillReady]:
        """The ready lists of a non-durable queue, one per level (one when not a priority queue).
        No IO: the index directory is made when a level first pages out."""
        assert self.recovered
        directory = f"{self._transient_root()}/{_digest(vhost, name)}"
        spills = [SpillReady(DurableBacking(self.disk, d, self.store, self.transient, durable=False,
                                            lazy=lazy, embed_below=self.embed_below), lazy=lazy)
                  for d in level_dirs(directory, max_priority)]
        self.spills[(vhost, name)] = spills
        return spills

    def _open_durable(self, vhost: str, name: str, max_priority: int | None,
                      lazy: bool) -> tuple[list[DurableBacking], int]:
        assert self.recovered
        key = (vhost, name)
        directory = queue_dir(vhost, name)
        found = self._recovered.pop(key, None)
        if found is not None and found[1] != max_priority:
            # the registry's arguments changed under the files: what they hold is not this queue
            log.warning("queue_storage.layout_mismatch", vhost=vhost, queue=name,
                        on_disk=found[1], declared=max_priority)
            self._remove_dir(directory)
            found = None
        if found is not None:
            levels, _, next_id = found
            for backing in levels:
                backing.set_lazy(lazy)
            return levels, next_id
        dirs = level_dirs(directory, max_priority)
        for d in dirs:
            self.disk.makedirs(d)
        with open(os.path.join(self.data_dir, directory, NAME_FILE), "w") as f:
            json.dump([vhost, name] if max_priority is None else [vhost, name, max_priority], f)
        self.disk.fsync_dir(directory)
        levels = [self._backing(d, lazy) for d in dirs]
        for backing in levels:
            backing.recover()
        return levels, 0

    def delete_queue(self, vhost: str, name: str) -> None:
        key = (vhost, name)
        levels = [b for b in [self.backings.pop(key, None)] if b is not None]
        levels += self.priority_backings.pop(key, [])
        for backing in levels:
            backing.delete()
        if levels:
            self._remove_dir(queue_dir(vhost, name))
        spills = self.spills.pop(key, None)
        if spills is not None:
            for spill in spills:
                spill.backing.delete()
            # a non-durable queue that never paged has no directory: no IO at all then
            directory = os.path.join(self.data_dir, self._transient_root(), _digest(vhost, name))
            if os.path.isdir(directory):
                self._remove_tree(os.path.relpath(directory, self.data_dir))

    def _transient_root(self) -> str:
        return f"transient_queues/{self.host}"

    def _durable_backings(self) -> list[DurableBacking]:
        return list(self.backings.values()) + [b for levels in self.priority_backings.values() for b in levels]

    def _pageables(self) -> list[Pageable]:
        return self._durable_backings() + [s for spills in self.spills.values() for s in spills]

    def _backing(self, directory: str, lazy: bool) -> DurableBacking:
        return DurableBacking(self.disk, directory, self.store, self.transient, lazy=lazy,
                              embed_below=self.embed_below)

    def _read_name(self, directory: str) -> tuple[Key, int | None] | None:
        """(vhost, name) and max_priority (None: not a priority queue) from queue.name."""
        try:
            named = json.loads(Path(self.data_dir, directory, NAME_FILE).read_text())
            vhost, name = named[0], named[1]
            max_priority = named[2] if len(named) > 2 else None
            return (vhost, name), max_priority
        except (OSError, ValueError, IndexError, TypeError):
            return None

    def _remove_dir(self, directory: str) -> None:
        self._remove_tree(directory)
        self.disk.fsync_dir("queues")

    def _remove_tree(self, directory: str) -> None:
        """Delete a queue's directory; its files through the disk first (it closes what it holds open)."""
        for entry in self.disk.listdir(directory):
            path = f"{directory}/{entry}"
            if os.path.isdir(os.path.join(self.data_dir, path)):
                self._remove_tree(path)
            else:
                self.disk.remove(path)
        shutil.rmtree(os.path.join(self.data_dir, directory), ignore_errors=True)

    # -- group commit ----------------------------------------------------------------------------
    def mark(self, queue: Flushable) -> None:
        """`queue` wrote something (or holds confirms) in this loop turn: flush it at its end."""
        self._dirty[id(queue)] = queue
        if not self._commit_scheduled:
            self._commit_scheduled = True
            asyncio.get_running_loop().call_soon(self._commit)

    def forget(self, queue: Flushable) -> None:
        self._dirty.pop(id(queue), None)

    def _commit(self) -> None:
        self._commit_scheduled = False
        dirty, self._dirty = self._dirty, {}
        for queue in dirty.values():
            queue.flush()  # the first one syncs the shared store; the rest find it clean

    # -- memory and GC ---------------------------------------------------------------------------
    def apply_memory(self, used: int, threshold: int) -> None:
        if used > threshold:
            factor = threshold / used * ram_target_headroom
            for p in self._pageables():
                p.set_ram_target(int(ram_messages(p) * factor))
            if not self._paging:
                log.info("queue_storage.paging_started", host=self.host, used=used, threshold=threshold)
            self._paging = True
        elif self._paging and used < threshold * ram_release_ratio:
            for p in self._pageables():
                p.set_ram_target(None)
            self._paging = False
            log.info("queue_storage.paging_stopped", host=self.host, used=used, threshold=threshold)

    async def run(self, threshold: int, ensure_recovered: Callable[[], None]) -> None:
        """Every `housekeeping_interval_s`: memory targets and store GC. Closes cleanly when the
        host loop ends (asyncio cancels this task at shutdown)."""
        memory = NodeMemory(self.data_dir)
        loop = asyncio.get_running_loop()
        try:
            while True:
                await asyncio.sleep(housekeeping_interval_s)
                ensure_recovered()
                if not self.recovered:
                    continue
                self.apply_memory(memory.rss(loop.time()), threshold)
                self.flush_transient()
                if self.store.collect_garbage():
                    log.info("queue_storage.gc", host=self.host, store=self.store.summary())
        finally:
            if self.recovered:
                self.close()

    def flush_transient(self) -> None:
        """Non-durable queues that page: drop their emptied index segments (no confirm waits)."""
        for spills in self.spills.values():
            for spill in spills:
                if spill.spilled:
                    spill.backing.flush()

    # -- inspection ------------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"host": self.host, "queues": len(self.backings) + len(self.priority_backings),
                               "non_durable_queues": len(self.spills)}
        for label, store in (("persistent", self.store), ("transient", self.transient)):
            s = store.summary()
            out[label] = {"files": s.files, "messages": s.messages, "live_bytes": s.live_bytes,
                          "garbage_bytes": s.garbage_bytes, "disk_bytes": s.disk_bytes,
                          "gc_runs": s.gc_runs, "files_deleted": s.files_deleted}
        return out
