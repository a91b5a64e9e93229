"""The core against the Raft paper, rule by rule (after etcd's raft_paper_test.go): each test
names the section it checks and asserts the exact effects the core returns."""
from __future__ import annotations

import random

from raft import Entry
from raft.commands import NOOP_COMMAND, user
from raft.effects import (ClientReply, LeaderChanged, NotLeader, PersistHardState, ToPeer)
from raft.messages import (AppendEntries, AppendReply, Heartbeat, HeartbeatReply, PreVote,
                                   PreVoteReply, RequestVote, RequestVoteReply)
from raft.roles import CANDIDATE, FOLLOWER, LEADER, PRE_CANDIDATE
from tests.raft.harness import cfg, cmd, elect, make, sends


def e(index: int, term: int, n: int | None = None) -> Entry:
    return Entry(index, term, user(cmd(n if n is not None else index)))


def test_higher_term_message_makes_follower_and_persists_term_first():
    """Reference: Raft §5.1 - a server seeing a larger term updates its term, reverts to
    follower; the new term is persisted before anything is sent."""
    a = make(term=1)
    out = a.step(Heartbeat(3, "b", 0))
    assert out == [PersistHardState(3, None), LeaderChanged("b"),
                   ToPeer("b", HeartbeatReply(3, "a"))]
    assert (a.term, a.role, a.leader_id) == (3, FOLLOWER, "b")


def test_stale_term_append_is_rejected_with_current_term():
    """Reference: Raft §5.1 - a request with a stale term is rejected; the reply carries our
    term so the stale leader steps down."""
    a = make(term=3)
    out = a.step(AppendEntries(2, "b", 0, 0, (e(1, 2),), 0))
    assert out == [ToPeer("b", AppendReply(3, "a", False, 0))]
    assert a.log.last_index_term() == (0, 0)


def test_members_start_as_followers():
    """Reference: Raft §5.2 - servers begin as followers."""
    assert make().role == FOLLOWER


def test_election_timeout_is_randomized_within_one_to_two_timeouts():
    """Reference: Raft §5.2 - randomized election timeouts, here from the injected rng."""
    timeouts = {make(seed=s).timeout for s in range(40)}
    assert min(timeouts) >= 10 and max(timeouts) < 20 and len(timeouts) > 3


def test_election_timeout_starts_prevote_without_bumping_term():
    """Reference: Raft dissertation §9.6 pre-vote - a follower asks whether it would win
    before incrementing its term."""
    a = make(term=2, entries=[e(1, 2)])
    out = []
    for _ in range(a.timeout):
        out = a.tick()
    assert out == [ToPeer("b", PreVote(3, "a", 1, 2)), ToPeer("c", PreVote(3, "a", 1, 2))]
    assert (a.term, a.role) == (2, PRE_CANDIDATE)


def test_a_new_groups_preferred_leader_asks_for_votes_at_once_without_a_prevote():
    """Ra's trigger_election on a new quorum queue's first member: no timeout to wait for, and at
    term 0 no leader a pre-vote could protect; the vote is durable before RequestVote leaves."""
    a = make()
    out = a.campaign_now()
    assert out == [PersistHardState(1, "a"), ToPeer("b", RequestVote(1, "a", 0, 0, False)),
                   ToPeer("c", RequestVote(1, "a", 0, 0, False))]
    assert (a.term, a.role, a.voted_for) == (1, CANDIDATE, "a")
    assert make(peers=("a",)).campaign_now()[:2] == [PersistHardState(1, "a"), LeaderChanged("a")]  # alone: leads


def test_an_election_asked_for_in_a_group_that_had_a_term_starts_with_the_prevote():
    a = make(term=2, entries=[e(1, 2)])
    assert a.campaign_now() == [ToPeer("b", PreVote(3, "a", 1, 2)), ToPeer("c", PreVote(3, "a", 1, 2))]
    assert (a.term, a.role) == (2, PRE_CANDIDATE)
    b = make("b", config=cfg("a", "c"))  # not a voter: it never stands
    assert b.campaign_now() == []


def test_prevote_majority_starts_election_persisting_vote_before_requests():
    """Reference: Raft §5.2 - a candidate increments its term, votes for itself and requests
    votes; the vote is durable before RequestVote leaves (etcd's Ready ordering)."""
    a = make(term=2, entries=[e(1, 2)])
    while not a.tick():
        pass
    out = a.step(PreVoteReply(3, "b", True))
    assert out == [PersistHardState(3, "a"), ToPeer("b", RequestVote(3, "a", 1, 2, False)),
                   ToPeer("c", RequestVote(3, "a", 1, 2, False))]
    assert (a.term, a.role, a.voted_for) == (3, CANDIDATE, "a")


def test_candidate_with_majority_becomes_leader_and_appends_noop():
    """Reference: Raft §5.2 wins an election with a majority; §8 a new leader commits a
    no-op entry of its term."""
    a = make(term=1, entries=[e(1, 1)])
    out = elect(a)
    assert a.role == LEADER
    assert out[0] == LeaderChanged("a")
    noop = Entry(2, 2, NOOP_COMMAND)
    assert sends(out) == [ToPeer("b", AppendEntries(2, "a", 1, 1, (noop,), 0)),
                          ToPeer("c", AppendEntries(2, "a", 1, 1, (noop,), 0))]


def test_vote_granted_once_per_term():
    """Reference: Raft §5.2 - each server votes for at most one candidate in a term, first come
    first served; the vote is persisted before the reply."""
    a = make(term=1)
    assert a.step(RequestVote(2, "b", 0, 0)) == [
        PersistHardState(2, None), PersistHardState(2, "b"),
        ToPeer("b", RequestVoteReply(2, "a", True))]
    assert a.step(RequestVote(2, "c", 0, 0)) == [ToPeer("c", RequestVoteReply(2, "a", False))]
    assert a.step(RequestVote(2, "b", 0, 0))[-1] == ToPeer("b", RequestVoteReply(2, "a", True))


def test_vote_denied_to_candidate_with_stale_log():
    """Reference: Raft §5.4.1 election restriction - deny the vote if the candidate's log is
    less up to date: lower last term, or same last term and shorter."""
    for last_index, last_term, granted in [(1, 1, False), (3, 1, False), (1, 2, False),
                                           (2, 2, True), (1, 3, True)]:
        a = make(term=2, entries=[e(1, 1), e(2, 2)])
        out = a.step(RequestVote(3, "b", last_index, last_term))
        assert out[-1] == ToPeer("b", RequestVoteReply(3, "a", granted)), (last_index, last_term)


def test_prevote_also_applies_election_restriction():
    """Reference: Raft §5.4.1 and dissertation §9.6 - pre-votes follow the same restriction and
    never change the voter's term."""
    a = make(term=2, entries=[e(1, 2)])
    assert a.step(PreVote(3, "b", 0, 0)) == [ToPeer("b", PreVoteReply(2, "a", False))]
    assert a.step(PreVote(3, "b", 1, 2)) == [ToPeer("b", PreVoteReply(3, "a", True))]
    assert a.term == 2 and a.voted_for is None


def test_member_in_leader_lease_ignores_disruptive_vote_requests():
    """Reference: Raft dissertation §4.2.3 - a server that heard from a leader within the
    minimum election timeout ignores RequestVote from a (removed or partitioned) server."""
    a = make(term=2)
    a.step(Heartbeat(2, "b", 0))
    assert a.step(RequestVote(5, "c", 9, 9)) == []
    assert a.term == 2
    assert a.step(RequestVote(5, "c", 9, 9, transfer=True))[-1] == \
        ToPeer("c", RequestVoteReply(5, "a", True))


def test_follower_rejects_append_without_matching_prev_entry_with_hint():
    """Reference: Raft §5.3 consistency check - reject if the log has no entry at prevLogIndex
    with prevLogTerm; the hint lets the leader skip a term per round trip."""
    a = make(term=3, entries=[e(1, 1), e(2, 1), e(3, 2), e(4, 2)])
    out = a.step(AppendEntries(3, "b", 4, 3, (), 0))
    assert out == [LeaderChanged("b"), ToPeer("b", AppendReply(3, "a", False, 4, 4, 2))]
    # the leader's log (..., (4,3)): hint (4, t2) makes it probe below its own term-2 entries
    out = a.step(AppendEntries(3, "b", 2, 1, (), 0))
    assert out == [ToPeer("b", AppendReply(3, "a", True, 2))]


def test_follower_deletes_conflicting_suffix_and_appends():
    """Reference: Raft §5.3 - an existing entry that conflicts with a new one (same index,
    different term) is deleted with everything after it."""
    a = make(term=3, entries=[e(1, 1), e(2, 1), e(3, 2)])
    out = a.step(AppendEntries(3, "b", 1, 1, (e(2, 3, 20), e(3, 3, 30)), 0))
    assert a.log.entries(1, 4) == [e(1, 1), e(2, 3, 20), e(3, 3, 30)]
    assert not sends(out, AppendReply), "no ack before the WAL has written the new entries"


def test_follower_acks_only_written_entries():
    """Ra's rule (and Raft §5.3 "respond after stored"): the ack is sent when the WAL reports
    the entries written and carries the written, matching index."""
    a = make(term=1)
    a.step(AppendEntries(1, "b", 0, 0, (e(1, 1), e(2, 1)), 0))
    assert a.written(1) == []          # MemoryLog: not synced yet, so nothing is written
    upto = a.log.sync()
    assert a.written(upto) == [ToPeer("b", AppendReply(1, "a", True, 2))]


def test_follower_commits_up_to_leader_commit_and_last_new_entry():
    """Reference: Raft §5.3 - commitIndex = min(leaderCommit, index of last new entry)."""
    a = make(term=1, entries=[e(1, 1), e(2, 1), e(3, 1)])
    a.step(AppendEntries(1, "b", 1, 1, (), 3))
    assert a.commit == 1
    a.step(AppendEntries(1, "b", 2, 1, (), 3))
    assert a.commit == a.applied == 2


def leader_with(entries, term):
    a = make(term=term - 1, entries=entries)
    elect(a)
    assert a.term == term
    return a


def test_leader_counts_itself_only_up_to_its_written_index():
    """Ra's rule: the leader is part of the majority only for entries it has written."""
    a = leader_with([], 1)
    a.propose(cmd(1), "c1")
    assert a.commit == 0
    out = a.step(AppendReply(1, "b", True, 2))
    assert a.commit == 0 and not [x for x in out if isinstance(x, ClientReply)]
    out = a.written(a.log.sync())
    assert a.commit == 2
    assert ClientReply("c1", (2, 1, 1)) in out


def test_leader_does_not_commit_previous_term_entries_by_counting():
    """Reference: Raft §5.4.2 - only entries from the leader's current term are committed by
    counting replicas; earlier ones are committed indirectly."""
    a = leader_with([e(1, 1)], 3)   # log: (1,t1) (2,t3 noop)
    a.written(a.log.sync())
    a.step(AppendReply(3, "b", True, 1))
    assert a.commit == 0, "entry 1 is of term 1 and must not be committed by counting"
    a.step(AppendReply(3, "b", True, 2))
    assert a.commit == 2 and a.applied == 2


def test_leader_sends_heartbeats_with_safe_commit():
    """Reference: Raft §5.2 - leaders send periodic heartbeats; the commit they carry is
    min(follower match, leader commit) so a follower never commits an unverified entry."""
    a = leader_with([], 1)
    a.written(a.log.sync())
    a.step(AppendReply(1, "b", True, 1))
    assert a.commit == 1
    out = []
    for _ in range(2):
        out += a.tick()
    assert sends(out, Heartbeat) == [ToPeer("b", Heartbeat(1, "a", 1)), ToPeer("c", Heartbeat(1, "a", 0))]


def test_follower_redirects_client_to_leader():
    """Reference: Raft §8 - a follower rejects client requests and names the leader."""
    a = make(term=1)
    a.step(Heartbeat(1, "b", 0))
    assert a.propose(cmd(1), 7) == [NotLeader(7, "b")]


def test_leader_steps_down_without_quorum_contact():
    """Reference: Raft dissertation §6.2 check-quorum - a leader that has not heard from a
    majority within an election timeout steps down."""
    a = leader_with([], 1)
    out = []
    for _ in range(10):
        out += a.tick()
    assert a.role == FOLLOWER and LeaderChanged(None) in out


def test_leader_stays_with_quorum_contact():
    """Reference: Raft dissertation §6.2 check-quorum."""
    a = leader_with([], 1)
    for _ in range(10):
        if a.heartbeat_elapsed == 0:
            a.step(HeartbeatReply(1, "b"))
        a.tick()
    assert a.role == LEADER


def test_pipelining_is_bounded_by_max_inflight():
    """etcd's flow control: in replicate state at most max_inflight appends are unacked."""
    a = leader_with([], 1)
    a.written(a.log.sync())
    a.step(AppendReply(1, "b", True, 1))      # b: probe -> replicate
    sent = []
    for n in range(6):
        sent += sends(a.propose(cmd(n), n), AppendEntries)
    to_b = [s.msg for s in sent if s.to == "b"]
    assert [m.entries[0].index for m in to_b] == [2, 3]     # window of 2 (SETTINGS.max_inflight)
    out = a.step(AppendReply(1, "b", True, 3))
    batch = [s.msg for s in sends(out, AppendEntries) if s.to == "b"]
    assert [x.index for x in batch[0].entries] == [4, 5, 6, 7]   # max_batch_entries = 4


def test_leader_backs_off_by_term_on_rejection():
    """Reference: Raft §5.3 - after a rejection the leader decrements nextIndex and retries;
    with the conflict hint it skips a whole term at once."""
    a = leader_with([e(1, 1), e(2, 1), e(3, 2), e(4, 2), e(5, 2)], 4)
    out = a.step(AppendReply(4, "b", False, 5, 2, 1))
    retry = [s.msg for s in sends(out, AppendEntries) if s.to == "b"][0]
    assert (retry.prev_index, retry.prev_term) == (2, 1)
    assert [x.index for x in retry.entries] == [3, 4, 5, 6]


def test_random_state_comes_only_from_injected_rng():
    """Determinism: the same seed gives the same election timeouts."""
    assert [make(seed=7).timeout for _ in range(3)] == [random.Random(7).randrange(10) + 10] * 3
