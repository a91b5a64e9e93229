"""A quorum queue's leader paces its publishers as a classic queue does (flow/intake.py through
actors/quorum/member.py): the credit of what it took in goes back while it is short or its
consumers lag far behind, is held while it is long and they keep up, and goes back when they have
caught up or when the hold is too old. One member, a real Raft core and WAL over a simulated disk,
a runtime that records sends and grants."""
from __future__ import annotations

import asyncio
import random
import time

from actors.messages.channel_queue import Consume, Deliver, Publish, Published, Settle
from actors.quorum.config import queue_config
from actors.quorum.front import QueueFront, RaftView
from actors.quorum.machine import QuorumMachine
from actors.quorum.member import QuorumMember
from actors.raft.wal import WalActor
from actors.runtime.address import Address
from flow.intake import IntakePace
from persist.wal.writer import WalWriter
from raft.config import ClusterConfig, RaftSettings
from raft.core import RaftCore
from raft.roles import LEADER
from tests.quorum.harness import H
from tests.raft_integration.test_member_shell import Loop
from tests.sim.simdisk import SimDisk
from tests.waiting import async_until

ME = Address("n1:quorum", "qq")
PUBLISHER, CONSUMER = Address("conn0", "ch1"), Address("conn1", "ch1")
deadline_s = 30.0


class CreditRuntime:
    """Records deliveries and when the member lets its publishers' credit go."""

    host = "n1:quorum"

    def __init__(self) -> None:
        self.released = 0
        self.delivered = 0

    def send(self, to, msg, *, sender, credit=0) -> None:
        if type(msg) is Deliver:
            self.delivered += len(msg.messages)

    def processed_all(self, actor) -> None:
        self.released += 1


LOOP = Loop()  # the WAL's: call_soon only queues, so a test runs the turns an input led to


async def turns() -> None:
    """Run the WAL's flushes and the member's turn ends until nothing more is queued."""
    while LOOP.ready:
        LOOP.turn()


async def paced_member(hold_max_ms: int = 60_000) -> tuple[QuorumMember, CreditRuntime]:
    runtime = CreditRuntime()
    writer = WalWriter(SimDisk(random.Random(0)), 1 << 20, 64)
    writer.recover()
    machine = QuorumMachine(queue_config("qq", "/", {}, created_ms=0))
    core = RaftCore(str(ME), ClusterConfig(frozenset({str(ME)})), writer.member("qq"), machine, random.Random(0),
                    RaftSettings(append_per_turn=True))
    member = QuorumMember(runtime, ME, core, WalActor(writer, LOOP),
                          QueueFront(RaftView(core), machine, {}), "qq")
    member._pace = IntakePace(backlog_max=2, keeping_up_share=0.5, hold_max_ms=hold_max_ms)
    while core.role != LEADER:  # alone: it elects itself once its election timeout passes
        member.tick()
        await turns()
    member.receive(CONSUMER, Consume(1, "t", ack_required=True, credit=4, exclusive=False, arguments={}))
    await turns()
    runtime.released = 0
    return member, runtime


def publish(member: QuorumMember, *seqs: int) -> None:
    member.receive(PUBLISHER, Publish([Published(seq, "", "qq", H, b"m") for seq in seqs]))


def test_credit_is_held_while_the_queue_is_long_and_its_consumer_keeps_up_then_let_go():
    async def scenario() -> None:
        member, runtime = await paced_member()
        publish(member, *range(1, 7))
        await turns()
        assert runtime.delivered == 4 and runtime.released >= 1  # short: the credit goes back
        released = runtime.released
        publish(member, 7, 8)  # 4 of 8 delivered, 4 ready
        await turns()
        assert runtime.released == released  # held
        member.receive(CONSUMER, Settle([0, 1], [], []))  # the consumer keeps up: 2 more leave
        await turns()
        assert runtime.delivered == 6 and runtime.released > released
    asyncio.run(scenario())


def test_a_consumer_far_behind_the_publisher_does_not_hold_it():
    async def scenario() -> None:
        member, runtime = await paced_member()
        publish(member, *range(1, 101))  # 4 of 100 delivered
        await turns()
        assert runtime.delivered == 4 and runtime.released >= 1
        released = runtime.released
        publish(member, 101)
        await turns()
        assert runtime.released > released
    asyncio.run(scenario())


def test_a_hold_ends_by_itself_after_hold_max_ms(monkeypatch):
    clock = [time.monotonic_ns() // 1_000_000]  # still while the turns run: a slow machine must not end the hold early
    monkeypatch.setattr("actors.quorum.member.monotonic_ms", lambda: clock[0])

    async def scenario() -> None:
        member, runtime = await paced_member(hold_max_ms=1)
        publish(member, *range(1, 8))  # 4 of 7 delivered, 3 ready
        await turns()
        assert member._credit._timer is not None  # held, its timer running
        released = runtime.released
        clock[0] += 1
        await async_until(lambda: runtime.released != released, "the hold's timer", deadline_s, every_s=0.001,
                          raises=False)
        assert runtime.released > released  # nothing else happened: the hold's own timer let it go
    asyncio.run(scenario())
