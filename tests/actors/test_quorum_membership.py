"""Quorum replica management (actors/node/quorum_membership.py): its pure parts, a member's change
table (actors/quorum/member_changes.py), and the node's add/delete operations as exact effects."""
from __future__ import annotations

from actors.messages.calls import Reply
from actors.messages.node import Sync
from actors.messages.quorum import ChangeQueueMembers, NotQueueLeader, StartMember
from actors.node import quorum_queues as qqueues
from actors.node.quorum_membership import matching, minimum_quorum, plan_rebalance
from actors.quorum.member_changes import DEADLINE_MS, MemberChanges
from actors.quorum.names import member_id
from actors.runtime.address import Address
from effects import AnswerAdmin, ProposeCommand, Send
from metadata.commands import PutQueue, SetQueueMembers
from metadata.records import QueueRecord
from tests.actors.test_node_core import ME, OTHER, node, sends

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


# ---------------------------------------------------------------- the node's operation, exact effects
THIRD = "n3@box"
ARGS = {"x-queue-type": "quorum"}


def test_add_member_starts_it_asks_the_leader_follows_a_redirect_then_records_it() -> None:
    c, g = node()
    c.nodes([ME, OTHER, THIRD], [])
    c.registry.apply_command(PutQueue("/", "q", True, False, False, ARGS, home="quorum!u1", members=(ME, OTHER),
                                      created_ms=5))
    [start] = g.run(c.admin("a", "add_member", {"name": "q", "node": THIRD}))
    assert start == Send(qqueues.manager(THIRD), StartMember(start.msg.rid, "u1", "/", "q", [ME, OTHER], ARGS, 5, ME))
    [ask] = g.receive(start.to, Reply(start.msg.rid))
    assert ask == Send(Address.parse(member_id(ME, "u1")), ChangeQueueMembers(ask.msg.rid, member_id(THIRD, "u1"), True))
    [again] = g.receive(ask.to, NotQueueLeader(member_id(OTHER, "u1"), 3, ask.msg))
    assert again == Send(Address.parse(member_id(OTHER, "u1")), ask.msg)
    out = g.run(c.receive(again.to, Reply(ask.msg.rid)))
    assert c.registry.queue("/", "q").members == (ME, OTHER, THIRD)
    [sync] = sends(out, Sync)
    assert g.receive(sync.to, Reply(sync.msg.rid)) == [AnswerAdmin("a", {"ok": True})]


def test_delete_member_refuses_the_last_and_records_before_deleting_files() -> None:
    c, g = node()
    c.nodes([ME, OTHER], [])
    c.registry.apply_command(PutQueue("/", "one", True, False, False, ARGS, home="quorum!u2", members=(OTHER,)))
    assert g.run(c.admin("a", "delete_member", {"name": "one", "node": OTHER})) == [
        AnswerAdmin("a", {"error": "last_node", "exit": 69})]
    c.registry.apply_command(PutQueue("/", "q", True, False, False, ARGS, home="quorum!u1", members=(ME, OTHER)))
    [ask] = g.run(c.admin("b", "delete_member", {"name": "q", "node": OTHER}))
    assert ask.msg == ChangeQueueMembers(ask.msg.rid, member_id(OTHER, "u1"), False)
    g.hold = True
    g.run(c.receive(ask.to, Reply(ask.msg.rid)))
    [proposal] = g.held
    assert proposal.command == SetQueueMembers("/", "q", "quorum!u1", (ME,))
    out = g.apply(proposal)
    [delete] = [e for e in out if type(e) is Send and type(e.msg).__name__ == "DeleteMember"]
    assert delete.to == qqueues.manager(OTHER) and c.registry.queue("/", "q").members == (ME,)
    assert not [e for e in out if type(e) is ProposeCommand]
