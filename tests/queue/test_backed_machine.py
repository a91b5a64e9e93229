"""The queue state machine (test_queue_machine.py) again, with the core's ready list on disk.

The same rules and model run against a ClassicQueue whose ready messages live in a DurableBacking
(backed.BackedReady) with persistent messages, a RAM target of 2 bodies and 4-entry index segments,
so messages move between RAM, disk and Delta on the way. Added invariants: the backing holds exactly
the messages the core holds unacked (every message taken was either requeued or `forget`-ed, so
its ack reached the index), the backing's persistent count is ready + unacked, and the ready
list's body bytes are those of the ready messages. Added rules: a group commit, after which the
index itself counts every message held (what was taken and acked before it was never written), and
a clean restart, after which every message still held is ready again (unacked ones redelivered) and
no consumer is left.
"""
from __future__ import annotations

from actors.queue.core import ClassicQueue
import shutil
import tempfile

from hypothesis import settings
from hypothesis.stateful import invariant, rule

from persist.classic.backed import BackedReady
from persist.classic.durable_queue import DurableBacking
from persist.classic.msg_store import MsgStore
from persist.disk import RealDisk
from tests.queue.test_queue_machine import READY, QueueMachine
from wire.properties import BasicProperties, encode_content_header


class BackedQueueMachine(QueueMachine):
    header = encode_content_header(60, 0, BasicProperties(delivery_mode=2))

    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="backed_machine_")
        self.disk = RealDisk(self.root, sync_method="none")
        self._open()

    def _open(self) -> None:
        self.store = MsgStore(self.disk, "persistent")
        self.transient = MsgStore(self.disk, "transient", transient=True)
        self.store.open()
        self.transient.open()
        self.backing = DurableBacking(self.disk, "q", self.store, self.transient, embed_below=4096,
                                      segment_entries=4, ram_max_messages=2)
        self.backing.recover()
        self.queue = ClassicQueue("/", "q", ready=BackedReady(self.backing),
                                  next_id=self.backing.next_msg_id)

    @rule()
    def commit(self):
        self.backing.flush()
        assert self.backing.stats().persistent == len(self.where)

    @rule()
    def clean_restart(self):
        self.backing.flush()
        self.backing.close()
        self.store.close()
        self.transient.close()
        self._open()
        self.where = dict.fromkeys(self.where, READY)
        self.consumers.clear()

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    @invariant()
    def counts_match(self):
        ready = len(self.ready_ids())
        q = self.queue
        assert (q.messages_ready, q.messages_unacknowledged) == (ready, len(self.where) - ready)
        assert q.consumer_count == len(self.consumers)

    @invariant()
    def the_backing_holds_what_the_core_holds(self):
        assert self.backing.stats().unacked == self.queue.messages_unacknowledged
        assert self.backing.stats().ready == self.queue.messages_ready
        assert self.backing.stats().persistent == len(self.where)
        assert self.queue._ready.body_bytes == sum(len(b"%d" % i) for i in self.ready_ids())
        self.backing.vq.check()


BackedQueueMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestBackedQueueMachine = BackedQueueMachine.TestCase
