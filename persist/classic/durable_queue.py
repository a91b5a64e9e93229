"""DurableBacking: the message bodies of one classic queue, in RAM and on disk.

Theory of operation: the queue core keeps consumers, credit and who holds what unacked; the backing
keeps the messages. It glues the queue index (one per queue), the node's two message stores and the
variable queue (paging.py) together and is the `paging.Backend` that does the variable queue's IO.

Publishing: a message is persistent when the queue is durable and its delivery-mode is 2. Its index
record (with the message embedded when header + body < `embed_below`, else naming a store guid) and
its store record are written when the group commit reaches the queue (`flush`), or sooner when
paging or `write_pending` asks; transient messages stay in RAM until paging writes them (to the
index and the transient store, never synced). Deferring the write keeps it off the path from publish
to delivery (a queue with a waiting consumer hands the message out first), and a message acked
before its commit is never written at all: nothing on disk ever names it, as RabbitMQ's queue index
journal drops a publish, delivery and ack that meet in it. A message delivered before it was written
gets its delivery record with its publish record. `flush()` is the group commit:

    ORDERING RULE: store.sync() THEN index.sync() THEN return the confirms. A persistent message is
    confirmable only after the sync that covers BOTH its body and its index entry; an index entry
    synced before its body (the OS may write back early) is dropped at recovery as "body missing",
    and it was never confirmed.

Transient messages published since the last flush are confirmed by the same flush (they are "safe"
as soon as the queue holds them, as in RabbitMQ). `fetch` hands messages out in seq order and writes
DEL records; `ack` writes ACK records and drops store references (the store turns them into
garbage); `requeue` puts messages back at their original place, redelivered. Acks are durable at the
next flush: after kill -9 only the acks of the last interval come back (redelivered).

Message ids: the backing's seq ids ARE the queue's msg_ids; after `recover()` the queue must number
new messages from `Recovered.next_msg_id` on. Store guids are `guids[i]` when the publisher gives
them (a message routed to several queues is then stored once), else this queue's tag + seq.

A new durable queue writes nothing until its first write: its directory and the file that names
it (`NewDirectory`) are made then, and synced with the commit that carries that write, so
declaring a queue that never holds a message costs no IO (as RabbitMQ's queue index makes its
directory on first use) and a crash before that commit leaves nothing confirmed behind.

Expiry: the queue core owns each message's absolute expiry (its msg_id -> expires-at map, handed in
once by `attach_expiry`). The backing writes a message's expiry into its PUB record and puts the
expiry of every entry it reads back from disk into the map, so a recovered message's TTL keeps
running across a restart, as in RabbitMQ.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from persist.classic.message import Message
from persist.classic.msg_store import MsgStore
from persist.classic.paging import Entry, PagingStats, VariableQueue
from persist.classic.queue_index import SEGMENT_ENTRIES, PubRecord, QueueIndex
from persist.classic.records import decode_message, message_parts
from persist.disk import Disk
from wire.properties import read_delivery_mode

QUEUE_INDEX_EMBED_MSGS_BELOW = 4096


class NewDirectory:
    """The directory of a new durable queue, its level directories (one per priority level, or the
    directory itself) and the file that names it, made at the queue's first write (`make`) and
    made durable in the syncs of that write's commit (`sync`: the name file, the directory, and
    its entry in `parent`). Anything a crash left at `path` before then was never confirmed (its
    commit had not synced) and no recovery named it: `make` clears it first."""

    __slots__ = ("disk", "path", "levels", "name_file", "name", "parent", "made", "synced")

    def __init__(self, disk: Disk, path: str, levels: list[str], name_file: str, name: bytes, parent: str) -> None:
        self.disk, self.path, self.levels, self.parent = disk, path, levels, parent
        self.name_file, self.name = name_file, name
        self.made = self.synced = False

    def make(self) -> None:
        if self.made:
            return
        disk = self.disk
        if disk.exists(self.path):
            disk.remove_tree(self.path)
        for level in self.levels:
            disk.makedirs(level)
        disk.open(self.name_file)
        disk.append(self.name_file, self.name)
        self.made = True

    def sync(self) -> None:
        if self.made and not self.synced:
            self.disk.sync(self.name_file)
            self.disk.fsync_dir(self.path)
            self.disk.fsync_dir(self.parent)
            self.synced = True


@dataclass(frozen=True, slots=True)
class Recovered:
    ready: int
    next_msg_id: int
    clean: bool
    torn_bytes: int
    dropped: int  # index entries whose body was missing from the store


@dataclass(frozen=True, slots=True)
class BackingStats:
    ready: int
    unacked: int
    ram_messages: int
    ram_bytes: int
    ram_index_entries: int
    disk_only_messages: int  # ready messages whose body is not in RAM
    lazy: bool
    persistent: int  # persistent messages held, ready or unacked (RabbitMQ's messages_persistent)


class DurableBacking:
    def __init__(self, disk: Disk, directory: str, store: MsgStore, transient_store: MsgStore, *,
                 durable: bool = True, lazy: bool = False,
                 embed_below: int = QUEUE_INDEX_EMBED_MSGS_BELOW,
                 segment_entries: int = SEGMENT_ENTRIES, index_ram_max: int | None = None,
                 ram_max_messages: int | None = None, ram_max_bytes: int | None = None,
                 new_directory: NewDirectory | None = None) -> None:
        self.durable = durable
        self.store = store
        self.transient_store = transient_store
        self.embed_below = embed_below
        self.index = QueueIndex(disk, directory, segment_entries)
        self.vq = VariableQueue(self, index_ram_max=max(index_ram_max or 0, segment_entries),
                                lazy=lazy, ram_max_messages=ram_max_messages,
                                ram_max_bytes=ram_max_bytes)
        self._tag = hashlib.blake2b(directory.encode(), digest_size=8).digest()
        self._unacked: dict[int, Entry] = {}
        self._unconfirmed: list[int] = []
        self._unwritten: list[Entry] = []  # persistent, published since the last write, maybe gone since
        self.next_msg_id = 0
        self._expiry: dict[int, int] = {}  # msg_id -> expires at (ms): the core's map
        # A non-durable queue's index directory, and a new durable queue's (`new_directory`), is
        # made at its first write, not per queue.declare.
        self._new_directory = new_directory
        self._dir_made = durable and new_directory is None

    # -- start and stop --------------------------------------------------------------------------
    def recover(self) -> Recovered:
        """Load from disk. Call after the stores' `open()` and before their `finish_recovery()`."""
        if not self.durable:
            self.index.delete()
            self.index.recover()
            self._dir_made = True
            return Recovered(0, 0, True, 0, 0)
        if self.store.recovering:
            r = self.index.recover(self.store.add_ref, must_scan=True)
        else:
            r = self.index.recover(self.store.contains)
        self.vq.recover_delta(r.lo, r.next_seq, r.messages, r.body_bytes)
        self.next_msg_id = r.next_seq
        return Recovered(r.messages, r.next_seq, r.clean, r.torn_bytes, r.dropped)

    def attach_expiry(self, expiry: dict[int, int]) -> None:
        """Share the core's msg_id -> expires-at map: read when a PUB record is written, filled
        for every entry read back from disk."""
        self._expiry = expiry

    def close(self) -> None:
        """Clean stop: everything synced, recovery terms written. Close the stores after this."""
        self.write_owed()
        self.store.sync()
        if not self._dir_made:
            return  # it never wrote: nothing to recover, and the next start finds it new again
        if self._new_directory is not None:
            self._new_directory.sync()
        # the ids of messages gone before their commit were never written: the terms still count
        # them, so the queue never hands an id out twice
        self.index.next_seq = max(self.index.next_seq, self.next_msg_id)
        self.index.close()

    def delete(self) -> None:
        """The queue is deleted: drop every message and every file of its index."""
        self.purge()
        self.ack(list(self._unacked))
        if self._dir_made:
            self.index.delete()
        self._unconfirmed.clear()
        self._unwritten.clear()

    # -- the data path ---------------------------------------------------------------------------
    def publish(self, msgs: list[Message], guids: list[bytes] | None = None) -> None:
        """Enqueue messages (msg_ids ascending, from next_msg_id on). Write them and confirm them
        at `flush`."""
        entries = self._taken_in(msgs, guids)
        if entries:
            self.vq.push(entries)

    def publish_taken(self, msgs: list[Message]) -> None:
        """`publish` then `fetch` of them all, for an empty queue whose consumers take them at once
        (RabbitMQ's publish_delivered): held unacked, never queued."""
        unacked = self._unacked
        for e in self._taken_in(msgs, None):
            unacked[e.seq] = e

    def _taken_in(self, msgs: list[Message], guids: list[bytes] | None) -> list[Entry]:
        """Entries for new messages, owed to the disk when persistent, confirmed at `flush`."""
        entries = []
        unwritten = self._unwritten
        for i, m in enumerate(msgs):
            header, body = m[4], m[5]
            persistent = self.durable and read_delivery_mode(header) == 2
            e = Entry(m[0], m, persistent, len(header) + len(body),
                      guid=guids[i] if guids is not None else None, body_size=len(body))
            entries.append(e)
            if persistent:
                e.owed = True
                unwritten.append(e)
        if entries:
            assert entries[0].seq >= self.next_msg_id, "msg_ids must grow"
            self._unconfirmed.extend([e.seq for e in entries])
            self.next_msg_id = entries[-1].seq + 1
        return entries

    def write_pending(self) -> None:
        """Write every message still owed and hand what the index gathered to the OS now, unsynced
        (see `QueueIndex.write_pending`): a kill -9 keeps it."""
        self.write_owed()
        self.index.write_pending()

    def write_owed(self) -> None:
        """Write the persistent messages published since the last write that are still here (the
        group commit asks every queue for this before any of them syncs: one store sync covers
        them all)."""
        if self._unwritten:
            unwritten, self._unwritten = self._unwritten, []
            self._write_out([e for e in unwritten if e.owed])

    def flush(self) -> list[int]:
        """Group commit (see the ordering rule); return the msg_ids now confirmable, ascending."""
        self.write_owed()
        self.store.sync()
        if self._new_directory is not None:
            self._new_directory.sync()
        self.index.sync()
        done, self._unconfirmed = self._unconfirmed, []
        return done

    def fetch(self, n: int) -> list[Message]:
        """Up to `n` ready messages in order; they stay unacked here until ack or requeue."""
        entries = self.vq.take(n)
        unacked = self._unacked
        out = []
        delivered = []
        for e in entries:
            unacked[e.seq] = e
            out.append(e.message)
            if e.indexed:
                delivered.append(e.seq)
        if delivered:
            self.index.deliver(delivered)
        return out  # type: ignore[return-value]

    def ack(self, ids: Iterable[int]) -> None:
        self._forget([self._unacked.pop(i) for i in ids])

    def requeue(self, ids: Iterable[int]) -> None:
        self.vq.requeue([self._unacked.pop(i) for i in ids])

    def purge(self) -> int:
        """Drop every ready message; return how many."""
        n = 0
        for batch in self.vq.drain():
            self._forget(batch)
            n += len(batch)
        return n

    def _forget(self, entries: list[Entry]) -> None:
        """These messages left the queue for good: ACK records, store references dropped."""
        acks = []
        bodies: list[bytes] = []
        transient_bodies: list[bytes] = []
        for e in entries:
            if not e.indexed:
                e.owed = False  # never written: it stays off the disk
                continue
            acks.append((e.seq, e.persistent, e.size, e.body_size))
            if e.loc is None:
                assert e.guid is not None
                (bodies if e.persistent else transient_bodies).append(e.guid)
        if acks:
            self.index.ack(acks)
        if bodies:
            self.store.remove(bodies)
        if transient_bodies:
            self.transient_store.remove(transient_bodies)

    # -- paging ----------------------------------------------------------------------------------
    def set_ram_target(self, max_messages: int | None, max_bytes: int | None = None) -> None:
        self.vq.set_ram_target(max_messages, max_bytes)

    def set_lazy(self, lazy: bool) -> None:
        self.vq.set_lazy(lazy)

    # -- paging.Backend --------------------------------------------------------------------------
    def _write_out(self, entries: list[Entry]) -> None:
        """Append index records (and store records for big bodies); no sync."""
        if not entries:
            return
        records: list[PubRecord] = []
        items: list[tuple[bytes, tuple[bytes, ...]]] = []
        transient_items: list[tuple[bytes, tuple[bytes, ...]]] = []
        expiry = self._expiry
        for e in entries:
            m = e.message
            assert m is not None
            payload = message_parts(m[2], m[3], m[4], m[5])
            expires = expiry.get(e.seq) if expiry else None
            if e.size < self.embed_below:
                e.guid = None
                records.append((e.seq, e.persistent, None, e.size, payload, e.body_size, expires))
                continue
            if e.guid is None:
                e.guid = self._tag + e.seq.to_bytes(8, "little")
            (items if e.persistent else transient_items).append((e.guid, payload))
            records.append((e.seq, e.persistent, e.guid, e.size, None, e.body_size, expires))
        if items:
            self.store.write(items)
        if transient_items:
            self.transient_store.write(transient_items)
        if not self._dir_made:
            if self._new_directory is not None:
                self._new_directory.make()
            self.index.disk.makedirs(self.index.dir)
            self._dir_made = True
        for e, loc in zip(entries, self.index.publish(records)):
            e.loc = loc
            e.indexed = True
            e.owed = False
        # delivered before its write (held unacked now, or requeued, which a non-durable queue may
        # also spill, spill.py): it must come back redelivered
        unacked = self._unacked
        delivered = [e.seq for e in entries if e.message[1] or e.seq in unacked]  # type: ignore[index]
        if delivered:
            self.index.deliver(delivered)

    def page_out(self, entries: list[Entry]) -> None:
        self._write_out([e for e in entries if not e.indexed])

    def read_delta(self, lo: int, hi: int) -> tuple[list[Entry], int]:
        found, upto = self.index.read(lo, hi)
        expiry = self._expiry
        expiry.update([(f[0], f[7]) for f in found if f[7] is not None])
        return [Entry(seq, None, persistent, size, guid, loc, True, delivered, body_size)
                for seq, persistent, guid, size, loc, delivered, body_size, _expires in found], upto

    def load(self, entries: list[Entry]) -> None:
        embedded = [e for e in entries if e.loc is not None]
        stored = [e for e in entries if e.loc is None and e.persistent]
        transient = [e for e in entries if e.loc is None and not e.persistent]
        for group, payloads in (
                (embedded, self.index.read_bodies([e.loc for e in embedded]) if embedded else []),
                (stored, self.store.read([e.guid for e in stored]) if stored else []),
                (transient, self.transient_store.read([e.guid for e in transient])
                 if transient else [])):
            for e, payload in zip(group, payloads):
                exchange, routing_key, header, body = decode_message(payload)
                e.message = Message(e.seq, e.redelivered, exchange, routing_key, header, body)

    # -- inspection ------------------------------------------------------------------------------
    def stats(self) -> BackingStats:
        p: PagingStats = self.vq.stats()
        owed = sum([e.owed for e in self._unwritten])
        return BackingStats(p.ready, len(self._unacked), p.ram_messages, p.ram_bytes,
                            p.ram_index_entries, p.ready - p.ram_messages, p.lazy,
                            self.index.live_persistent + owed)
