"""The WalActor syncs a batch that nobody waits on off the loop (actors/raft/wal.py): a leader of
three or more voters commits through its followers' acks, so its own sync need not hold the loop;
a follower's, a lone leader's or a vote's still syncs on it. A simulated disk, a loop whose
call_soon only queues, and a stand-in for the sync thread that syncs when the test says."""
from __future__ import annotations

import asyncio
import random
from contextlib import contextmanager

from actors.quorum.config import queue_config
from actors.quorum.front import QueueFront, RaftView
from actors.quorum.machine import QuorumMachine
from actors.quorum.member import QuorumMember
from actors.raft.wal import WalActor
from actors.runtime.address import Address
from persist.wal.writer import WalWriter
from raft.config import ClusterConfig, RaftSettings
from raft.core import RaftCore
from raft.log import Entry
from actors.quorum.effects import QUEUE_EXPIRY
from actors.runtime.clock import now_ms
from raft.messages import AppendReply, RequestVoteReply
from raft.roles import LEADER
from tests.quorum.test_member_pacing import CreditRuntime
from tests.raft_integration.test_member_shell import Loop
from tests.sim.simdisk import SimDisk


class StepSyncs:
    """ThreadSyncs' interface: `collect` gathers the syncs asked for inside it instead of doing
    them, `run` keeps them with their callback, and `finish` does them and calls back, as the
    sync thread's end does on the loop."""

    def __init__(self, disk: SimDisk) -> None:
        self.disk = disk
        self.waiting: list = []

    @contextmanager
    def collect(self):
        collected: list[str] = []
        real = self.disk.sync
        self.disk.sync = collected.append
        try:
            yield collected
        finally:
            self.disk.sync = real

    def run(self, collected: list[str], done) -> None:
        self.waiting.append((collected, done))

    def finish(self) -> None:
        (collected, done), = self.waiting
        self.waiting = []
        for path in collected:
            self.disk.sync(path)
        done()


def wal(urgent: bool) -> tuple[WalActor, WalWriter, SimDisk, StepSyncs, Loop, list]:
    disk, loop = SimDisk(random.Random(0)), Loop()
    writer = WalWriter(disk, 1 << 20, 64)
    writer.recover()
    syncs = StepSyncs(disk)
    actor = WalActor(writer, loop, syncs=syncs)
    told: list[tuple[str, int]] = []
    writer.member("m")
    actor.register("m", lambda upto: told.append(("m", upto)), 0, lambda: urgent)
    return actor, writer, disk, syncs, loop, told


def append(writer: WalWriter, lo: int, hi: int) -> None:
    writer.logs["m"].append([Entry(i, 1, b"c") for i in range(lo, hi + 1)])


def test_a_batch_nobody_waits_on_is_written_on_the_loop_synced_off_it_and_told_after():
    actor, writer, disk, syncs, loop, told = wal(urgent=False)
    append(writer, 1, 3)
    actor.kick()
    before = disk.syncs
    loop.turn()
    assert told == [] and disk.syncs == before and len(syncs.waiting) == 1  # written, not synced
    writer.logs["m"].set_written(3)
    assert writer.logs["m"].written_index() == 0  # the log itself does not count it yet
    syncs.finish()
    assert disk.syncs == before + 1 and told == [("m", 3)] and actor.background_syncs == 1


def test_one_batch_in_flight_what_comes_meanwhile_goes_with_the_next_flush():
    actor, writer, disk, syncs, loop, told = wal(urgent=False)
    append(writer, 1, 3)
    actor.kick()
    loop.turn()
    append(writer, 4, 5)
    turn_ends = []
    actor.at_turn_end(lambda: turn_ends.append(True))
    loop.turn()
    assert turn_ends == [True]  # the turn's sends are not held back by the sync in flight
    assert writer.core.pending_bytes() and len(syncs.waiting) == 1  # 4..5 wait for the next batch
    syncs.finish()
    assert told == [("m", 3)]
    loop.turn()  # the end of the sync kicked the next flush
    syncs.finish()
    assert told == [("m", 3), ("m", 5)]


def test_an_urgent_member_or_a_hard_state_syncs_on_the_loop():
    actor, writer, disk, syncs, loop, told = wal(urgent=True)
    append(writer, 1, 2)
    actor.kick()
    loop.turn()
    assert told == [("m", 2)] and syncs.waiting == [] and actor.background_syncs == 0
    actor, writer, disk, syncs, loop, told = wal(urgent=False)
    writer.logs["m"].save_hard_state(2, "n2")
    append(writer, 1, 1)
    actor.kick()
    loop.turn()
    assert told == [("m", 1)] and syncs.waiting == []
    assert writer.logs["m"].durable_hard_state() == (2, "n2")


def test_a_member_that_truncates_while_its_batch_syncs_is_told_only_what_lies_below_the_cut():
    actor, writer, disk, syncs, loop, told = wal(urgent=False)
    append(writer, 1, 5)
    actor.kick()
    loop.turn()
    writer.logs["m"].truncate_from(4)  # it stepped down; the new leader's 4..6 replace ours
    writer.logs["m"].append([Entry(i, 2, b"n") for i in range(4, 7)])
    syncs.finish()
    assert told == [("m", 3)]
    log = writer.logs["m"]
    log.set_written(5)
    assert log.written_index() == 3  # the replacing 4..6 are not durable until their own sync


def three_voter_member(arguments: dict | None = None, created_ms: int = 0
                       ) -> tuple[QuorumMember, Loop, StepSyncs]:
    me, peers = "n1:quorum/qq", ["n2:quorum/qq", "n3:quorum/qq"]
    loop, disk = Loop(), SimDisk(random.Random(0))
    writer = WalWriter(disk, 1 << 20, 64)
    writer.recover()
    syncs = StepSyncs(disk)
    machine = QuorumMachine(queue_config("qq", "/", arguments or {}, created_ms=created_ms))
    core = RaftCore(me, ClusterConfig(frozenset([me, *peers])), writer.member("qq"), machine, random.Random(0),
                    RaftSettings(append_per_turn=True))
    member = QuorumMember(CreditRuntime(), Address.parse(me), core, WalActor(writer, loop, syncs=syncs),
                          QueueFront(RaftView(core), machine, {}), "qq")
    return member, loop, syncs


def elect(member: QuorumMember, loop: Loop) -> None:
    member.campaign_now()
    while loop.ready:
        loop.turn()
    member.receive(Address.parse("n2:quorum/qq"), RequestVoteReply(member.core.term, "n2:quorum/qq", True))


def test_only_a_leader_whose_followers_are_a_majority_says_its_write_can_wait():
    member, loop, _ = three_voter_member()
    assert member._write_urgent()  # a follower's ack waits for its write
    elect(member, loop)
    assert member.core.role == LEADER
    assert not member._write_urgent()  # two followers' acks commit without it


def test_a_leader_that_commits_through_its_followers_before_its_own_write_times_its_timers_from_now():
    """x-expires 500 ms: the new leader arms the queue's expiry once its no-op is applied. With
    its own write still syncing, the followers' acks commit it, and the timer must count from
    the time of that input, not from a clock the member never set (the queue would never expire)."""
    async def scenario() -> None:
        member, loop, syncs = three_voter_member({"x-expires": 500}, created_ms=now_ms())
        elect(member, loop)
        loop.turn()  # the no-op's AppendEntries leave; its batch syncs in the background
        assert len(syncs.waiting) == 1 and member.core.commit == 0
        index = member.core.log.last_index_term()[0]
        for peer in ("n2:quorum/qq", "n3:quorum/qq"):
            member.receive(Address.parse(peer), AppendReply(member.core.term, peer, True, index))
        assert member.core.commit == index
        timer = member._actor_effects._timers[QUEUE_EXPIRY]
        assert 0 <= timer.when() - asyncio.get_running_loop().time() <= 0.501
        member.stop()
    asyncio.run(scenario())
