"""The durable storage of one queue host: its message stores, its queues' index directories, the
group commit, garbage collection and the memory target. A shell module: it owns files and asks
psutil; every decision about what a message's state is lives in persist/classic.

Layout under the node's data dir:
    msg_stores/<host>/persistent/N.rdq   the host's shared store (clean.dat after a clean stop)
    msg_stores/<host>/transient/         paged-out transient bodies, wiped at every start
    queues/<digest>/N.idx                one queue index per durable queue (clean.terms after a
    queues/<digest>/queue.name           clean stop); queue.name holds [vhost, name]
The store lives inside the queue host process, so "the msg store crashed" and "the queue host
crashed" are the same event: the supervisor restarts the host, the node re-creates its queues, and
`recover` below rebuilds everything from these files.

Recovery (`recover`, once per host process, before its first queue is created): open the stores;
for every queue directory placed on this host, recover its index if the queue is durable and in the
registry (a crash loses no confirmed message), or delete it (the queue was deleted, or was
exclusive); only then `finish_recovery()` on the store, since the store's reference counts are
rebuilt from every index. The backings wait in `_recovered` until the node's create asks for them.

Group commit (`mark` / `_commit`), THE ORDERING RULE of durable queues:
    a queue actor holds back every `confirm` it would send; after the current loop turn (all the
    frames the mailbox drained in it) `_commit` calls `flush()` on every queue touched in that turn:
    the store's fdatasync, then the index's, THEN the held confirms go out. Acks and deliveries
    written in the turn become durable in the same flush, so after kill -9 only the acks of the
    last turn can come back (as redeliveries). The interval is one loop turn: never per message,
    and never longer than the work already waiting.

Memory (`apply_memory`): when the node's RSS passes paging_ratio x watermark x total RAM, every
queue's RAM target is cut to (its bodies in RAM) x threshold / used x `ram_target_headroom`, so a
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

from persist.classic.durable_queue import DurableBacking, Recovered
from persist.classic.msg_store import MsgStore
from persist.disk import RealDisk

log = structlog.get_logger("warren.queue.storage")

NAME_FILE = "queue.name"
housekeeping_interval_s = 1.0  # memory check and store GC
ram_target_headroom = 0.8
ram_release_ratio = 0.7

Key = tuple[str, str]  # (vhost, name)


class Flushable(Protocol):
    def flush(self) -> None: ...


def queue_dir(vhost: str, name: str) -> str:
    return "queues/" + hashlib.blake2b(f"{vhost}\0{name}".encode(), digest_size=12).hexdigest()


def node_rss(data_dir: str) -> int:
    """RSS of the node: every process running the node's command line (its main process, whose
    pid is in <data_dir>/ready, the Thespian admin and the hosts, which the admin's daemonising
    takes out of the main process's tree); this process alone until the node is ready."""
    try:
        cmdline = psutil.Process(json.loads(Path(data_dir, "ready").read_text())["pid"]).cmdline()
        procs = [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == cmdline]
    except (OSError, ValueError, KeyError, psutil.Error):
        procs = [psutil.Process()]
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


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
        self.backings: dict[Key, DurableBacking] = {}
        self._recovered: dict[Key, tuple[DurableBacking, Recovered]] = {}
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
        for entry in self.disk.listdir("queues"):
            directory = f"queues/{entry}"
            key = self._read_name(directory)
            if key is None or not self.placed_here(*key):
                continue
            if key not in keep:
                self._remove_dir(directory)
                deleted += 1
                continue
            backing = self._backing(directory, lazy=False)
            r = backing.recover()
            self._recovered[key] = (backing, r)
            queues += 1
            messages += r.ready
            torn += r.torn_bytes
            dropped += r.dropped
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
        for backing in self.backings.values():
            backing.close()
        self.store.close()
        self.transient.close()
        self.disk.close()
        log.info("queue_storage.closed", host=self.host, queues=len(self.backings))

    # -- queues ----------------------------------------------------------------------------------
    def open_queue(self, vhost: str, name: str, *, lazy: bool) -> tuple[DurableBacking, int]:
        """The backing of a durable queue (recovered, or new and empty) and the msg_id to go on from."""
        assert self.recovered
        key = (vhost, name)
        found = self._recovered.pop(key, None)
        if found is not None:
            backing, r = found
            backing.set_lazy(lazy)
        else:
            directory = queue_dir(vhost, name)
            self.disk.makedirs(directory)
            with open(os.path.join(self.data_dir, directory, NAME_FILE), "w") as f:
                json.dump([vhost, name], f)
            self.disk.fsync_dir(directory)
            backing = self._backing(directory, lazy)
            r = backing.recover()
        self.backings[key] = backing
        return backing, r.next_msg_id

    def delete_queue(self, vhost: str, name: str) -> None:
        backing = self.backings.pop((vhost, name), None)
        if backing is not None:
            backing.delete()
            self._remove_dir(queue_dir(vhost, name))

    def _backing(self, directory: str, lazy: bool) -> DurableBacking:
        return DurableBacking(self.disk, directory, self.store, self.transient, lazy=lazy,
                              embed_below=self.embed_below)

    def _read_name(self, directory: str) -> Key | None:
        try:
            vhost, name = json.loads(Path(self.data_dir, directory, NAME_FILE).read_text())
            return vhost, name
        except (OSError, ValueError):
            return None

    def _remove_dir(self, directory: str) -> None:
        for entry in self.disk.listdir(directory):
            self.disk.remove(f"{directory}/{entry}")
        shutil.rmtree(os.path.join(self.data_dir, directory), ignore_errors=True)
        self.disk.fsync_dir("queues")

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
            for backing in self.backings.values():
                backing.set_ram_target(int(backing.vq.alpha_count * factor))
            if not self._paging:
                log.info("queue_storage.paging_started", host=self.host, used=used, threshold=threshold)
            self._paging = True
        elif self._paging and used < threshold * ram_release_ratio:
            for backing in self.backings.values():
                backing.set_ram_target(None)
            self._paging = False
            log.info("queue_storage.paging_stopped", host=self.host, used=used, threshold=threshold)

    async def run(self, threshold: int, ensure_recovered: Callable[[], None]) -> None:
        """Every `housekeeping_interval_s`: memory targets and store GC. Closes cleanly when the
        host loop ends (asyncio cancels this task at shutdown)."""
        try:
            while True:
                await asyncio.sleep(housekeeping_interval_s)
                ensure_recovered()
                if not self.recovered:
                    continue
                self.apply_memory(node_rss(self.data_dir), threshold)
                if self.store.collect_garbage():
                    log.info("queue_storage.gc", host=self.host, store=self.store.summary())
        finally:
            if self.recovered:
                self.close()

    # -- inspection ------------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"host": self.host, "queues": len(self.backings)}
        for label, store in (("persistent", self.store), ("transient", self.transient)):
            s = store.summary()
            out[label] = {"files": s.files, "messages": s.messages, "live_bytes": s.live_bytes,
                          "garbage_bytes": s.garbage_bytes, "disk_bytes": s.disk_bytes,
                          "gc_runs": s.gc_runs, "files_deleted": s.files_deleted}
        return out
