"""The classic queue core over a DurableBacking (backed.py), the host storage (host_storage.py),
the group commit and the housekeeping that applies the paging policy, and the actor's
confirm-after-flush rule, on real files under tmp_path."""
from __future__ import annotations

from actors.messages.channel_queue import Confirm, Deliver, Publish, Published
from actors.messages.node import ApplyPolicy, CreateQueue
import asyncio
import os
from types import SimpleNamespace

import pytest

from actors.messages.alarms import MemoryUse
from actors.queue.core import ClassicQueue
from actors.queue.housekeeping import Housekeeping
from actors.queue.manager import QueueManager
from actors.queue.shell import QueueActor
from actors.messages.queue_store import StoreWrite
from actors.runtime.address import Address
from actors.runtime.mailbox import Runtime
from persist.classic.backed import BackedReady
from persist.classic.host_storage import HostStorage, queue_dir
from persist.classic.message import Message
from persist.disk import RealDisk
from wire.properties import BasicProperties, encode_content_header

PERSISTENT = encode_content_header(60, 0, BasicProperties(delivery_mode=2))
TRANSIENT = encode_content_header(60, 0, BasicProperties(delivery_mode=1))
CH = Address("conn0", "ch1")
STORE = Address("queue0", "msg_store")


def published(seq: int, *, persistent: bool = True, size: int = 10) -> Published:
    return Published(seq, "", "q", PERSISTENT if persistent else TRANSIENT, b"%d:" % seq + b"b" * size)


def storage_at(root: str, keep=(("/", "q"),)) -> HostStorage:
    # sync_method "none": these tests check logic, not the device
    s = HostStorage(RealDisk(root, sync_method="none"), "queue0", embed_below=4096, file_size_limit=1 << 20,
                    placed_here=lambda v, n: True)
    s.recover(keep)
    return s


def open_core(storage: HostStorage, arguments: dict | None = None) -> ClassicQueue:
    backing, next_id = storage.open_queue("/", "q", lazy=False)
    return ClassicQueue("/", "q", arguments=arguments, ready=BackedReady(backing), next_id=next_id)


def ids(messages) -> list[int]:
    return [int(m[5].split(b":")[0]) for m in messages]


def restart(storage: HostStorage, tmp_path, arguments: dict | None = None) -> tuple[HostStorage, ClassicQueue]:
    storage.close()
    s = storage_at(str(tmp_path))
    return s, open_core(s, arguments)


def test_acked_messages_never_come_back_and_unacked_return_redelivered(tmp_path):
    s = storage_at(str(tmp_path))
    q = open_core(s)
    q.publish(CH, [published(i, size=5000 if i % 2 else 10) for i in range(1, 11)])
    (deliver,) = q.consume(CH, "c", ack_required=True, credit=4)
    held = deliver.msg.messages
    assert ids(held) == [1, 2, 3, 4]
    q.settle(CH, acked=[held[0][0], held[1][0]])
    q.cancel(CH, "c")
    s.backings[("/", "q")].flush()
    s, q = restart(s, tmp_path)
    assert q.message_count == 8
    assert q._next_id > 10  # new msg_ids continue above the recovered ones
    got = []
    while (m := q.get(CH, ack_required=False)[0]) is not None:
        got.append((int(m[5].split(b":")[0]), m[1]))
    assert got == [(3, True), (4, True)] + [(i, False) for i in range(5, 11)]
    s, q = restart(s, tmp_path)
    assert q.message_count == 0  # the no-ack gets above were acks too


def index_bytes(tmp_path) -> int:
    d = tmp_path / queue_dir("/", "q")
    return sum(f.stat().st_size for f in d.iterdir() if f.name.endswith(".idx")) if d.exists() else 0


def test_a_message_acked_before_its_commit_is_never_written_and_still_confirmed(tmp_path):
    s = storage_at(str(tmp_path))
    q = open_core(s)
    backing = s.backings[("/", "q")]
    q.consume(CH, "c", ack_required=True, credit=10)
    (deliver,) = [e for e in q.publish(CH, [published(1, size=5000), published(2)]) if type(e.msg) is Deliver]
    q.settle(CH, acked=[m[0] for m in deliver.msg.messages])
    assert backing.flush() == [1, 2]  # confirmable: the consumer has them
    assert index_bytes(tmp_path) == 0 and backing.store.summary().messages == 0
    assert backing.stats().persistent == 0


def test_a_message_delivered_before_its_commit_is_written_delivered(tmp_path):
    s = storage_at(str(tmp_path))
    q = open_core(s)
    q.consume(CH, "c", ack_required=True, credit=10)
    q.publish(CH, [published(1), published(2)])
    assert s.backings[("/", "q")].stats().persistent == 2  # owed to the disk, counted already
    s.backings[("/", "q")].flush()
    assert index_bytes(tmp_path) > 0
    s, q = restart(s, tmp_path)
    (deliver,) = q.consume(CH, "c", ack_required=True, credit=10)
    assert ids(deliver.msg.messages) == [1, 2]
    assert all(m[1] for m in deliver.msg.messages)  # redelivered


def test_a_clean_stop_writes_what_no_commit_reached(tmp_path):
    s = storage_at(str(tmp_path))
    q = open_core(s)
    q.publish(CH, [published(1), published(2, size=5000)])
    s, q = restart(s, tmp_path)
    assert q.message_count == 2


def test_transient_messages_do_not_survive_a_restart(tmp_path):
    s = storage_at(str(tmp_path))
    q = open_core(s)
    q.publish(CH, [published(i, persistent=i % 2 == 0) for i in range(1, 7)])
    s, q = restart(s, tmp_path)
    assert ids(q._ready.take(10)) == [2, 4, 6]


def test_requeue_keeps_the_original_position(tmp_path):
    s = storage_at(str(tmp_path))
    q = open_core(s)
    q.publish(CH, [published(i) for i in range(1, 6)])
    effects = q.consume(CH, "c", ack_required=True, credit=2)
    (deliver,) = [e.msg for e in effects if isinstance(e.msg, Deliver)]
    q.cancel(CH, "c")
    q.settle(CH, requeued=[m[0] for m in deliver.messages])
    taken = q._ready.take(5)
    assert ids(taken) == [1, 2, 3, 4, 5] and [m[1] for m in taken] == [True, True, False, False, False]


def test_drop_head_and_purge_reach_the_index(tmp_path):
    s = storage_at(str(tmp_path))
    q = open_core(s, {"x-max-length": 3})
    q.publish(CH, [published(i) for i in range(1, 8)])
    assert q.message_count == 3
    s, q = restart(s, tmp_path, {"x-max-length": 3})
    assert ids(q._ready.take(3)) == [5, 6, 7]
    s, q = restart(s, tmp_path)
    assert q.message_count == 3  # taken but never settled: still there, as after a crash
    assert q.purge() == 3
    s, q = restart(s, tmp_path)
    assert q.message_count == 0


def test_recovery_deletes_directories_of_queues_that_are_gone(tmp_path):
    s = storage_at(str(tmp_path), keep=[("/", "a"), ("/", "b")])
    for name in ("a", "b"):
        backing, _ = s.open_queue("/", name, lazy=False)
        backing.publish([Message(0, False, "", name, PERSISTENT, b"m")])  # a queue's directory: its first write
        backing.flush()
    s.close()
    s = storage_at(str(tmp_path), keep=[("/", "a")])
    assert os.path.isdir(tmp_path / queue_dir("/", "a"))
    assert not os.path.exists(tmp_path / queue_dir("/", "b"))
    s.delete_queue("/", "a")  # not opened in this run: nothing to delete yet
    s.open_queue("/", "a", lazy=False)
    s.delete_queue("/", "a")
    assert list((tmp_path / "queues").iterdir()) == []


def test_memory_pressure_pages_bodies_out_and_release_lifts_the_target(tmp_path):
    s = storage_at(str(tmp_path))
    q = open_core(s)
    q.publish(CH, [published(i, size=100) for i in range(1, 1001)])
    backing = s.backings[("/", "q")]
    assert backing.stats().ram_messages == 1000
    housekeeping = Housekeeping(s, threshold_bytes=100)
    housekeeping.receive(None, MemoryUse(limit_bytes=200, used_bytes=200))  # paging from 100
    housekeeping.tick()
    assert backing.vq.ram_max_messages == 400  # 1000 in RAM x 100 / 200 x 0.8
    assert backing.stats().ram_messages <= 400 and backing.stats().disk_only_messages >= 600
    housekeeping.receive(None, MemoryUse(limit_bytes=200, used_bytes=80))  # between the lines: the targets stay
    housekeeping.tick()
    assert backing.vq.ram_max_messages == 400
    housekeeping.receive(None, MemoryUse(limit_bytes=200, used_bytes=50))
    housekeeping.tick()
    assert backing.vq.ram_max_messages is None
    assert ids(q._ready.take(1000)) == list(range(1, 1001))


def test_lazy_policy_pages_everything_out(tmp_path):
    s = storage_at(str(tmp_path))
    backing, _ = s.open_queue("/", "q", lazy=False)
    core = ClassicQueue("/", "q", ready=BackedReady(backing))
    sent: list = []
    runtime = SimpleNamespace(host="queue0", send=lambda to, msg, **k: sent.append((to, msg, k["credit"])))
    actor = QueueActor(runtime, core, lambda n: None, s, backing, STORE)
    core.publish(CH, [published(i) for i in range(1, 11)])
    actor.receive(Address("node", "node"), ApplyPolicy({"queue-mode": "lazy"}))
    assert backing.stats().ram_messages == 0 and backing.stats().lazy
    assert sent == [(STORE, StoreWrite(0, False), 1)]  # it told its store, over the credit link


class Channel:
    """A channel of the queue's host: the confirms it gets, with the disk's sync count then."""

    def __init__(self, disk) -> None:
        self.disk = disk
        self.confirms: list[tuple[Confirm, int]] = []

    def receive(self, sender, msg) -> None:
        if type(msg) is Confirm:
            self.confirms.append((msg, self.disk.syncs))


async def host_with_manager(tmp_path, s: HostStorage) -> tuple[Runtime, QueueManager, Channel, Address]:
    """A real runtime holding a QueueManager (and so the host's message-store actor) and a channel."""
    runtime = Runtime("queue0", {"queue0": f"ipc://{tmp_path}/queue0"})
    await runtime.start()
    manager = QueueManager(runtime, "qm", registry=SimpleNamespace(), storage=s)
    runtime.spawn("qm", manager)
    channel = Channel(s.disk)
    return runtime, manager, channel, runtime.spawn("ch1", channel)


async def _turns(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)  # loop turns (not a timing wait): the runtime's flushes and the commit run


def test_confirms_leave_only_after_the_store_actor_synced(tmp_path):
    async def scenario() -> None:
        s = storage_at(str(tmp_path / "data"))
        runtime, manager, channel, ch = await host_with_manager(tmp_path, s)
        manager.receive(ch, CreateQueue(1, "/", "q", False, {}, True))
        actor = manager.queues["q:/:q"]
        syncs_before = s.disk.syncs
        runtime.send(actor.address, Publish([published(1), published(2, persistent=False), published(3)]), sender=ch)
        runtime.send(actor.address, Publish([published(4)]), sender=ch)
        runtime.dispatch_local()  # the queue takes them in and tells its store, which marks it
        assert channel.confirms == []
        await _turns()
        assert [c for c, _ in channel.confirms] == [Confirm(4)]
        assert channel.confirms[0][1] > syncs_before  # sent after the fsync that covered the batch
        await _turns()
        assert len(channel.confirms) == 1  # nothing new to confirm
        await runtime.close()
    asyncio.run(scenario())


def test_non_durable_queues_confirm_at_once_and_durable_priority_queues_after_the_commit(tmp_path):
    async def scenario() -> None:
        s = storage_at(str(tmp_path / "data"))
        runtime, manager, channel, ch = await host_with_manager(tmp_path, s)
        manager.receive(ch, CreateQueue(1, "/", "t", False, {}, False))
        manager.receive(ch, CreateQueue(2, "/", "tp", False, {"x-max-priority": 5}, False))
        manager.receive(ch, CreateQueue(3, "/", "p", False, {"x-max-priority": 5}, True))
        for name in ("q:/:t", "q:/:tp"):
            runtime.send(manager.queues[name].address, Publish([published(7)]), sender=ch)
            runtime.dispatch_local()  # the queue, then its confirm to the channel: no commit between
            assert [c for c, _ in channel.confirms] == [Confirm(7)]
            channel.confirms.clear()
        assert not os.path.exists(tmp_path / "data" / "transient_queues" / "queue0")  # no directory per declare
        actor = manager.queues["q:/:p"]
        actor.run(actor.core.publish(ch, [published(7)]))
        runtime.dispatch_local()
        assert channel.confirms == []  # held for the group commit
        actor.flush()
        runtime.dispatch_local()
        assert channel.confirms == []  # set aside for the syncs the flush asked for
        actor.synced()
        runtime.dispatch_local()
        assert [c for c, _ in channel.confirms] == [Confirm(7)]
        await runtime.close()
    asyncio.run(scenario())


@pytest.mark.parametrize("lazy", [False, True])
def test_stats_report_ram_and_disk(tmp_path, lazy):
    s = storage_at(str(tmp_path))
    backing, _ = s.open_queue("/", "q", lazy=lazy)
    core = ClassicQueue("/", "q", ready=BackedReady(backing))
    runtime = SimpleNamespace(host="queue0", flow_state=lambda address: None)
    actor = QueueActor(runtime, core, lambda n: None, s, backing, STORE)
    core.publish(CH, [published(i, persistent=i != 3) for i in range(1, 6)])
    st = actor.stats()
    assert st["messages"] == 5 and st["messages_persistent"] == 4
    assert (st["messages_ready_ram"], st["messages_paged_out"]) == ((0, 5) if lazy else (5, 0))


def test_backed_ready_list_is_pure():
    """backed.py sits in the core's import graph: no impure imports, and a theory of operation."""
    import ast
    import pathlib

    import persist.classic.backed as backed
    tree = ast.parse(pathlib.Path(backed.__file__).read_text())
    forbidden = {"zmq", "socket", "os", "time", "random", "threading", "asyncio", "select"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            assert not {a.name.split(".")[0] for a in node.names} & forbidden
        elif isinstance(node, ast.ImportFrom) and node.module:
            assert node.module.split(".")[0] not in forbidden
    assert ast.get_docstring(tree)
