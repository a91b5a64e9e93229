"""DurableBacking (queue index + message stores + paging) against a tiny model, as a state machine.

The model is the ready list (ids in order), the unacked set and, for crash checks, which messages
were confirmed and which acks were made durable by a flush. Rules: publish, flush (confirm), fetch,
ack, requeue, purge, GC, set_ram_target, clean restart, and dirty crash. A crash is simulated on real
files (CrashDisk): every byte not covered by a sync is lost, or with `torn` a random prefix of it
survives (a kill -9 in the middle of a write). After a crash the model allows duplicates of a sort
(acked-but-unsynced messages may come back, unconfirmed ones may or may not) but never the loss of a
confirmed message; after a clean stop acked messages never come back and nothing else is lost.
"""
from __future__ import annotations

import random
import shutil
import tempfile

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from persist.classic.durable_queue import DurableBacking
from persist.classic.msg_store import MsgStore
from tests.classic_store.crashdisk import CrashDisk
from wire.properties import BasicProperties, encode_content_header

EMBED_BELOW = 64
PERSISTENT = encode_content_header(60, 0, BasicProperties(delivery_mode=2))
TRANSIENT = encode_content_header(60, 0, BasicProperties(delivery_mode=1))


def message(msg_id: int, persistent: bool, big: bool) -> tuple:
    body = (b"%d:" % msg_id) * (40 if big else 1)
    return (msg_id, False, "ex", f"rk{msg_id % 3}", PERSISTENT if persistent else TRANSIENT, body)


class BackingMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="classic_store_")
        self.disk = CrashDisk(self.root)
        self.rng = random.Random(0)
        self.lazy = False
        self.ram_max = 4
        self._open()
        self.next_id = 0
        self.content: dict[int, tuple] = {}
        self.persistent: dict[int, bool] = {}
        self.ready: list[int] = []  # ids in the order the backing must hand them out
        self.redelivered: set[int] = set()
        self.unacked: set[int] = set()
        self.unconfirmed: list[int] = []
        self.confirmed: set[int] = set()
        self.acked_unsynced: set[int] = set()
        self.acked_synced: set[int] = set()

    def _open(self) -> None:
        self.store = MsgStore(self.disk, "msg_store_persistent", file_size_limit=1500)
        self.tstore = MsgStore(self.disk, "msg_store_transient", transient=True,
                               file_size_limit=1500)
        self.store.open()
        self.tstore.open()
        self.backing = DurableBacking(self.disk, "queues/q", self.store, self.tstore,
                                      embed_below=EMBED_BELOW, segment_entries=8,
                                      lazy=self.lazy, ram_max_messages=self.ram_max)
        self.recovered = self.backing.recover()
        self.store.finish_recovery()

    def teardown(self) -> None:
        self.disk.close()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- rules -----------------------------------------------------------------------------------
    @rule(kinds=st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=12))
    def publish(self, kinds: list[tuple[bool, bool]]) -> None:
        msgs = []
        for persistent, big in kinds:
            m = message(self.next_id, persistent, big)
            self.content[self.next_id] = m
            self.persistent[self.next_id] = persistent
            msgs.append(m)
            self.next_id += 1
        self.backing.publish(msgs)
        ids = [m[0] for m in msgs]
        self.ready += ids
        self.unconfirmed += ids

    @rule()
    def flush(self) -> None:
        assert self.backing.flush() == self.unconfirmed
        self.confirmed.update(i for i in self.unconfirmed if self.persistent[i])
        self.unconfirmed = []
        self.acked_synced |= self.acked_unsynced
        self.acked_unsynced = set()

    @rule(n=st.integers(1, 20))
    def fetch(self, n: int) -> None:
        got = self.backing.fetch(n)
        expected = sorted(self.ready)[:n]
        assert [m[0] for m in got] == expected
        for m in got:
            assert m[2:] == self.content[m[0]][2:]
            assert m[1] == (m[0] in self.redelivered), m
            self.ready.remove(m[0])
            self.unacked.add(m[0])

    def _settle(self, ids: list[int]) -> None:
        for i in ids:
            if self.persistent[i]:
                self.acked_unsynced.add(i)

    @precondition(lambda self: self.unacked)
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        ids = data.draw(st.lists(st.sampled_from(sorted(self.unacked)), unique=True, min_size=1))
        self.backing.ack(ids)
        self.unacked -= set(ids)
        self._settle(ids)

    @precondition(lambda self: self.unacked)
    @rule(data=st.data())
    def requeue(self, data: st.DataObject) -> None:
        ids = data.draw(st.lists(st.sampled_from(sorted(self.unacked)), unique=True, min_size=1))
        self.backing.requeue(ids)
        self.unacked -= set(ids)
        self.ready += ids
        self.redelivered |= set(ids)

    @rule()
    def purge(self) -> None:
        assert self.backing.purge() == len(self.ready)
        self._settle(self.ready)
        self.ready = []

    @rule()
    def collect_garbage(self) -> None:
        self.store.collect_garbage()
        s = self.store.summary()
        on_disk = sum(self.disk.size(f"msg_store_persistent/{n}")
                      for n in self.disk.listdir("msg_store_persistent") if n.endswith(".rdq"))
        assert s.disk_bytes == on_disk

    @rule(ram_max=st.sampled_from([0, 2, 4, 100]), lazy=st.booleans())
    def set_ram_target(self, ram_max: int, lazy: bool) -> None:
        self.ram_max, self.lazy = ram_max, lazy
        self.backing.set_ram_target(ram_max)
        self.backing.set_lazy(lazy)

    @rule()
    def clean_restart(self) -> None:
        self.backing.close()
        self.store.close()
        self._open()
        assert self.recovered.clean
        # Transient messages are gone; what consumers held comes back redelivered, in place.
        self.ready = sorted(i for i in self.ready + list(self.unacked) if self.persistent[i])
        self.redelivered |= self.unacked
        self.unacked = set()
        self.unconfirmed = []
        self.acked_synced |= self.acked_unsynced
        self.acked_unsynced = set()
        assert self.recovered.ready == len(self.ready)

    @rule(torn=st.booleans(), seed=st.integers(0, 1000))
    def crash(self, torn: bool, seed: int) -> None:
        self.disk.crash(random.Random(seed), torn)
        self._open()
        assert not self.recovered.clean
        held = set(self.ready) | self.unacked
        must = {i for i in held if i in self.confirmed}
        allowed = {i for i in held if self.persistent[i]} | self.acked_unsynced
        got = self.backing.fetch(10**6)
        ids = [m[0] for m in got]
        assert ids == sorted(set(ids)), "duplicates or disorder after recovery"
        assert must <= set(ids), f"confirmed messages lost: {sorted(must - set(ids))}"
        assert set(ids) <= allowed, f"resurrected: {sorted(set(ids) - allowed)}"
        assert not set(ids) & self.acked_synced
        for m in got:
            assert m[1] is True and m[2:] == self.content[m[0]][2:]
        # Hand them back: the model restarts from exactly what was recovered.
        self.backing.requeue(ids)
        self.ready = ids
        self.redelivered |= set(ids)
        self.unacked = set()
        self.unconfirmed = []
        self.confirmed &= set(ids)
        self.acked_unsynced = set()

    # -- invariants --------------------------------------------------------------------------------
    @invariant()
    def counts_match(self) -> None:
        stats = self.backing.stats()
        assert stats.ready == len(self.ready)
        assert stats.unacked == len(self.unacked)
        self.backing.vq.check()
        if self.lazy:
            assert stats.ram_messages <= len(self.redelivered & set(self.ready))
        else:
            assert stats.ram_messages <= self.ram_max + len(self.redelivered & set(self.ready))


TestBackingMachine = BackingMachine.TestCase
TestBackingMachine.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
