"""A quorum member's clock (actors/quorum/member.py): every input sets the front's `now_ms`, a
peer's message too, so the machine's timers count from the input that armed them. One member of
three voters, a real Raft core and WAL over a simulated disk, a loop that only queues."""
from __future__ import annotations

import asyncio
import random

from actors.quorum.config import queue_config
from actors.quorum.effects import QUEUE_EXPIRY
from actors.quorum.front import QueueFront, RaftView
from actors.quorum.machine import QuorumMachine
from actors.quorum.member import QuorumMember
from actors.raft.wal import WalActor
from actors.runtime.address import Address
from actors.runtime.clock import now_ms
from persist.wal.writer import WalWriter
from raft.config import ClusterConfig, RaftSettings
from raft.core import RaftCore
from raft.messages import AppendReply, RequestVoteReply
from raft.roles import LEADER
from tests.quorum.test_member_pacing import CreditRuntime
from tests.raft_integration.test_member_shell import Loop
from tests.sim.simdisk import SimDisk


def test_a_commit_that_followers_acks_bring_before_the_leaders_own_write_times_timers_from_now():
    """x-expires 500 ms: a new leader arms the queue's expiry once its no-op is applied. When the
    followers' acks commit the no-op before the leader's own write is reported (as the WAL's own
    process may report it, with `quorum_hosts` > 1), the timer must count from the time of that
    input, not from a clock the member never set (the queue would never expire)."""
    async def scenario() -> None:
        me, peers = "n1:quorum/qq", ["n2:quorum/qq", "n3:quorum/qq"]
        loop, disk = Loop(), SimDisk(random.Random(0))
        writer = WalWriter(disk, 1 << 20, 64)
        writer.recover()
        machine = QuorumMachine(queue_config("qq", "/", {"x-expires": 500}, created_ms=now_ms()))
        core = RaftCore(me, ClusterConfig(frozenset([me, *peers])), writer.member("qq"), machine,
                        random.Random(0), RaftSettings(append_per_turn=True))
        member = QuorumMember(CreditRuntime(), Address.parse(me), core, WalActor(writer, loop),
                              QueueFront(RaftView(core), machine, {}), "qq")
        member.campaign_now()
        while loop.ready:
            loop.turn()
        member.receive(Address.parse(peers[0]), RequestVoteReply(core.term, peers[0], True))
        index = core.log.last_index_term()[0]  # the no-op, queued in the WAL, not yet written
        assert core.role == LEADER and core.log.written_index() < index
        for peer in peers:
            member.receive(Address.parse(peer), AppendReply(core.term, peer, True, index))
        assert core.commit == index
        timer = member._actor_effects._timers[QUEUE_EXPIRY]
        assert 0 <= timer.when() - asyncio.get_running_loop().time() <= 0.501
        member.stop()
    asyncio.run(scenario())
