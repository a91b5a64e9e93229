"""Quiescence (raft/quiescence.py): an idle group goes quiet and sends nothing, anything given to a
quiet member wakes it, and a dead leader is still replaced: through the node liveness the shell
passes on (`peer_down`), or through the restarted leader's own vote request, which no lease holds
back. Exact effects on the cores, and scenarios on the synchronous in-memory cluster."""
from __future__ import annotations

import dataclasses

from raft.effects import LeaderChanged, ToPeer
from raft import Entry
from raft.commands import user
from raft.messages import AppendEntries, Heartbeat, HeartbeatReply, PreVote, PreVoteReply
from raft.roles import FOLLOWER, LEADER
from tests.raft.harness import SETTINGS, Cluster, cmd, make, sends

QUIET = dataclasses.replace(SETTINGS, quiesce=True)


def cluster(ids=("a", "b", "c")) -> Cluster:
    c = Cluster({i: make(i, ids, settings=QUIET, seed=n) for n, i in enumerate(ids)})
    c.run("a", c.cores["a"].campaign_now())
    assert c.cores["a"].role == LEADER
    return c


def quiet(c: Cluster) -> set[str]:
    return {name for name, core in c.cores.items() if core.quiet}


def test_an_idle_group_goes_quiet_at_the_leaders_heartbeat_and_then_sends_nothing():
    c = cluster()
    a = c.cores["a"]
    out = a.tick()  # the no-op is committed everywhere: the first heartbeat is a quiet one
    out += a.tick()
    assert sends(out) == [ToPeer("b", Heartbeat(a.term, "a", a.commit, quiet=True)),
                          ToPeer("c", Heartbeat(a.term, "a", a.commit, quiet=True))]
    c.run("a", out)
    assert quiet(c) == {"a", "b", "c"}  # and the followers did not answer
    for _ in range(3 * QUIET.election_ticks):
        for name, core in c.cores.items():
            assert core.tick() == []  # no heartbeats, no election timeouts


def test_a_leader_with_an_entry_not_yet_on_every_follower_does_not_go_quiet():
    c = cluster()
    a = c.cores["a"]
    c.down.add("c")
    c.run("a", a.propose(cmd(1), "x"))  # committed by a and b; c lags
    out = a.tick() + a.tick()
    assert [type(s.msg) for s in sends(out)] == [Heartbeat, Heartbeat] and not a.quiet
    assert not any(s.msg.quiet for s in sends(out))


def test_a_single_member_group_goes_quiet_alone():
    a = make("a", ("a",), settings=QUIET)
    out = a.campaign_now()
    assert LeaderChanged("a") in out and a.role == LEADER
    a.written(a.log.sync())
    assert a.tick() + a.tick() == [] and a.quiet


def test_a_proposal_wakes_a_quiet_leader_and_its_append_wakes_the_followers():
    c = cluster()
    c.tick(2)
    assert quiet(c) == {"a", "b", "c"}
    a = c.cores["a"]
    out = a.propose(cmd(1), "x")
    assert not a.quiet and [type(s.msg) for s in sends(out)] == [AppendEntries, AppendEntries]
    c.run("a", out)
    assert quiet(c) == set()
    c.tick(2)  # idle again: quiet again, the quiet heartbeat telling the followers the commit
    assert quiet(c) == {"a", "b", "c"} and c.cores["b"].applied == c.cores["c"].applied == a.commit


def test_a_follower_whose_log_ends_past_the_commit_answers_and_stays_awake():
    b = make("b", entries=[Entry(1, 1, user(cmd(1)))], term=1, settings=QUIET)
    out = b.step(Heartbeat(1, "a", 0, quiet=True))
    assert sends(out) == [ToPeer("a", HeartbeatReply(1, "b"))] and not b.quiet
    assert b.step(Heartbeat(1, "a", 1, quiet=True)) == [] and b.quiet  # its log ends at the commit


def test_a_quiet_follower_keeps_its_lease_against_others_but_not_against_its_own_leader():
    """A pre-vote from another member is held back by the lease (the leader may well be alive);
    one from the member it follows means that member no longer leads (it restarted)."""
    c = cluster()
    c.tick(2)
    b = c.cores["b"]
    assert b.quiet and b.leader_id == "a"
    last, last_term = b.log.last_index_term()
    term = b.term
    assert b.step(PreVote(term + 1, "c", last, last_term)) == []  # in lease: ignored, and awake now
    assert not b.quiet
    # awake alone, b times out; its own pre-vote wakes the leader, which heartbeats: quiet again,
    # with the same leader in the same term
    for _ in range(3 * QUIET.election_ticks):
        c.tick()
        if quiet(c) == {"a", "b", "c"}:
            break
    assert quiet(c) == {"a", "b", "c"} and b.leader_id == "a" and b.term == term
    out = b.step(PreVote(b.term + 1, "a", last, last_term))
    assert out == [ToPeer("a", PreVoteReply(b.term + 1, "b", True))]


def test_a_restarted_leader_is_elected_again_by_its_quiet_followers():
    c = cluster()
    c.tick(2)
    term = c.cores["a"].term
    # the leader's process restarts: the same log, no role, no leader; its followers stay quiet
    c.cores["a"] = make("a", entries=c.cores["a"].log.entries(1, c.cores["a"].log.last_index_term()[0] + 1),
                        term=term, settings=QUIET, seed=7)
    c.tick(3 * QUIET.election_ticks)
    assert c.cores["a"].role == LEADER or c.cores["b"].role == LEADER or c.cores["c"].role == LEADER
    assert max(core.term for core in c.cores.values()) == term + 1


def test_a_leaders_node_down_makes_its_quiet_followers_stand_for_election():
    c = cluster()
    c.tick(2)
    c.down.add("a")
    assert c.cores["b"].quiet and c.cores["c"].quiet
    for name in ("b", "c"):
        out = c.cores[name].peer_down(leader=True)
        assert out == [LeaderChanged(None)] and not c.cores[name].quiet and c.cores[name].leader_id is None
    c.tick(QUIET.election_ticks)  # at most the random part of the timeout
    assert {c.cores["b"].role, c.cores["c"].role} == {LEADER, FOLLOWER}


def test_a_quiet_leader_told_of_a_followers_node_wakes_and_heartbeats():
    c = cluster()
    c.tick(2)
    a = c.cores["a"]
    assert a.peer_down(leader=False) == [] and not a.quiet
    out = a.tick()  # heartbeats, not quiet ones: it goes quiet again once both answered
    assert [s.msg for s in sends(out)] == [Heartbeat(a.term, "a", a.commit), Heartbeat(a.term, "a", a.commit)]
    c.down.add("c")  # c's node is down indeed: b answers, c never does
    c.run("a", out)
    c.tick(2)
    assert not a.quiet and a.role == LEADER  # b and a are a majority


def test_a_vote_request_wakes_a_quiet_leader_which_stays_leader_in_its_lease():
    c = cluster()
    c.tick(2)
    a = c.cores["a"]
    last, last_term = a.log.last_index_term()
    assert a.step(PreVote(a.term + 1, "c", last, last_term)) == []
    assert a.role == LEADER and not a.quiet
    assert [type(s.msg) for s in sends(a.tick())] == [Heartbeat, Heartbeat]  # at once: "I lead"
