"""Scenarios for leadership transfer, membership changes and snapshots, on a synchronous
in-memory cluster (tests/raft/harness.Cluster)."""
from __future__ import annotations

import random

from raft import MemoryLog, RaftCore, RaftSettings
from raft.effects import ClientReply, ChangeRefused, ToPeer
from raft.messages import InstallSnapshot, RequestVote, TimeoutNow
from raft.roles import FOLLOWER, LEADER
from tests.raft.harness import SETTINGS, Cluster, cfg, cmd, make, sends
from tests.sim.kvmachine import KvMachine, command


def cluster(ids=("a", "b", "c"), settings=SETTINGS) -> Cluster:
    c = Cluster({i: make(i, ids, settings=settings, seed=n) for n, i in enumerate(ids)})
    c.tick(25)
    return c


def leader(c: Cluster) -> RaftCore:
    (core,) = [x for n, x in c.cores.items() if x.role == LEADER and n not in c.down]
    return core


def test_cluster_elects_one_leader_and_replicates():
    c = cluster()
    lead = leader(c)
    c.run(lead.id, lead.propose(cmd(1), "x"))
    assert [r for r in c.replies if isinstance(r, ClientReply)][-1].corr == "x"
    c.tick(2)
    assert {x.applied for x in c.cores.values()} == {lead.commit}


def test_transfer_sends_timeout_now_and_target_wins_despite_lease():
    """Reference: Raft dissertation §3.10 - the leader brings the target up to date, sends
    TimeoutNow; the target's RequestVote carries the transfer flag, so voters in the leader's
    lease still answer it."""
    c = cluster()
    lead = leader(c)
    target = sorted(set(c.cores) - {lead.id})[0]
    out = lead.transfer_leadership(target)
    assert sends(out) == [ToPeer(target, TimeoutNow(lead.term, lead.id))]
    assert lead.propose(cmd(1), 1)[0].corr == 1, "no proposals while transferring"
    c.run(lead.id, out)
    assert c.cores[target].role == LEADER and lead.role != LEADER


def test_timed_out_node_vote_request_carries_transfer_flag():
    a = make(term=1)
    a.step(TimeoutNow(1, "b"))
    assert sends(a.step(TimeoutNow(1, "b"))) == []  # already a candidate
    b = make("b", term=1)
    out = b.step(TimeoutNow(1, "a"))
    assert [s.msg for s in sends(out)] == [RequestVote(2, "b", 0, 0, True)] * 2


def test_add_member_joins_as_learner_then_is_promoted():
    """Reference: Raft dissertation §4.2.1 - a new server joins as a non-voting member until
    caught up; §4.1 one server at a time; the config takes effect when appended."""
    c = cluster()
    lead = leader(c)
    for n in range(5):
        c.run(lead.id, lead.propose(cmd(n), n))
    log = MemoryLog()
    c.cores["d"] = RaftCore("d", cfg(learners=("d",)), log, KvMachine(), random.Random(9), SETTINGS)
    out = lead.add_member("d", "add")
    assert "d" in lead.config.learners, "in force as soon as appended"
    assert lead.add_member("e", "again") == [ChangeRefused("again", "change_in_progress")]
    c.run(lead.id, out)
    c.tick(6)
    assert lead.config == cfg("a", "b", "c", "d")
    assert ClientReply("add", "ok") in c.replies
    assert c.cores["d"].applied == lead.applied and c.cores["d"].config == lead.config


def test_a_learner_caught_up_by_a_snapshot_is_promoted_on_an_idle_log():
    """The snapshot covers the whole log, the learner's config entry included: nothing more is
    appended, so the snapshot's completion itself must promote it."""
    settings = RaftSettings(election_ticks=10, heartbeat_ticks=2, max_inflight=2, max_batch_entries=4,
                            snapshot_interval=10)
    c = cluster(settings=settings)
    lead = leader(c)
    c.cores["d"] = RaftCore("d", cfg("a", "b", "c"), MemoryLog(), KvMachine(), random.Random(9), settings)
    c.down.add("d")
    c.run(lead.id, lead.add_member("d", "add"))
    for n in range(30):  # until a snapshot covers the whole log
        c.run(lead.id, lead.propose(cmd(n), n))
        c.tick(1)
        if lead.snapshot_index == lead.log.last_index_term()[0]:
            break
    assert lead.snapshot_index == lead.log.last_index_term()[0] and "d" in lead.config.learners
    c.down.discard("d")
    c.tick(10)
    assert lead.config == cfg("a", "b", "c", "d") and c.cores["d"].applied == lead.applied


def test_removed_leader_steps_down_after_commit():
    """Reference: Raft dissertation §4.2.2 - a leader removed from the configuration steps
    down once the entry that removes it is committed."""
    c = cluster()
    lead = leader(c)
    c.run(lead.id, lead.remove_member(lead.id, "rm"))
    assert lead.role != LEADER and lead.id not in lead.config.voters
    c.down.add(lead.id)
    c.tick(40)
    assert leader(c).config == lead.config


def test_snapshot_compacts_below_lowest_live_index_and_is_streamed_in_chunks():
    """Reference: Raft §7 - log compaction and InstallSnapshot; live entries survive
    compaction; the snapshot is sent in chunks of snapshot_chunk_bytes."""
    settings = RaftSettings(election_ticks=10, heartbeat_ticks=2, max_inflight=2,
                            max_batch_entries=4, snapshot_interval=10, snapshot_chunk_bytes=16)
    c = cluster(settings=settings)
    lead = leader(c)
    lagging = sorted(set(c.cores) - {lead.id})[0]
    c.down.add(lagging)
    c.run(lead.id, lead.propose(command("set", "k", 1, 0), "set"))
    live = lead.commit  # the "set" entry, which the machine keeps live
    for n in range(1, 25):
        c.run(lead.id, lead.propose(cmd(n), n))
    assert lead.snapshot_index >= 20
    assert lead.log.term_at(live) is not None, "the live 'set' entry is not compacted"
    assert lead.log.term_at(live - 1) is None
    c.down.discard(lagging)
    chunks = []
    real_step = c.cores[lagging].step

    def spy(msg):
        if isinstance(msg, InstallSnapshot):
            chunks.append(msg)
        return real_step(msg)
    c.cores[lagging].step = spy
    c.tick(6)
    assert len(chunks) >= 2 and all(len(ch.data) <= 16 for ch in chunks) and chunks[-1].done
    follower = c.cores[lagging]
    assert follower.applied == lead.applied and follower.state == lead.state


def test_the_only_voter_elects_itself_on_its_first_tick_and_a_member_of_three_waits():
    alone = make("a", peers=("a",))
    alone.tick()
    assert alone.role == LEADER and alone.term == 1
    member = make("a")
    for _ in range(SETTINGS.election_ticks - 1):  # below the shortest randomized timeout
        member.tick()
    assert member.role == FOLLOWER and member.term == 0
