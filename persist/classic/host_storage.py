"""The durable storage of one queue host: its message stores and its queues' index directories.

Layout under the disk's root (the node's data dir):
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
`recover` below rebuilds everything from these files. Every file operation goes through the
injected `Disk` (persist/disk.py: RealDisk in a node, the simulator's SimDisk in tests).

Recovery (`recover`, once per host process, before its first queue is created): open the stores;
for every queue directory placed on this host, recover its index if the queue is durable and in the
registry (a crash loses no confirmed message; a priority queue per level, and it goes on from the
highest msg_id of any level), or delete it (the queue was deleted, or was exclusive); non-durable
queues' index directories are all deleted (their messages never outlive the run); only then
`finish_recovery()` on the store, since the store's reference counts are rebuilt from every index.
The backings wait in `_recovered` until the node's create asks for them. A new durable queue touches
no file until its first write, when its directory and queue.name are made, and they are synced in
the commit that carries that write (durable_queue.py's NewDirectory), so a crash never leaves a
confirmed message in a directory that recovery cannot name, and declaring many queues that hold
nothing costs no IO. Removals (a deleted queue's directory, a stale one at recovery) are not
synced: a removal a crash undoes leaves a directory the next recovery deletes (no queue names it)
or, if the queue's record outlived the crash, the messages of a delete that was never answered.

Non-durable queues (`open_transient_queue`) get a `SpillReady` per level: RAM until lazy mode or
a RAM target asks for paging; `flush_transient` lets the ones that paged drop the index segments
whose messages all left (no confirm waits on it).

What this module does not do, and who does: the group commit that makes durable queues' writes
durable before their confirms leave (THE ORDERING RULE) is the queue host's
(actors/queue/group_commit.py); when to page and how far is flow/paging.py's decision, applied to
`pageables()` by the queue host's housekeeping (actors/queue/housekeeping.py), which also runs
`flush_transient` and `collect_garbage` on its clock.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from typing import Any

import structlog

from persist.classic.durable_queue import DurableBacking, NewDirectory
from persist.classic.msg_store import MsgStore
from persist.classic.spill import SpillReady
from persist.disk import Disk

log = structlog.get_logger("warren.queue.storage")

NAME_FILE = "queue.name"
QUEUES = "queues"

Key = tuple[str, str]  # (vhost, name)
Pageable = DurableBacking | SpillReady  # what a RAM target applies to: a queue, or one level of it


def _digest(vhost: str, name: str) -> str:
    return hashlib.blake2b(f"{vhost}\0{name}".encode(), digest_size=12).hexdigest()


def queue_dir(vhost: str, name: str) -> str:
    return f"{QUEUES}/{_digest(vhost, name)}"


def level_dirs(directory: str, max_priority: int | None) -> list[str]:
    """The index directories of a queue: itself, or one per priority level."""
    if max_priority is None:
        return [directory]
    return [f"{directory}/{p}" for p in range(max_priority + 1)]


def ram_messages(p: Pageable) -> int:
    """Ready messages whose body is in RAM: what a RAM target limits."""
    return p.ram_messages if isinstance(p, SpillReady) else p.vq.alpha_count


class HostStorage:
    def __init__(self, disk: Disk, host: str, *, embed_below: int, file_size_limit: int,
                 placed_here: Callable[[str, str], bool]) -> None:
        self.disk = disk  # the host's: `close` closes it
        self.host = host
        self.embed_below = embed_below
        self.placed_here = placed_here
        self.store = MsgStore(self.disk, f"msg_stores/{host}/persistent", file_size_limit=file_size_limit)
        self.transient = MsgStore(self.disk, f"msg_stores/{host}/transient", transient=True,
                                  file_size_limit=file_size_limit)
        self.recovered = False
        self.backings: dict[Key, DurableBacking] = {}  # durable queues
        self.priority_backings: dict[Key, list[DurableBacking]] = {}  # durable priority queues
        self.spills: dict[Key, list[SpillReady]] = {}  # non-durable queues (one per level)
        # durable queues recovered, waiting for their create: (backing per level, max_priority, next id)
        self._recovered: dict[Key, tuple[list[DurableBacking], int | None, int]] = {}

    # -- start and stop --------------------------------------------------------------------------
    def recover(self, durable_queues: Iterable[Key]) -> None:
        """Open the stores and recover every queue index of this host (see the module doc)."""
        assert not self.recovered
        keep = set(durable_queues)
        clean = self.store.open()
        self.transient.open()
        queues = messages = torn = dropped = deleted = 0
        deleted += len(self.disk.listdir(self._transient_root()))
        self.disk.remove_tree(self._transient_root())
        for entry in self.disk.listdir(QUEUES):
            directory = f"{QUEUES}/{entry}"
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
        named = [vhost, name] if max_priority is None else [vhost, name, max_priority]
        new = NewDirectory(self.disk, directory, dirs, f"{directory}/{NAME_FILE}", json.dumps(named).encode(), QUEUES)
        return [self._backing(d, lazy, new) for d in dirs], 0

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
            # a non-durable queue that never paged has no directory; a restart wipes it anyway,
            # so its removal needs no directory sync
            self.disk.remove_tree(f"{self._transient_root()}/{_digest(vhost, name)}")

    def _transient_root(self) -> str:
        return f"transient_queues/{self.host}"

    def _durable_backings(self) -> list[DurableBacking]:
        return list(self.backings.values()) + [b for levels in self.priority_backings.values() for b in levels]

    def pageables(self) -> list[Pageable]:
        """What a RAM target applies to: every durable queue or level, every non-durable level."""
        return self._durable_backings() + [s for spills in self.spills.values() for s in spills]

    def _backing(self, directory: str, lazy: bool, new: NewDirectory | None = None) -> DurableBacking:
        return DurableBacking(self.disk, directory, self.store, self.transient, lazy=lazy,
                              embed_below=self.embed_below, new_directory=new)

    def _read_name(self, directory: str) -> tuple[Key, int | None] | None:
        """(vhost, name) and max_priority (None: not a priority queue) from queue.name."""
        try:
            named = json.loads(self.disk.read_file(f"{directory}/{NAME_FILE}"))
            vhost, name = named[0], named[1]
            max_priority = named[2] if len(named) > 2 else None
            return (vhost, name), max_priority
        except (OSError, ValueError, IndexError, TypeError):
            return None

    def _remove_dir(self, directory: str) -> None:
        self.disk.remove_tree(directory)  # not synced: see the module docstring

    # -- housekeeping (the queue host's clock calls these) ---------------------------------------
    def flush_transient(self) -> None:
        """Non-durable queues that page: drop their emptied index segments (no confirm waits)."""
        for spills in self.spills.values():
            for spill in spills:
                if spill.spilled:
                    spill.backing.flush()

    def collect_garbage(self) -> None:
        """One GC pass over the persistent store (store_gc.py decides what to merge or delete)."""
        if self.store.collect_garbage():
            log.info("queue_storage.gc", host=self.host, store=self.store.summary())

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
