"""The group commit (actors/queue/group_commit.py): each marked queue flushed once per commit in the
order it was first marked, one commit in flight at a time (queues marked meanwhile wait for the
next, which starts when it is done, or an interval after the one before under constant load), and
across real queues of one host: one sync of the shared store per commit, and every queue's confirms
only after the syncs that cover its writes, whether they run inline or on the host's sync thread."""
from __future__ import annotations

from contextlib import nullcontext
from types import SimpleNamespace
from typing import Any, Callable

from actors.messages.channel_queue import Confirm, Consume, Deliver, Publish, Settle
from actors.messages.node import CreateQueue
from actors.messages.queue_store import StoreSynced, StoreWrite
from actors.queue.group_commit import BUSY_AFTER, BUSY_MESSAGES, HOLD_MAX, GroupCommit
from actors.queue.manager import QueueManager
from actors.runtime.address import Address
from actors.store.shell import NAME as STORE_NAME, MsgStoreActor
from persist.classic.host_storage import HostStorage, queue_dir
from persist.disk import RealDisk
from tests.queue.test_durable_queue import CH, published

NODE = Address("node", "node")
CONSUMER = Address("conn1", "ch1")


class Recorder:
    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log
        self.waits: list[tuple[int, int]] = []

    def write(self) -> None:
        pass

    def flush(self) -> None:
        self.log.append(self.name)

    def synced(self) -> None:
        self.log.append(self.name + " synced")

    def waited(self, start_ms: int, end_ms: int) -> None:
        self.waits.append((start_ms, end_ms))


def test_one_commit_per_turn_flushes_each_marked_queue_once_in_first_mark_order():
    turns: list[Callable[[], None]] = []
    flushed: list[str] = []
    commit = GroupCommit(schedule=turns.append)
    a, b, c = (Recorder(n, flushed) for n in "abc")
    for q in (b, a, b, c, a):
        commit.mark(q)
    commit.forget(c)  # deleted in the turn: it flushed itself
    assert len(turns) == 1 and flushed == []  # nothing before the turn ends
    turns.pop()()
    assert flushed == ["b", "a", "b synced", "a synced"]  # inline syncs: done within the commit
    commit.mark(a)  # the next turn gets a commit of its own
    assert len(turns) == 1
    turns.pop()()
    assert flushed[4:] == ["a", "a synced"]


def test_a_commit_with_nothing_marked_since_does_nothing():
    turns: list[Callable[[], None]] = []
    flushed: list[str] = []
    commit = GroupCommit(schedule=turns.append)
    a = Recorder("a", flushed)
    commit.mark(a)
    commit.forget(a)
    turns.pop()()
    assert flushed == [] and turns == []


def test_every_queue_of_a_commit_is_told_how_long_it_took_unless_it_was_within_a_millisecond():
    turns: list[Callable[[], None]] = []
    ticks = iter([0, 100, 100, 200, 235])  # the first: when the commit was made
    commit = GroupCommit(schedule=turns.append, clock=lambda: next(ticks))
    a, b = Recorder("a", []), Recorder("b", [])
    commit.mark(a)
    turns.pop()()
    assert a.waits == []  # 100 -> 100
    commit.mark(a)
    commit.mark(b)
    turns.pop()()
    assert a.waits == b.waits == [(200, 235)]
    assert commit.syncing.flow_share(235) == 35 / 235  # the host's time in commits


class HeldSyncs:
    """Syncs that finish when the test says so (as the sync thread's do, later)."""

    def __init__(self) -> None:
        self.running: list[Callable[[], None]] = []
        self.collected = 0

    def collect(self):
        self.collected += 1
        return nullcontext(self.collected)

    def run(self, collected, done) -> None:
        self.running.append(done)


def held_commit() -> tuple[list[Callable[[], None]], list[str], HeldSyncs, GroupCommit, Recorder, Recorder]:
    """A group commit whose turns and syncs run when the test says so, and two queues."""
    turns: list[Callable[[], None]] = []
    log: list[str] = []
    syncs = HeldSyncs()
    return turns, log, syncs, GroupCommit(schedule=turns.append, syncs=syncs), Recorder("a", log), Recorder("b", log)


def test_queues_marked_while_a_commit_syncs_wait_for_the_next_which_starts_when_it_is_done():
    turns, log, syncs, commit, a, b = held_commit()
    commit.mark(a)
    turns.pop()()
    assert log == ["a"] and len(syncs.running) == 1  # flushed; its syncs are running
    commit.mark(b)
    commit.mark(a)
    assert turns == []  # no second commit while one is in flight
    syncs.running.pop()()
    assert log == ["a", "a synced"]  # only what the finished syncs covered is released
    assert len(turns) == 1  # the next commit is due now
    turns.pop()()
    assert log[2:] == ["b", "a"] and syncs.collected == 2
    syncs.running.pop()()
    assert log[4:] == ["b synced", "a synced"] and turns == []


class Timed:
    """A group commit whose turns, syncs, timers and clock move when the test says so, and a queue."""

    def __init__(self) -> None:
        self.turns: list[Callable[[], None]] = []
        self.timers: list[tuple[float, Callable[[], None]]] = []
        self.log: list[str] = []
        self.syncs = HeldSyncs()
        self.now = 0
        self.commit = GroupCommit(schedule=self.turns.append, later=lambda s, due: self.timers.append((s, due)),
                                  clock=lambda: self.now, syncs=self.syncs, interval_ms=50)
        self.a = Recorder("a", self.log)

    def one_commit(self, sync_ms: int, taken_meanwhile: int) -> None:
        """Start the commit that is due (a turn's, else the interval's), mark `a` with what it took
        in while that commit synced for `sync_ms`, then finish the sync."""
        (self.turns.pop() if self.turns else self.timers.pop()[1])()
        self.now += sync_ms
        if taken_meanwhile:
            self.commit.mark(self.a, taken=taken_meanwhile)
        self.syncs.running.pop()()


def test_under_constant_load_a_commit_starts_an_interval_after_the_one_before_and_a_quiet_commit_ends_that():
    t = Timed()
    t.commit.mark(t.a, taken=1)
    for _ in range(BUSY_AFTER - 1):  # many messages during each sync: not yet constant load
        t.one_commit(10, taken_meanwhile=BUSY_MESSAGES)
        assert len(t.turns) == 1 and t.timers == []  # the next starts at once
    t.one_commit(10, taken_meanwhile=BUSY_MESSAGES)  # the run is long enough now
    assert t.turns == [] and [s for s, _ in t.timers] == [0.04]  # 50 ms after the last start, 10 ms ago
    t.one_commit(60, taken_meanwhile=BUSY_MESSAGES)  # a commit longer than the interval: the next at once
    assert len(t.turns) == 1 and t.timers == []
    t.one_commit(5, taken_meanwhile=BUSY_MESSAGES - 1)  # a steady moderate rate: work waits, but little
    assert len(t.turns) == 1 and t.timers == []
    for _ in range(BUSY_AFTER - 1):  # load again: a new run starts from one
        t.one_commit(10, taken_meanwhile=BUSY_MESSAGES)
        assert len(t.turns) == 1 and t.timers == []
    t.one_commit(10, taken_meanwhile=0)  # nothing waiting: a quiet host commits as soon as it has written
    t.commit.mark(t.a, taken=BUSY_MESSAGES)
    assert len(t.turns) == 1 and t.timers == []
    assert t.log.count("a synced") == 2 * BUSY_AFTER + 2


def test_a_wait_for_the_interval_ends_once_the_queues_took_in_enough_messages_and_its_timer_is_then_ignored():
    t = Timed()
    t.commit.mark(t.a, taken=1)
    for _ in range(BUSY_AFTER):
        t.one_commit(10, taken_meanwhile=BUSY_MESSAGES)
    assert t.turns == [] and len(t.timers) == 1  # waiting for the interval
    t.commit.mark(t.a, taken=HOLD_MAX - BUSY_MESSAGES - 1)
    assert t.turns == []  # one message short
    t.commit.mark(t.a, taken=1)
    assert len(t.turns) == 1  # a window of confirms must not run dry: the commit starts now
    t.turns.pop()()
    t.now += 10
    t.commit.mark(t.a, taken=BUSY_MESSAGES)
    t.syncs.running.pop()()  # still busy: a new wait, for its own interval
    assert t.turns == [] and len(t.timers) == 2
    flushed = t.log.count("a")
    t.timers.pop(0)[1]()  # the first wait's timer comes later: that wait is over
    assert t.log.count("a") == flushed
    t.timers.pop()[1]()
    assert t.log.count("a") == flushed + 1


def test_a_queue_forgotten_while_its_commit_syncs_is_not_told_synced():
    turns, log, syncs, commit, a, b = held_commit()
    commit.mark(a)
    commit.mark(b)
    turns.pop()()
    commit.forget(a)  # deleted meanwhile: it flushed itself
    syncs.running.pop()()
    assert log == ["a", "b", "b synced"]


def lazy_commit() -> tuple[list[Callable[[], None]], list[tuple[float, Callable[[], None]]], list[str], GroupCommit,
                         Recorder, Recorder]:
    """A group commit with lazy marks, whose turns and timers run when the test says so."""
    turns: list[Callable[[], None]] = []
    timers: list[tuple[float, Callable[[], None]]] = []
    log: list[str] = []
    commit = GroupCommit(schedule=turns.append, later=lambda s, due: timers.append((s, due)), lazy_ms=200)
    return turns, timers, log, commit, Recorder("a", log), Recorder("b", log)


def test_a_lazy_mark_waits_for_the_timer_of_the_first_one_then_commits():
    turns, timers, log, commit, a, b = lazy_commit()
    commit.mark(a, lazy=True)
    commit.mark(b, lazy=True)
    assert turns == [] and [s for s, _ in timers] == [0.2]  # one timer for both
    timers.pop()[1]()
    assert len(turns) == 1
    turns.pop()()
    assert log == ["a", "b", "a synced", "b synced"]


def test_a_lazy_queue_marked_for_a_confirm_goes_in_the_next_commit_and_not_again_at_the_timer():
    turns, timers, log, commit, a, b = lazy_commit()
    commit.mark(a, lazy=True)
    commit.mark(b, lazy=True)
    commit.mark(a)  # a holds a confirm now: its flush covers what it wrote lazily
    turns.pop()()
    assert log == ["a", "a synced"]
    commit.mark(a, lazy=True)  # an ack after a commit: the pending timer covers it
    assert len(timers) == 1
    timers.pop()[1]()
    turns.pop()()
    assert log[2:] == ["b", "a", "b synced", "a synced"]


def test_a_lazy_mark_is_an_ordinary_one_without_a_timer_and_already_dirty_queues_stay_so():
    turns: list[Callable[[], None]] = []
    log: list[str] = []
    commit = GroupCommit(schedule=turns.append)  # no `later`
    a = Recorder("a", log)
    commit.mark(a, lazy=True)
    assert len(turns) == 1
    turns_, timers, log2, lazy, c, _ = lazy_commit()
    lazy.mark(c)
    lazy.mark(c, lazy=True)  # already in the next commit: no timer needed
    assert timers == [] and len(turns_) == 1


class RecordingDisk(RealDisk):
    """A real disk (no device syncs) that logs each sync and directory sync it is asked for."""

    def __init__(self, root: str) -> None:
        super().__init__(root, sync_method="none")
        self.events: list[str] = []

    def sync(self, path: str) -> None:
        super().sync(path)
        self.events.append(path)

    def fsync_dir(self, path: str) -> None:
        super().fsync_dir(path)
        self.events.append(path + "/")


class LoggingRuntime:
    """Records each message sent with how many syncs the disk had done by then; hands what a
    queue and its store tell each other over at once (credit: not modelled here)."""
    host = "queue0"

    def __init__(self, disk: RecordingDisk) -> None:
        self.disk = disk
        self.sent: list[tuple] = []
        self.actors: dict[str, Any] = {}

    def send(self, to, msg, *, sender, credit=0) -> None:
        if type(msg) in (StoreWrite, StoreSynced):
            self.actors[to.name].receive(sender, msg)
        else:
            self.sent.append((msg, len(self.disk.events)))

    def spawn(self, name, actor) -> None:
        self.actors[name] = actor

    def actor(self, name):
        return self.actors.get(name)

    def blocked(self, actor) -> bool:
        return False

    def processed(self, actor, sender, n) -> None:
        pass

    def processed_all(self, actor) -> None:
        pass

    def dispatch_local(self) -> None:
        pass


def use_commit(runtime: LoggingRuntime, manager: QueueManager, commit: GroupCommit) -> None:
    """The manager's store actor, with a commit the test drives."""
    manager.store = MsgStoreActor(runtime, commit)
    runtime.spawn(STORE_NAME, manager.store)


def host_manager(tmp_path) -> tuple[RecordingDisk, LoggingRuntime, QueueManager]:
    """A queue host's manager over real files whose syncs are logged."""
    disk = RecordingDisk(str(tmp_path))
    s = HostStorage(disk, "queue0", embed_below=4096, file_size_limit=1 << 20, placed_here=lambda v, n: True)
    s.recover([])
    runtime = LoggingRuntime(disk)
    return disk, runtime, QueueManager(runtime, "qm", registry=SimpleNamespace(), storage=s)


def test_two_durable_queues_in_one_turn_share_one_store_sync_and_confirm_after_all_of_them(tmp_path):
    disk, runtime, manager = host_manager(tmp_path)
    turns: list[Callable[[], None]] = []
    use_commit(runtime, manager, GroupCommit(schedule=turns.append))
    for rid, name in enumerate(("a", "b"), 1):
        manager.receive(NODE, CreateQueue(rid, "/", name, False, {}, True))
    a, b = manager.queues["q:/:a"], manager.queues["q:/:b"]
    runtime.sent.clear()
    disk.events.clear()
    big = 8000  # above queue_index_embed_msgs_below: the bodies go to the shared store
    a.receive(CH, Publish([published(1, size=big)]))
    b.receive(CH, Publish([published(2, size=big)]))
    a.receive(CH, Publish([published(3, size=big)]))
    assert runtime.sent == [] and disk.events == [] and len(turns) == 1
    turns.pop()()
    store_file = [e for e in disk.events if e.startswith("msg_stores/queue0/persistent/") and e.endswith(".rdq")]
    assert len(store_file) == 1  # one store sync for the whole turn
    (a_confirm, a_at), (b_confirm, b_at) = runtime.sent
    assert (a_confirm, b_confirm) == (Confirm(3), Confirm(2))  # in first-mark order
    assert a_at == b_at == len(disk.events)  # both after every sync of the commit
    assert any(e.startswith(queue_dir("/", "a") + "/") for e in disk.events)
    assert any(e.startswith(queue_dir("/", "b") + "/") for e in disk.events)


def test_a_durable_queue_commits_at_once_for_a_confirm_and_lazily_for_an_ack(tmp_path):
    disk, runtime, manager = host_manager(tmp_path)
    turns: list[Callable[[], None]] = []
    timers: list[tuple[float, Callable[[], None]]] = []
    use_commit(runtime, manager, GroupCommit(schedule=turns.append, later=lambda sec, due: timers.append((sec, due))))
    manager.receive(NODE, CreateQueue(1, "/", "a", False, {}, True))
    a = manager.queues["q:/:a"]
    a.receive(CONSUMER, Consume(1, "t", ack_required=True, credit=10, exclusive=False, arguments={}))
    while timers or turns:  # what creating and consuming set going
        (timers.pop()[1] if timers else turns.pop())()
    runtime.sent.clear()
    a.receive(CH, Publish([published(1)]))  # seq 1: a confirm waits for the sync
    assert len(turns) == 1 and timers == []
    turns.pop()()
    assert Confirm(1) in [msg for msg, _ in runtime.sent]
    (tag,) = [m.msg_id for msg, _ in runtime.sent if type(msg) is Deliver for m in msg.messages]
    disk.events.clear()
    index_file = f"{queue_dir('/', 'a')}/0.idx"
    written = disk.size(index_file)
    a.receive(CONSUMER, Settle([tag], [], []))  # the ack promises nothing: no commit of its own
    assert turns == [] and len(timers) == 1 and disk.events == []
    assert disk.size(index_file) > written  # but it is written: a kill -9 of the host keeps it
    timers.pop()[1]()
    turns.pop()()
    assert any(e.startswith(queue_dir("/", "a") + "/") for e in disk.events)  # the ack made durable
