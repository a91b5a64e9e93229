"""A queue actor paces its publishers (flow/intake.py through actors/queue/shell.py): the credit of
what it took in goes back at once while it is short or its consumers lag far behind, is held while
it is long and they keep up, and goes back when they have caught up or when the hold is too old;
and while it is out of credit with its host's message-store actor, until the store grants it back."""
from __future__ import annotations

import asyncio

from actors.messages.channel_queue import Confirm, Consume, Grant, Publish
from actors.queue.core import ClassicQueue
from actors.queue.group_commit import GroupCommit
from actors.queue.shell import QueueActor
from actors.runtime.address import Address
from actors.runtime.mailbox import Runtime
from actors.store.shell import NAME as STORE_NAME, MsgStoreActor
from flow.intake import IntakePace
from persist.classic.backed import BackedReady
from tests.queue.test_durable_queue import CH, published, storage_at
from tests.queue.test_group_commit import HeldSyncs
from tests.waiting import async_until

CONSUMER = Address("conn1", "ch1")
deadline_s = 30.0


class CreditRuntime:
    """Records when the queue lets its publishers' credit go."""

    host = "queue0"

    def __init__(self) -> None:
        self.released = 0

    def send(self, to, msg, *, sender, credit=0) -> None:
        pass

    def processed_all(self, actor) -> None:
        self.released += 1


def paced_queue(hold_max_ms: int = 60_000) -> tuple[QueueActor, CreditRuntime]:
    runtime = CreditRuntime()
    actor = QueueActor(runtime, ClassicQueue("/", "q"), lambda name: None,
                       pace=IntakePace(backlog_max=2, keeping_up_share=0.5, hold_max_ms=hold_max_ms))
    assert actor.manual_credit  # the runtime leaves the grants to the actor
    actor.receive(CONSUMER, Consume(1, "t", ack_required=True, credit=4, exclusive=False, arguments={}))
    return actor, runtime


def test_credit_is_held_while_the_queue_is_long_and_its_consumer_keeps_up_then_let_go():
    async def scenario() -> None:
        actor, runtime = paced_queue()
        actor.receive(CH, Publish([published(i) for i in range(1, 7)]))  # 4 delivered, 2 ready
        assert runtime.released == 2  # short: the credit goes back (the Consume released nothing held)
        actor.receive(CH, Publish([published(7), published(8)]))  # 4 of 8 delivered, 4 ready
        assert runtime.released == 2  # held
        actor.receive(CONSUMER, Grant("t", 2))  # the consumer keeps up: 2 more leave, 2 ready
        assert runtime.released == 3
    asyncio.run(scenario())


def test_a_consumer_far_behind_the_publisher_does_not_hold_it():
    async def scenario() -> None:
        actor, runtime = paced_queue()
        actor.receive(CH, Publish([published(i) for i in range(1, 101)]))  # 4 of 100 delivered
        assert runtime.released == 2 and actor.core.messages_ready == 96
    asyncio.run(scenario())


def test_a_hold_ends_by_itself_after_hold_max_ms():
    async def scenario() -> None:
        actor, runtime = paced_queue(hold_max_ms=1)
        actor.receive(CH, Publish([published(i) for i in range(1, 8)]))  # 4 of 7 delivered, 3 ready
        assert runtime.released == 1  # held
        await async_until(lambda: runtime.released != 1, "the hold's timer", deadline_s, every_s=0.001, raises=False)
        assert runtime.released == 2  # nothing else happened: the hold's own timer let it go
    asyncio.run(scenario())


class Publisher:
    """A channel of the queue's host: what it is confirmed."""

    def __init__(self) -> None:
        self.confirmed: list[int] = []

    def receive(self, sender, msg) -> None:
        if type(msg) is Confirm:
            self.confirmed.append(msg.upto)


async def _turns(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)  # loop turns (not a timing wait): the runtime's flushes run


def test_credit_is_held_while_the_queue_is_out_of_credit_with_its_store_and_let_go_when_it_grants(tmp_path):
    """The queue -> msg_store link (400 / 200): a queue 400 messages ahead of its store's syncs
    holds its publishers until the store's commits have synced them and granted the credit back."""
    async def scenario() -> None:
        s = storage_at(str(tmp_path))
        backing, _ = s.open_queue("/", "q", lazy=False)
        runtime = Runtime("queue0", {"queue0": f"ipc://{tmp_path}/queue0"})
        await runtime.start()
        turns: list = []
        syncs = HeldSyncs()
        store = MsgStoreActor(runtime, GroupCommit(schedule=turns.append, syncs=syncs))
        runtime.spawn(STORE_NAME, store)
        actor = QueueActor(runtime, ClassicQueue("/", "q", ready=BackedReady(backing), hold_confirms=True),
                           lambda name: None, s, backing, store.address, IntakePace())
        queue = runtime.spawn(actor.name, actor)
        publisher = Publisher()
        pub = runtime.spawn("ch1", publisher)

        def credit(of: Address, to: Address) -> int:
            return runtime.flow_state(of)["credit"][str(to)]

        runtime.send(queue, Publish([published(1)]), sender=pub, credit=1)
        await _turns()
        assert credit(queue, store.address) == 399 and len(turns) == 1  # marked for the store's commit
        turns.pop()()  # the commit starts; its syncs are running
        runtime.send(queue, Publish([published(i) for i in range(2, 402)]), sender=pub, credit=400)
        await _turns()
        assert runtime.flow_state(queue)["blocked_on"] == [str(store.address)]  # 401 ahead of the syncs
        assert runtime.blocked(pub) and credit(pub, queue) == -1  # and its publisher's credit is held
        syncs.running.pop()()  # the first commit's sync is done: message 1 confirmed
        await _turns()
        assert publisher.confirmed == [1] and runtime.blocked(queue)  # 1 granted back: not enough
        turns.pop()()  # the next commit covers the other 400
        syncs.running.pop()()
        await _turns()
        assert publisher.confirmed == [1, 401]
        assert not runtime.blocked(queue) and not runtime.blocked(pub)  # the store granted; the queue let go
        await runtime.close()
    asyncio.run(scenario())
