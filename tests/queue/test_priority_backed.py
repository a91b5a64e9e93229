"""Priority queues over backings (one DurableBacking per level) and non-durable queues over
SpillReady, on real files under tmp_path: order across and within levels, requeue to the original
place, forget routed to the level that handed a message out, paging out and back in with a small
RAM target and tiny index segments, recovery per level, and a state machine against RAM levels."""
from __future__ import annotations

from actors.messages.channel_queue import Deliver
import os
import shutil
import tempfile

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from actors.messages.alarms import MemoryUse
from persist.classic.backed import BackedReady
from actors.queue.core import ClassicQueue
from actors.queue.housekeeping import Housekeeping
from actors.queue.priority import PriorityReady
from persist.classic.spill import SpillReady
from persist.classic.host_storage import HostStorage
from persist.classic.durable_queue import DurableBacking
from persist.classic.msg_store import MsgStore
from persist.disk import RealDisk
from wire.properties import BasicProperties, encode_content_header

CH = "ch"
MAX = 3


def header(priority: int | None, persistent: bool = True) -> bytes:
    return encode_content_header(60, 0, BasicProperties(delivery_mode=2 if persistent else 1, priority=priority))


def message(msg_id: int, priority: int | None, persistent: bool = True, size: int = 10) -> tuple:
    return (msg_id, False, "", "q", header(priority, persistent), b"%d:" % msg_id + b"x" * size)


def published(tag: int, priority: int | None, persistent: bool = True, size: int = 10) -> tuple:
    return (tag, "", "q", header(priority, persistent), b"%d:" % tag + b"x" * size)


def tags(messages) -> list[int]:
    return [int(m[5].split(b":")[0]) for m in messages]


def expected_order(prios: dict[int, int | None]) -> list[int]:
    """Highest priority first (absent = 0, above MAX = MAX), FIFO within a level."""
    return sorted(prios, key=lambda t: (-min(prios[t] or 0, MAX), t))


class Stores:
    """A disk and the two message stores, as a queue host has them."""

    def __init__(self, root: str) -> None:
        self.disk = RealDisk(root, sync_method="none")
        self.store = MsgStore(self.disk, "p", file_size_limit=1 << 16)
        self.transient = MsgStore(self.disk, "t", transient=True, file_size_limit=1 << 16)
        self.store.open()
        self.transient.open()
        if self.store.recovering:
            self.store.finish_recovery()

    def backing(self, directory: str, *, durable: bool = True, **kw) -> DurableBacking:
        b = DurableBacking(self.disk, directory, self.store, self.transient, durable=durable,
                           embed_below=64, segment_entries=4, **kw)
        if durable:
            b.recover()
        return b


def backed_levels(stores: Stores, **kw) -> PriorityReady:
    return PriorityReady(MAX, [BackedReady(stores.backing(f"queues/q/{p}", **kw)) for p in range(MAX + 1)])


def spill_levels(stores: Stores, **kw) -> PriorityReady:
    return PriorityReady(MAX, [SpillReady(stores.backing(f"tq/q/{p}", durable=False, **kw))
                               for p in range(MAX + 1)])


PRIOS = [None, 3, 1, 0, 7, 2, 3, 1, None, 2, 3, 0]


def test_order_across_levels_and_fifo_within_one(tmp_path):
    ready = backed_levels(Stores(str(tmp_path)))
    q = ClassicQueue("/", "q", arguments={"x-max-priority": MAX}, ready=ready)
    q.publish(CH, [published(i, p) for i, p in enumerate(PRIOS, 1)])
    got = []
    while (m := q.get(CH, ack_required=False)[0]) is not None:
        got.append(m)
    assert tags(got) == expected_order(dict(enumerate(PRIOS, 1)))
    assert [level.backing.stats().unacked for level in ready.levels] == [0] * (MAX + 1)


def test_requeue_returns_to_the_original_place_in_its_level(tmp_path):
    ready = backed_levels(Stores(str(tmp_path)))
    q = ClassicQueue("/", "q", arguments={"x-max-priority": MAX}, ready=ready)
    q.publish(CH, [published(i, p) for i, p in enumerate(PRIOS, 1)])
    (deliver,) = [e.msg for e in q.consume(CH, "c", ack_required=True, credit=5) if isinstance(e.msg, Deliver)]
    order = expected_order(dict(enumerate(PRIOS, 1)))
    assert tags(deliver.messages) == order[:5]
    q.cancel(CH, "c")
    q.settle(CH, requeued=[m[0] for m in reversed(deliver.messages)])
    got = ready.take(100)
    assert tags(got) == order
    assert [m[1] for m in got] == [True] * 5 + [False] * (len(order) - 5)


def test_forget_reaches_the_level_that_handed_each_message_out(tmp_path):
    ready = backed_levels(Stores(str(tmp_path)))
    ready.extend([message(i, p) for i, p in enumerate(PRIOS, 1)], 0)
    taken = ready.take(7)
    assert sum(level.backing.stats().unacked for level in ready.levels) == 7
    ready.forget([m[0] for m in taken[::2]])
    ready.requeue([m for m in taken[1::2]])
    assert [level.backing.stats().unacked for level in ready.levels] == [0] * (MAX + 1)
    assert len(ready) == len(PRIOS) - 4


def test_paging_out_and_back_in_keeps_the_order(tmp_path):
    stores = Stores(str(tmp_path))
    ready = backed_levels(stores, ram_max_messages=2, index_ram_max=1)
    prios = {i: [None, 1, 2, 3, 9][i % 5] for i in range(1, 301)}
    for start in range(1, 301, 30):  # several batches, so every level pages while it grows
        ready.extend([message(i, prios[i], persistent=i % 3 != 0) for i in range(start, start + 30)], 0)
    for level in ready.levels:
        s = level.backing.stats()
        assert s.ram_messages <= 2 and s.disk_only_messages > 0
    assert tags(ready.take(1000)) == expected_order(prios)


def test_lazy_levels_hold_no_body_in_ram(tmp_path):
    stores = Stores(str(tmp_path))
    ready = spill_levels(stores, lazy=True)
    for level in ready.levels:
        level.set_lazy(True)
    prios = {i: [None, 1, 2, 3][i % 4] for i in range(1, 41)}
    ready.extend([message(i, prios[i], persistent=False) for i in prios], 0)
    assert sum(level.stats().ram_messages for level in ready.levels) == 0
    assert tags(ready.take(100)) == expected_order(prios)


def test_a_durable_priority_queue_recovers_every_level_with_its_order(tmp_path):
    def open_storage() -> HostStorage:
        s = HostStorage(RealDisk(str(tmp_path), sync_method="none"), "queue0", embed_below=64,
                        file_size_limit=1 << 16, placed_here=lambda v, n: True)
        s.recover([("/", "pq")])
        return s

    def open_core(s: HostStorage) -> ClassicQueue:
        levels, next_id = s.open_priority_queue("/", "pq", MAX, lazy=False)
        return ClassicQueue("/", "pq", arguments={"x-max-priority": MAX}, next_id=next_id,
                            ready=PriorityReady(MAX, [BackedReady(b) for b in levels]))

    s = open_storage()
    q = open_core(s)
    prios = dict(enumerate(PRIOS, 1))
    q.publish(CH, [published(i, p, persistent=i != 5, size=10 if i % 2 else 200) for i, p in prios.items()])
    (deliver,) = [e.msg for e in q.consume(CH, "c", ack_required=True, credit=3) if isinstance(e.msg, Deliver)]
    q.settle(CH, acked=[deliver.messages[0][0]])  # one acked, two held
    top_id = max(m[0] for m in deliver.messages)
    s.close()
    s = open_storage()
    q = open_core(s)
    del prios[5]  # transient
    del prios[tags(deliver.messages)[0]]  # acked
    assert q._next_id > len(PRIOS) and q._next_id > top_id
    got = q._ready.take(100)
    assert tags(got) == expected_order(prios)
    assert {t for t, m in zip(tags(got), got) if m[1]} == set(tags(deliver.messages)[1:]) & set(prios)
    s.delete_queue("/", "pq")
    assert os.listdir(tmp_path / "queues") == []


def test_spill_stays_in_ram_until_paging_is_asked_for_and_comes_back(tmp_path):
    stores = Stores(str(tmp_path))
    spill = SpillReady(stores.backing("tq/q", durable=False))
    q = ClassicQueue("/", "q", ready=spill)
    q.publish(CH, [published(i, None, persistent=False) for i in range(1, 11)])
    assert not spill.spilled and not os.path.exists(tmp_path / "tq")
    (deliver,) = [e.msg for e in q.consume(CH, "c", ack_required=True, credit=3) if isinstance(e.msg, Deliver)]
    spill.set_ram_target(0)  # memory pressure: everything ready goes to disk
    assert spill.spilled and spill.stats().disk_only_messages == 7 and spill.ram_messages == 0
    q.publish(CH, [published(i, None, persistent=False) for i in range(11, 16)])
    q.settle(CH, requeued=[deliver.messages[1][0]], acked=[deliver.messages[0][0]])  # taken from RAM
    q.cancel(CH, "c")
    (deliver2,) = [e.msg for e in q.consume(CH, "c2", ack_required=True, credit=4) if isinstance(e.msg, Deliver)]
    assert tags(deliver2.messages) == [2, 4, 5, 6]
    assert deliver2.messages[0][1] is True
    spill.set_ram_target(None)
    q.settle(CH, acked=[m[0] for m in deliver2.messages] + [deliver.messages[2][0]])
    assert spill.spilled  # still holds ready messages on disk
    rest = []
    while (m := q.get(CH, ack_required=False)[0]) is not None:
        rest.append(m)
    assert tags(rest) == list(range(7, 16))
    assert not spill.spilled and spill.backing.stats().unacked == 0
    assert [n for n in os.listdir(tmp_path / "tq" / "q") if n.endswith(".idx")] == []  # segments dropped
    q.publish(CH, [published(16, None, persistent=False)])
    assert tags(spill.take(5)) == [16]


def test_respill_keeps_ram_owned_requeues_in_front(tmp_path):
    stores = Stores(str(tmp_path))
    spill = SpillReady(stores.backing("tq/q", durable=False))
    spill.extend([message(i, None, persistent=False) for i in range(1, 4)], 0)
    held = spill.take(1)  # id 1, RAM's
    spill.set_lazy(True)
    spill.extend([message(4, None, persistent=False)], 0)
    assert tags(spill.take(3)) == [2, 3, 4]
    spill.forget([2, 3, 4])
    spill.set_lazy(False)
    assert not spill.spilled
    spill.extend([message(5, None, persistent=False)], 0)
    spill.requeue(held)
    spill.set_lazy(True)  # 1 is below what the backing numbered: it stays in RAM, in front
    assert tags(spill.take(5)) == [1, 5]
    spill.forget([1, 5])
    assert spill.backing.stats().unacked == 0


def test_a_requeued_message_that_spills_all_the_way_to_disk_comes_back_redelivered(tmp_path):
    stores = Stores(str(tmp_path))
    spill = SpillReady(stores.backing("tq/q", durable=False, index_ram_max=1))
    spill.extend([message(i, None, persistent=False) for i in range(1, 13)], 0)
    taken = spill.take(9)
    spill.requeue([(m[0], True) + m[2:] for m in taken])  # the core flags them redelivered
    # everything moves into the backing, requeued ones first; with 4 index entries in RAM most of
    # them end up in Delta (segments of 4), known only by their index records
    spill.set_lazy(True)
    out = spill.take(12)
    assert tags(out) == list(range(1, 13))
    assert [m[1] for m in out] == [True] * 9 + [False] * 3


class PriorityOverBackings(RuleBasedStateMachine):
    """The same operations on RAM levels (the model) and on paged backed levels must agree."""

    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="prio_backed_")
        stores = Stores(self.root)
        self.model = PriorityReady(MAX)
        self.durable = backed_levels(stores, ram_max_messages=1, index_ram_max=1)
        self.spills = spill_levels(stores)
        for level in self.spills.levels:
            level.set_ram_target(1)
        self.next_id = 1
        self.held: list[tuple] = []

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def all(self):
        return (self.model, self.durable, self.spills)

    @rule(prios=st.lists(st.sampled_from([None, 0, 1, 2, 3, 5]), min_size=1, max_size=8),
          persistent=st.booleans())
    def publish(self, prios, persistent):
        msgs = [message(self.next_id + k, p, persistent) for k, p in enumerate(prios)]
        self.next_id += len(msgs)
        for r in self.all():
            r.extend(msgs, sum(len(m[5]) for m in msgs))

    @rule(n=st.integers(1, 6))
    def take(self, n):
        got = [r.take(n) for r in self.all()]
        assert got[0] == got[1] == got[2]
        self.held.extend(got[0])

    @rule(data=st.data())
    def settle(self, data):
        if not self.held:
            return
        chosen = data.draw(st.lists(st.sampled_from(self.held), unique=True, min_size=1))
        self.held = [m for m in self.held if m not in chosen]
        requeue = data.draw(st.booleans())
        for r in self.all():
            if requeue:
                r.requeue(chosen)
            else:
                r.forget([m[0] for m in chosen])

    @rule(lazy=st.booleans())
    def lazy(self, lazy):
        for level in self.spills.levels:
            level.set_lazy(lazy)

    @invariant()
    def same_length(self):
        assert len(self.model) == len(self.durable) == len(self.spills)
        if len(self.model):
            assert self.model.head_id() == self.durable.head_id() == self.spills.head_id()


TestPriorityOverBackings = PriorityOverBackings.TestCase
TestPriorityOverBackings.settings = settings(max_examples=25, stateful_step_count=25, deadline=None)


def test_memory_pressure_pages_non_durable_queues_and_a_restart_wipes_what_they_wrote(tmp_path):
    def open_storage() -> HostStorage:
        s = HostStorage(RealDisk(str(tmp_path), sync_method="none"), "queue0", embed_below=64,
                        file_size_limit=1 << 16, placed_here=lambda v, n: True)
        s.recover([])
        return s

    s = open_storage()
    (spill,) = s.open_transient_queue("/", "t", lazy=False)
    levels = s.open_transient_queue("/", "tp", lazy=False, max_priority=MAX)
    q = ClassicQueue("/", "t", ready=spill)
    pq = ClassicQueue("/", "tp", arguments={"x-max-priority": MAX}, ready=PriorityReady(MAX, levels))
    q.publish(CH, [published(i, None, persistent=False, size=100) for i in range(1, 1001)])
    pq.publish(CH, [published(i, i % 5, persistent=False, size=100) for i in range(1, 1001)])
    assert not (tmp_path / "transient_queues").exists()  # nothing paged, no directory
    housekeeping = Housekeeping(s, threshold_bytes=100)
    housekeeping.receive(None, MemoryUse(limit_bytes=200, used_bytes=200))  # paging from 100
    housekeeping.tick()  # paging, and the levels that paged flush their index
    assert spill.stats().ram_messages <= 400 and spill.stats().disk_only_messages >= 600
    assert sum(level.stats().ram_messages for level in levels) <= 400
    housekeeping.receive(None, MemoryUse(limit_bytes=200, used_bytes=50))
    housekeeping.tick()
    assert tags(spill.take(1000)) == list(range(1, 1001))
    assert tags(pq._ready.take(1000)) == expected_order({i: i % 5 for i in range(1, 1001)})
    assert any((tmp_path / "transient_queues").rglob("*.idx"))
    s.close()
    s = open_storage()
    assert not (tmp_path / "transient_queues" / "queue0").exists()
    s.open_transient_queue("/", "t", lazy=True)
    s.delete_queue("/", "t")
