"""The pure parts of quorum replica management (actors/node/quorum_membership.py) and a member's
change table (actors/quorum/member_changes.py), with exact answers."""
from __future__ import annotations

from actors.messages.calls import Reply
from actors.messages.quorum import ChangeQueueMembers, NotQueueLeader
from actors.node.quorum_membership import matching, minimum_quorum, plan_rebalance
from actors.quorum.member_changes import DEADLINE_MS, MemberChanges
from metadata.records import QueueRecord


def qq(name: str, *members: str, vhost: str = "/") -> QueueRecord:
    return QueueRecord(vhost, name, True, None, False, {"x-queue-type": "quorum"}, home=f"quorum!{name}",
                       members=members)


def test_minimum_quorum_is_rabbitmqs_running_at_most_quorum() -> None:
    queues = [qq("three", "a", "b", "c"), qq("two", "a", "b"), qq("elsewhere", "b", "c"), qq("five", *"abcde")]
    assert [r.name for r in minimum_quorum(queues, "a", set())] == ["two"]
    assert [r.name for r in minimum_quorum(queues, "a", {"c"})] == ["three", "two"]
    assert [r.name for r in minimum_quorum(queues, "a", {"d", "e"})] == ["five", "two"]


def test_matching_takes_quorum_queues_by_pattern_search() -> None:
    classic = QueueRecord("/", "orders.c", True, None, False, {}, home="n1:queue0")
    queues = [qq("orders.1", "a"), qq("orders.2", "a", vhost="prod"), qq("billing", "a"), classic]
    assert [r.name for r in matching(queues, queue_pattern="^orders")] == ["orders.1", "orders.2"]
    assert [r.name for r in matching(queues, vhost_pattern="prod")] == ["orders.2"]


def test_rebalance_moves_leaders_to_the_least_loaded_members() -> None:
    members = {u: ("a", "b", "c") for u in "uvwxyz"}
    moves = plan_rebalance({u: "a" for u in "uvwxyz"}, members, {"a", "b", "c"})
    assert moves == [("u", "b"), ("v", "c"), ("w", "b"), ("x", "c")]
    assert plan_rebalance({"u": "a", "v": "b", "w": "c"}, members, {"a", "b", "c"}) == []
    assert plan_rebalance({"u": "a", "v": "a"}, {"u": ("a", "b"), "v": ("a", "b")}, {"a"}) == []  # b is down


def test_a_change_is_answered_once_committed_held_while_another_runs_and_timed_out() -> None:
    changes = MemberChanges()
    msg = ChangeQueueMembers(7, "n3:quorum/qq:u", True)
    corr = changes.ask("node", msg, now_ms=1000)
    assert changes.refused(corr, "change_in_progress") == []
    assert changes.retries() == [(corr, msg)] and changes.retries() == []
    assert changes.committed(corr) == [("node", Reply(7))]
    assert changes.committed(corr) == []  # answered once
    corr = changes.ask("node", msg, now_ms=1000)
    assert changes.refused(corr, "no_change") == [("node", Reply(7))]
    corr = changes.ask("node", msg, now_ms=1000)
    assert changes.not_leader(corr, "n2:quorum/qq:u", 4) == [("node", NotQueueLeader("n2:quorum/qq:u", 4, msg))]
    changes.ask("node", msg, now_ms=1000)
    assert changes.expire(1000 + DEADLINE_MS - 1) == []
    [(to, reply)] = changes.expire(1000 + DEADLINE_MS)
    assert to == "node" and reply.rid == 7 and not reply.ok and not changes.pending
