"""Paging: the variable queue keeps FIFO order and bounded memory whatever the RAM target."""
import gc

import pytest
from hypothesis import given, settings, strategies as st

from persist.classic.durable_queue import DurableBacking
from persist.classic.msg_store import MsgStore
from persist.classic.paging import Entry, VariableQueue
from persist.disk import RealDisk
from wire.properties import BasicProperties, encode_content_header

PERSISTENT = encode_content_header(60, 0, BasicProperties(delivery_mode=2))
TRANSIENT = encode_content_header(60, 0, BasicProperties(delivery_mode=1))


class MemoryBackend:
    """Disk as a dict: what paged-out entries would have written, read back a 'segment' at a time."""

    def __init__(self, segment: int) -> None:
        self.segment = segment
        self.on_disk: dict[int, tuple] = {}
        self.reads = 0

    def page_out(self, entries):
        for e in entries:
            assert e.message is not None
            if not e.indexed:
                self.on_disk[e.seq] = e.message
                e.indexed = True

    def read_delta(self, lo, hi):
        self.reads += 1
        upto = min(hi, (lo // self.segment + 1) * self.segment)
        found = [Entry(s, None, True, len(self.on_disk[s][5]), indexed=True,
                       body_size=len(self.on_disk[s][5]))
                 for s in range(lo, upto) if s in self.on_disk]
        return found, upto

    def load(self, entries):
        for e in entries:
            e.message = self.on_disk[e.seq]

    def forget(self, entries):
        for e in entries:
            self.on_disk.pop(e.seq, None)


def msg(seq):
    return (seq, False, "", "k", TRANSIENT, b"x" * (seq % 7))


@settings(max_examples=60, deadline=None)
@given(ops=st.lists(st.one_of(st.tuples(st.just("push"), st.integers(1, 30)),
                              st.tuples(st.just("take"), st.integers(1, 30)),
                              st.tuples(st.just("target"), st.sampled_from([None, 0, 3, 10])),
                              st.tuples(st.just("lazy"), st.booleans())), max_size=40))
def test_fifo_and_invariants_under_any_targets(ops):
    backend = MemoryBackend(segment=5)
    vq = VariableQueue(backend, index_ram_max=5, ram_max_messages=4)
    next_seq = 0
    expected = []
    for op, arg in ops:
        if op == "push":
            entries = [Entry(s, msg(s), False, len(msg(s)[5]), body_size=len(msg(s)[5]))
                       for s in range(next_seq, next_seq + arg)]
            expected += [e.seq for e in entries]
            next_seq += arg
            vq.push(entries)
        elif op == "take":
            got = vq.take(arg)
            assert [e.seq for e in got] == expected[:arg]
            assert [e.message for e in got] == [msg(e.seq) for e in got]
            del expected[:arg]
            backend.forget(got)
        elif op == "target":
            vq.set_ram_target(arg)
        else:
            vq.set_lazy(arg)
        vq.check()
        if expected:
            assert vq.head_seq() == expected[0]  # what take(1) returns, read back from disk if need be
            vq.check()
        stats = vq.stats()
        assert stats.ready == len(expected)
        assert vq.body_bytes == sum(len(msg(s)[5]) for s in expected)  # Delta's bodies too
        assert len(vq.q3) + len(vq.q2) <= 2 * 5  # betas: a segment read on top of the limit
        if vq.lazy:
            assert stats.ram_messages == 0


def live_entries() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is Entry)


@pytest.mark.parametrize("lazy", [False, True])
def test_200k_messages_with_a_ram_target_of_1000_keep_bounded_memory(tmp_path, lazy):
    disk = RealDisk(str(tmp_path), sync_method="none")
    store = MsgStore(disk, "ps")
    tstore = MsgStore(disk, "ts", transient=True)
    store.open()
    tstore.open()
    backing = DurableBacking(disk, "q", store, tstore, lazy=lazy, ram_max_messages=1000)
    backing.recover()
    store.finish_recovery()
    total, batch = 200_000, 2000
    peak_ram = peak_index = 0
    for lo in range(0, total, batch):
        backing.publish([(s, False, "", "rk", PERSISTENT, s.to_bytes(4, "little"))
                         for s in range(lo, lo + batch)])
        backing.flush()
        stats = backing.stats()
        peak_ram = max(peak_ram, stats.ram_messages)
        peak_index = max(peak_index, stats.ram_index_entries)
    index_bound = 1000 + 2 * backing.index.n
    assert backing.stats().ready == total
    assert peak_ram <= (0 if lazy else 1000)
    assert peak_index <= index_bound
    assert live_entries() <= index_bound  # counted on the heap, not just by the queue's books
    seen = 0
    while True:
        got = backing.fetch(1000)
        if not got:
            break
        assert [m[0] for m in got] == list(range(seen, seen + len(got)))
        assert all(m[5] == m[0].to_bytes(4, "little") for m in got)
        backing.ack([m[0] for m in got])
        seen += len(got)
        stats = backing.stats()
        assert stats.ram_messages <= (0 if lazy else 1000)
        assert stats.ram_index_entries <= index_bound
    assert seen == total
    backing.flush()
    # every segment fully acked is deleted, but the one the next publish goes to
    assert disk.listdir("q") == [f"{total // backing.index.n}.idx"]
    disk.close()


def test_a_recovered_delta_counts_its_body_bytes_until_taken():
    backend = MemoryBackend(segment=5)
    backend.on_disk = {s: msg(s) for s in range(3, 12)}
    vq = VariableQueue(backend, index_ram_max=5)
    vq.recover_delta(3, 12, 9, sum(len(msg(s)[5]) for s in range(3, 12)))
    got = vq.take(4)
    assert [e.seq for e in got] == [3, 4, 5, 6]
    assert vq.body_bytes == sum(len(msg(s)[5]) for s in range(7, 12))
    vq.requeue(got[:1])
    assert vq.body_bytes == sum(len(msg(s)[5]) for s in [3] + list(range(7, 12)))
    vq.check()
    assert sum(len(batch) for batch in vq.drain()) == 6 and vq.body_bytes == 0
