"""flow/commit_wait.py: what a quorum leader's commit waits on, and the time it spent so."""
from __future__ import annotations

from flow.commit_wait import WAL, CommitWait, commit_waits_on
from flow.state import waiting_state

THREE = frozenset({"L", "a", "b"})
FIVE = frozenset({"L", "a", "b", "c", "d"})


def test_one_member_waits_on_its_wal_only():
    assert commit_waits_on(10, 9, frozenset({"L"}), {}) == {WAL}


def test_the_follower_closest_to_acking_is_what_a_majority_of_three_waits_on():
    assert commit_waits_on(10, 10, THREE, {"a": 8, "b": 3}) == {"a"}
    assert commit_waits_on(10, 9, THREE, {"a": 8, "b": 3}) == {"a", WAL}


def test_a_lagging_follower_does_not_hold_a_commit_a_majority_already_has():
    assert commit_waits_on(10, 9, THREE, {"a": 10, "b": 3}) == {WAL}  # only the leader's own write


def test_five_members_wait_on_the_two_closest_followers():
    assert commit_waits_on(10, 10, FIVE, {"a": 9, "b": 7, "c": 2, "d": 1}) == {"a", "b"}
    assert commit_waits_on(10, 10, FIVE, {"a": 10, "b": 7, "c": 2, "d": 1}) == {"b"}


def test_learners_are_not_counted():
    assert commit_waits_on(10, 10, THREE, {"a": 8, "b": 3, "learner": 9}) == {"a"}


def test_the_records_count_the_time_waited_on_each():
    wait = CommitWait(0)
    wait.observe(frozenset({WAL}), 0)
    wait.observe(frozenset({"a"}), 3000)  # the WAL wrote at 3 s; then follower a took 1 s
    wait.observe(frozenset(), 4000)
    assert wait.member.flow_share(4000) == 1.0 and waiting_state(wait.member, 4000) == "flow"
    assert wait.on[WAL].flow_share(4000) == 0.75 and wait.on["a"].flow_share(4000) == 0.25
    assert waiting_state(wait.on["a"], 4000) == "running"
    wait.observe(frozenset(), 9000)  # nothing changes: no new record
    assert wait.member.flow_share(9000) < 0.5
