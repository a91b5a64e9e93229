"""A queue actor paces its publishers (flow/intake.py through actors/queue/shell.py): the credit of
what it took in goes back at once while it is short or its consumers lag far behind, is held while
it is long and they keep up, and goes back when they have caught up or when the hold is too old;
and once it took in too much while a sync that covers it is in flight, until that sync is done."""
from __future__ import annotations

import asyncio
import time

from actors.messages.channel_queue import Consume, Grant, Publish
from actors.queue.core import ClassicQueue
from actors.queue.group_commit import GroupCommit
from actors.queue.shell import QueueActor, ahead_of_sync_max
from actors.runtime.address import Address
from flow.intake import IntakePace
from persist.classic.backed import BackedReady
from tests.queue.test_durable_queue import CH, published, storage_at
from tests.queue.test_group_commit import HeldSyncs

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
        until = time.monotonic() + deadline_s
        while runtime.released == 1 and time.monotonic() < until:
            await asyncio.sleep(0.001)
        assert runtime.released == 2  # nothing else happened: the hold's own timer let it go
    asyncio.run(scenario())


def test_credit_is_held_once_the_queue_is_too_far_ahead_of_a_sync_in_flight(tmp_path):
    async def scenario() -> None:
        s = storage_at(str(tmp_path))
        backing, _ = s.open_queue("/", "q", lazy=False)
        runtime = CreditRuntime()
        turns: list = []
        syncs = HeldSyncs()
        commit = GroupCommit(schedule=turns.append, syncs=syncs)
        actor = QueueActor(runtime, ClassicQueue("/", "q", ready=BackedReady(backing), hold_confirms=True),
                           lambda name: None, s, backing, commit, IntakePace())
        actor.receive(CH, Publish([published(1)]))
        assert runtime.released == 1  # no sync in flight: the credit goes back at once
        turns.pop()()  # the commit starts; its syncs are running
        actor.receive(CH, Publish([published(i) for i in range(2, 2 + ahead_of_sync_max)]))
        assert runtime.released == 2  # the store may be that far behind
        actor.receive(CH, Publish([published(2 + ahead_of_sync_max)]))
        assert runtime.released == 2  # one more while the store syncs: held
        syncs.running.pop()()  # the syncs are done
        assert runtime.released == 3
    asyncio.run(scenario())
