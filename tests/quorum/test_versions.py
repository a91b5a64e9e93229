"""Quorum queue machine versions (actors/quorum/machine.py): each entry is applied by the rules of
the version the log runs there, so a log written by version 1 and switched to version 2 replays
identically under code that runs version 2."""
from __future__ import annotations

import random

import pytest

from actors.quorum import commands as c
from actors.quorum.config import queue_config
from actors.quorum.machine import MACHINE_VERSION, QuorumMachine
from actors.quorum.queries import stats
from raft import MemoryLog, RaftCore
from raft import commands as raft_commands
from raft.roles import LEADER
from tests.quorum.harness import Run
from tests.raft.harness import SETTINGS, Cluster, cfg

IDS = ("a", "b", "c")


LIMIT_0 = {"x-delivery-limit": 0}  # the first give-back past the limit dead-letters (dropped: no DLX)


@pytest.mark.parametrize("version,kept", [(1, False), (2, True)])
def test_a_channel_going_down_dead_letters_at_the_limit_in_version_1_only(version: int, kept: bool) -> None:
    run = Run(LIMIT_0, version=version)
    run.publish(b"m")
    run(c.Checkout(0, "A", "t", 1, True))
    run(c.ChannelDown(0, "A"))
    assert [e[3] for e in run.state.ready.returns] == ([1] if kept else [])
    assert run.stats["messages"] == (1 if kept else 0)


@pytest.mark.parametrize("version", [1, 2])
def test_a_consumers_give_back_dead_letters_at_the_limit_in_every_version(version: int) -> None:
    run = Run(LIMIT_0, version=version)
    run.publish(b"m")
    run(c.Checkout(0, "A", "t", 1, True))
    run(c.Return(0, "A", "t", (0,)))
    assert run.stats["messages"] == 0


def machine(runs: int) -> QuorumMachine:
    return QuorumMachine(queue_config("q", "/", LIMIT_0, created_ms=0), runs)


def core(name: str, log: MemoryLog, runs: int, seed: int, peers: tuple[str, ...] = IDS) -> RaftCore:
    return RaftCore(name, cfg(*peers), log, machine(runs), random.Random(seed), SETTINGS)


def leader(c_: Cluster) -> RaftCore:
    (lead,) = [x for x in c_.cores.values() if x.role == LEADER]
    return lead


def use(cluster: Cluster, channel: str, seq: int) -> None:
    """A publish, a consumer that takes it (the queue's only message), and its channel going down:
    the entry whose meaning changed between the versions."""
    lead = leader(cluster)
    for command in (c.Enqueue(0, "p", seq, "", "q", b"h", b"m%d" % seq), c.Checkout(0, channel, "t", 1, True),
                    c.ChannelDown(0, channel)):
        cluster.run(lead.id, lead.propose(c.encode(command), None))
    cluster.tick(4)


def test_a_version_1_log_replays_under_version_2_code() -> None:
    """Written by version-1 members, switched to version 2 by a rolling upgrade, replayed whole
    by a member whose code runs version 2: the same state as the members that applied it live."""
    cluster = Cluster({n: core(n, MemoryLog(), 1, k) for k, n in enumerate(IDS)})
    cluster.tick(25)
    use(cluster, "A", 1)
    for k, name in enumerate(IDS):  # the rolling upgrade: each node restarts on code that runs 2
        cluster.cores[name] = core(name, cluster.cores[name].log, MACHINE_VERSION, 10 + k)
        cluster.tick(40)
    assert [x.machine_version for x in cluster.cores.values()] == [2, 2, 2]
    use(cluster, "B", 2)
    lead = leader(cluster)
    log = lead.log
    entries = log.entries(1, log.last_index_term()[0] + 1)
    (switch,) = [e.index for e in entries if e.command[0] == raft_commands.VERSION]
    assert {x.versions[-1][0] for x in cluster.cores.values()} == {switch}

    replay = core("z", log, MACHINE_VERSION, 99, peers=("z",))
    for _ in range(30):
        replay.tick()
    replay.written(log.sync())
    assert replay.applied >= lead.applied
    assert stats(replay.state) == stats(lead.state)
    assert replay.machine.snapshot(replay.state) == lead.machine.snapshot(lead.state)
    # m1's consumer's channel went down under version 1 (dropped at the limit), m2's under
    # version 2 (back in the queue, counted)
    assert [e[3] for e in replay.state.ready.returns] == [1] and stats(replay.state)["messages"] == 1

    # applying every entry by one version's rules would not give that state: the versions matter
    for version, left in ((1, 0), (2, 2)):
        one = Run(LIMIT_0, version=version)
        for e in entries:
            if e.command[0] == raft_commands.USER:
                one(c.decode(e.command[1:]))
        assert one.stats["messages"] == left
