"""Quorum replica management (actors/node/quorum_membership.py): its pure parts, a member's change
table (actors/quorum/member_changes.py), and the node's add/delete operations as exact effects."""
from __future__ import annotations

from collections import Counter

import pytest

from actors.messages.calls import Reply
from actors.messages.node import ApplyPolicy, DeclareQueue, QueueCounts, QueueDeclared, QueueStats, Sync
from actors.messages.quorum import ChangeQueueMembers, DeleteMember, MemberStatus, NotQueueLeader, StartMember
from actors.node.core import NodeCore, Startup
from actors.node import quorum_queues as qqueues
from actors.node.quorum_queues import Declaring
from actors.node.quorum_membership import (CMR_TIMER, Reconciliation, grow_onto, matching, minimum_quorum,
                                           plan_rebalance, target_size)
from actors.quorum.member_changes import DEADLINE_MS, MemberChanges
from actors.quorum.names import member_id
from actors.runtime.address import Address
from effects import AnswerAdmin, ProposeCommand, Send, StartTimer
from metadata.commands import PutQueue, RemoveQueue, SetPolicy, SetQueueMembers
from metadata.records import QueueRecord
from metadata.registry import Registry
from tests.actors.test_node_core import CHANNEL, ME, OTHER, Group, node, sends

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


def test_a_member_node_deletes_its_member_when_it_applies_a_deletion_made_elsewhere() -> None:
    """A node holding a member starts it when it applies the record (a start it missed is not a
    no-op), and that StartMember may reach its quorum host after the deleting node's DeleteMember
    (another sender, another link): its own DeleteMember, sent in apply order, is then the last word."""
    c, g = node()
    c.nodes([ME, OTHER], [])
    put = PutQueue("/", "q", True, False, False, ARGS, home="quorum!u1", members=(OTHER, ME), created_ms=5)
    result, changes = c.registry.apply_command(put)
    [start] = sends(g.run(c.applied(OTHER, (9, 1), put, result, changes)), StartMember)
    remove = RemoveQueue("/", "q")
    result, changes = c.registry.apply_command(remove)
    out = g.run(c.applied(OTHER, (9, 2), remove, result, changes))
    assert sends(out, DeleteMember) == [Send(start.to, DeleteMember(0, "u1"))]
    elsewhere = PutQueue("/", "r", True, False, False, ARGS, home="quorum!u2", members=(OTHER, THIRD))
    c.registry.apply_command(elsewhere)
    result, changes = c.registry.apply_command(RemoveQueue("/", "r"))
    assert not sends(g.run(c.applied(OTHER, (9, 4), RemoveQueue("/", "r"), result, changes)), DeleteMember)


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


def test_a_new_queues_followers_start_together_then_its_leader_then_the_leader_answers_its_counts() -> None:
    c, g = node()
    c.nodes([ME, OTHER, THIRD], [])
    out = g.receive(CHANNEL, DeclareQueue(1, "/", "q", False, True, False, False, ARGS, None))
    followers = [e for e in sends(out) if type(e.msg) is StartMember]
    assert sorted(e.to.host for e in followers) == sorted(qqueues.manager(n).host for n in (OTHER, THIRD))
    leader = c.registry.queue("/", "q").members[0]
    assert leader == ME  # client-local
    assert g.receive(followers[0].to, Reply(followers[0].msg.rid)) == []  # every follower first
    [start] = g.receive(followers[1].to, Reply(followers[1].msg.rid))
    assert start.to == qqueues.manager(ME) and start.msg.leader == ME
    [stats] = g.receive(start.to, Reply(start.msg.rid))  # answered once the member knows a leader
    assert type(stats.msg) is QueueStats and stats.to == Address.parse(member_id(ME, qqueues.uid_of(
        c.registry.queue("/", "q"))))
    out = g.receive(stats.to, Reply(stats.msg.rid, QueueCounts(0, 0)))
    assert sends(out)[-1] == Send(CHANNEL, Reply(1, QueueDeclared("q", 0, 0)))


def test_a_redirect_to_a_leader_on_a_down_node_asks_the_same_member_again_until_it_knows_better() -> None:
    """A follower still names the leader it knew, on a node since down (forget_cluster_node's
    shrink right after the stop): sent there, the call would never be answered."""
    c, g = node()
    c.nodes([ME, OTHER], [THIRD])
    c.registry.apply_command(PutQueue("/", "q", True, False, False, ARGS, home="quorum!u1",
                                      members=(ME, OTHER, THIRD), created_ms=5))
    [ask] = g.run(c.admin("a", "delete_member", {"name": "q", "node": THIRD}))
    assert ask.to == Address.parse(member_id(ME, "u1"))
    assert g.receive(ask.to, NotQueueLeader(member_id(THIRD, "u1"), 1, ask.msg)) == [
        StartTimer(f"leader-retry:{ask.msg.rid}", qqueues.RETRY_MS)]
    [again] = g.run(c.timer(f"leader-retry:{ask.msg.rid}"))
    assert again == Send(ask.to, ask.msg)  # by now it leads, or names the new leader
    g.hold = True
    g.run(c.receive(again.to, Reply(ask.msg.rid)))
    [proposal] = g.held
    assert proposal.command == SetQueueMembers("/", "q", "quorum!u1", (ME, OTHER))


def test_a_membership_change_waits_through_an_election_longer_than_the_metadata_time_out() -> None:
    """forget_cluster_node right after the stop of the node whose member led: the members left
    elect for a while (seconds on a loaded machine), answering NotQueueLeader with no leader. The
    change waits through that on its own time-out, not the node's metadata time-out (500 ms here,
    3 s in the fault tests, where the shrink gave up and kept the forgotten member)."""
    c, g = node()
    c.nodes([ME, OTHER], [THIRD])
    c.registry.apply_command(PutQueue("/", "q", True, False, False, ARGS, home="quorum!u1",
                                      members=(ME, OTHER, THIRD), created_ms=5))
    [ask] = g.run(c.admin("a", "delete_member", {"name": "q", "node": THIRD}))
    electing_ms = 4 * c.timeout_ms
    for _ in range(electing_ms // qqueues.RETRY_MS):
        assert g.receive(ask.to, NotQueueLeader(None, 2, ask.msg)) == [
            StartTimer(f"leader-retry:{ask.msg.rid}", qqueues.RETRY_MS)]
        assert g.run(c.timer(f"leader-retry:{ask.msg.rid}")) == [Send(ask.to, ask.msg)]
    g.hold = True
    g.run(c.receive(ask.to, Reply(ask.msg.rid)))  # it leads now, and the change committed
    [proposal] = g.held
    assert proposal.command == SetQueueMembers("/", "q", "quorum!u1", (ME, OTHER))


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


# ---------------------------------------------------------------- continuous membership reconciliation
@pytest.mark.parametrize("configured, argument, policy, target", [
    (None, None, None, 0),      # none anywhere: no growth
    (3, None, None, 3),
    (None, 5, None, 5),
    (None, None, 4, 4),
    (3, 5, 4, 5),               # the largest of the three (get_target_size/2)
    (7, 5, 4, 7),
    (None, 2, 4, 4),            # a policy raises the argument's target, never lowers it
    (None, "3", 0, 0),          # not a positive integer: as if unset
])
def test_the_target_size_is_the_largest_of_configuration_argument_and_policy(configured, argument, policy, target):
    rec = qq("q", "a") if argument is None else QueueRecord(
        "/", "q", True, None, False, {"x-queue-type": "quorum", "x-quorum-target-group-size": argument},
        home="quorum!q", members=("a",))
    assert target_size(rec, configured, policy) == target


@pytest.mark.parametrize("members, target, up, grows_onto", [
    ("a", 3, "abc", "b"),       # 1 -> 2: odd, two nodes free
    ("a", 3, "ab", None),       # odd with one node free: never to an even size
    ("ab", 3, "abc", "c"),      # even: grows
    ("ab", 2, "abc", None),     # at its target
    ("abc", 5, "abcde", "d"),
    ("abc", 4, "abcd", None),   # odd, one free node
    ("ab", 3, "bc", None),      # a member is not running
    ("a", 3, "a", None),        # nowhere to grow
])
def test_a_queue_grows_one_member_at_a_time_to_odd_sizes_when_its_members_run(members, target, up, grows_onto):
    assert grow_onto(qq("q", *members), target, set(up), Counter()) == grows_onto


def test_growth_goes_to_the_node_holding_the_fewest_members() -> None:
    assert grow_onto(qq("q", "a"), 3, {"a", "b", "c"}, Counter({"b": 4, "c": 1})) == "c"


CMR = Reconciliation(enabled=True, target_group_size=None, interval_ms=60_000, trigger_interval_ms=100)


def cmr_node() -> tuple[NodeCore, Group]:
    c = NodeCore(Registry(), ME, ("queue0", "queue1"), salt=lambda n: b"s" * n, incarnation=1, timeout_ms=500, reconciliation=CMR)
    g = Group(c)
    g.run(c.start(Startup(bootstrap=True)))
    g.run(c.nodes([ME, OTHER, THIRD], []))
    return c, g


def rounds(effects: list) -> list[int]:
    """When the next rounds of reconciliation were asked for (ms)."""
    return [e.ticks for e in effects if type(e) is StartTimer and e.name == CMR_TIMER]


def leads(uid: str) -> dict:
    return {uid: {"role": "leader", "term": 1}}


def test_a_target_group_size_policy_triggers_a_round_that_grows_the_queue_one_member_per_round() -> None:
    c, g = cmr_node()
    c.registry.apply_command(PutQueue("/", "q", True, False, False, ARGS, home="quorum!u1", members=(ME,)))
    out = g.run(c.admin("p", "set_policy", {"vhost": "/", "name": "grow", "pattern": "^q$",
                                            "definition": {"target-group-size": 3}, "apply_to": "quorum_queues"}))
    assert rounds(out) == [100]  # a policy change: a round after the trigger interval
    [status] = g.run(c.timer(CMR_TIMER))
    assert status == Send(qqueues.manager(ME), MemberStatus(status.msg.rid, ""))
    [start] = g.receive(status.to, Reply(status.msg.rid, leads("u1")))
    assert type(start.msg) is StartMember and start.to == qqueues.manager(OTHER)  # n2 sorts before n3
    [ask] = g.receive(start.to, Reply(start.msg.rid))
    assert ask.msg == ChangeQueueMembers(ask.msg.rid, member_id(OTHER, "u1"), True)
    out = g.receive(ask.to, Reply(ask.msg.rid))
    assert c.registry.queue("/", "q").members == (ME, OTHER)
    assert rounds(out) == [100]  # it changed something: the next round soon
    [status] = g.run(c.timer(CMR_TIMER))
    [start] = g.receive(status.to, Reply(status.msg.rid, leads("u1")))
    assert start.to == qqueues.manager(THIRD)
    [ask] = g.receive(start.to, Reply(start.msg.rid))
    g.receive(ask.to, Reply(ask.msg.rid))
    assert c.registry.queue("/", "q").members == (ME, OTHER, THIRD)
    [status] = g.run(c.timer(CMR_TIMER))
    assert g.receive(status.to, Reply(status.msg.rid, leads("u1"))) == [StartTimer(CMR_TIMER, 60_000)]  # at target


def test_a_round_only_grows_queues_led_here_and_a_trigger_during_a_round_is_kept() -> None:
    c, g = cmr_node()
    c.registry.apply_command(PutQueue("/", "q", True, False, False, {**ARGS, "x-quorum-target-group-size": 3},
                                      home="quorum!u1", members=(ME,)))
    [status] = g.run(c.timer(CMR_TIMER))
    assert rounds(g.run(c.nodes([ME, OTHER], [THIRD]))) == [100]  # n3 went down: a trigger
    out = g.receive(status.to, Reply(status.msg.rid, {"u1": {"role": "follower", "term": 1}}))
    assert rounds(out) == [100]  # nothing to do here, but the trigger's round still comes soon
    assert c.registry.queue("/", "q").members == (ME,)


def test_auto_remove_drops_members_on_forgotten_nodes_before_growing() -> None:
    c = NodeCore(Registry(), ME, ("queue0", "queue1"), salt=lambda n: b"s" * n, incarnation=1, timeout_ms=500,
                 reconciliation=Reconciliation(enabled=True, auto_remove=True, target_group_size=3,
                                               trigger_interval_ms=100))
    g = Group(c)
    g.run(c.start(Startup(bootstrap=True)))
    g.run(c.nodes([ME, OTHER], []))  # THIRD is no longer in the cluster
    c.registry.apply_command(PutQueue("/", "q", True, False, False, ARGS, home="quorum!u1",
                                      members=(ME, OTHER, THIRD)))
    [status] = g.run(c.timer(CMR_TIMER))
    [ask] = g.receive(status.to, Reply(status.msg.rid, leads("u1")))
    assert ask.msg == ChangeQueueMembers(ask.msg.rid, member_id(THIRD, "u1"), False)
    out = g.receive(ask.to, Reply(ask.msg.rid))
    assert c.registry.queue("/", "q").members == (ME, OTHER)
    assert not sends(out, StartMember) and rounds(out) == [100]


# ---------------------------------------------------------------- forget_cluster_node
def test_forgetting_a_node_removes_its_member_of_every_quorum_queue_through_a_live_member() -> None:
    """rabbit_quorum_queue:shrink_all/1 after forget_cluster_node. The node last saw the forgotten
    node's member lead: the change goes to a member on a node that is up (it redirects to the
    leader it knows), never to the forgotten node, whose files are not asked for either."""
    c, g = node()
    g.run(c.nodes([ME, OTHER, THIRD], []))
    c.registry.apply_command(PutQueue("/", "q", True, False, False, ARGS, home="quorum!u1",
                                      members=(THIRD, ME, OTHER)))
    c.leaders.saw(member_id(THIRD, "u1"))
    g.run(c.nodes([ME, OTHER], [THIRD]))  # stopped, then forgotten: the shell removed it from the group
    [ask] = sends(g.run(c.admin("f", "forget_node_queues", {"node": THIRD})), ChangeQueueMembers)
    assert ask == Send(Address.parse(member_id(ME, "u1")),
                       ChangeQueueMembers(ask.msg.rid, member_id(THIRD, "u1"), False))
    out = g.receive(ask.to, Reply(ask.msg.rid))
    assert c.registry.queue("/", "q").members == (ME, OTHER)
    assert not [e for e in out if type(e) is Send and type(e.msg).__name__ == "DeleteMember"]
    [sync] = sends(out, Sync)
    assert g.receive(sync.to, Reply(sync.msg.rid)) == [AnswerAdmin("f", {"ok": True})]


def test_forgetting_the_last_member_of_a_queue_fails_as_rabbitmqctl_says_and_keeps_it() -> None:
    c, g = node()
    g.run(c.nodes([ME, OTHER], []))  # OTHER named once, not any more: forgotten before the command ran
    g.run(c.nodes([ME], []))
    c.registry.apply_command(PutQueue("/", "one", True, False, False, ARGS, home="quorum!u2", members=(OTHER,)))
    out = g.run(c.admin("f", "forget_node_queues", {"node": OTHER}))
    error = f"Failed to shrink some entities on node {OTHER} : Quorum queues"
    assert [e for e in out if type(e) is AnswerAdmin] == [AnswerAdmin("f", {"error": error, "exit": 69})]
    assert c.registry.queue("/", "one").members == (OTHER,)


def test_a_new_quorum_queue_gets_no_member_on_a_forgotten_node() -> None:
    c, g = node()
    g.run(c.nodes([ME, OTHER, THIRD], []))
    g.run(c.nodes([ME, OTHER], []))  # THIRD forgotten
    g.hold = True
    g.receive(CHANNEL, DeclareQueue(7, "/", "q", False, True, False, False, ARGS, None))
    [put] = g.held
    assert sorted(put.command.members) == [ME, OTHER]


# ---------------------------------------------------------------- declaring: leader locator, equivalence
def declared_members(c: NodeCore, g: Group, arguments: dict) -> tuple[str, ...]:
    """The members (leader first) the node places a new quorum queue `q` on: what it proposes
    (the proposal then times out, so the next declaration has its turn)."""
    g.hold = True
    out = g.receive(CHANNEL, DeclareQueue(7, "/", "q", False, True, False, False, arguments, None))
    put = g.held.pop()
    g.hold = False
    [timer] = [e for e in out if type(e) is StartTimer and e.name.startswith("propose")]
    g.run(c.timer(timer.name))
    return put.command.members


def placing_node(**declaring) -> tuple[NodeCore, Group]:
    c = NodeCore(Registry(), ME, ("queue0", "queue1"), salt=lambda n: b"\xff" * n, incarnation=1, timeout_ms=500,
                 declaring=Declaring(**declaring))
    g = Group(c)
    g.run(c.start(Startup(bootstrap=True)))
    g.run(c.nodes([ME, OTHER, THIRD], []))
    c.registry.apply_command(PutQueue("/", "led-here", True, False, False, ARGS, home="quorum!u0", members=(ME,)))
    return c, g


def test_the_leader_locator_comes_from_the_policy_then_the_argument_then_the_configuration() -> None:
    """rabbit_queue_location:leader_locator/1 (4.0). balanced: the member leading the fewest queues
    (n1 leads one already); client-local: the declaring node."""
    c, g = placing_node()
    assert declared_members(c, g, ARGS)[0] == ME
    assert declared_members(c, g, {**ARGS, "x-queue-leader-locator": "balanced"})[0] == OTHER
    c.registry.set_policy("/", "loc", "^q$", {"queue-leader-locator": "balanced"}, apply_to="quorum_queues")
    assert declared_members(c, g, {**ARGS, "x-queue-leader-locator": "client-local"})[0] == OTHER  # the policy's
    c, g = placing_node(leader_locator="balanced")
    assert declared_members(c, g, ARGS)[0] == OTHER
    assert declared_members(c, g, {**ARGS, "x-queue-leader-locator": "client-local"})[0] == ME


def test_balanced_placement_goes_random_above_1000_queues_of_any_type() -> None:
    """rabbit_amqqueue:count/0 counts every queue: 1,000 classic ones make the choice random (this
    salt makes the random choice the last candidate, n3)."""
    c, g = placing_node(leader_locator="balanced")
    for i in range(999):
        c.registry.apply_command(PutQueue("/", f"c{i}", True, home=f"{ME}:queue0"))
    assert declared_members(c, g, ARGS)[0] == THIRD


def test_relaxed_checks_compare_a_classic_redeclaration_of_a_quorum_queue_on_seven_arguments_only() -> None:
    for relaxed, answer in ((False, 406), (True, None)):
        c, g = placing_node(relaxed_checks=relaxed)
        c.registry.apply_command(PutQueue("/", "q", True, False, False, {**ARGS, "x-max-length": 5},
                                          home="quorum!u1", members=(ME,)))
        out = g.receive(CHANNEL, DeclareQueue(8, "/", "q", False, True, False, False,
                                              {"x-queue-type": "classic", "x-max-length": 5}, None))
        if answer is None:  # equivalent: the node asks the queue for its counts, for declare-ok
            assert sends(out, QueueStats) and not sends(out, Reply)
        else:
            [reply] = sends(out, Reply)
            assert reply.msg.error.code == answer


# ---------------------------------------------------------------- policies reach quorum queues
def test_a_policy_change_reaches_a_quorum_queue_from_the_node_it_went_through() -> None:
    """rabbit_policy's policy_changed runs on the node the policy was set through: here n1, which
    is not the node of the queue's first member (n2, down, say). A change through another node is
    told by that node; n1 remembers it, so that clearing the policy through n1 tells the queue."""
    c, g = node()
    g.run(c.nodes([ME, OTHER], []))
    c.registry.apply_command(PutQueue("/", "q", True, False, False, ARGS, home="quorum!u1",
                                      members=(OTHER, ME)))
    out = g.run(c.admin("p", "set_policy", {"vhost": "/", "name": "lim", "pattern": "^q$",
                                            "definition": {"max-length": 5}, "apply_to": "quorum_queues"}))
    assert sends(out, ApplyPolicy) == [Send(qqueues.member(OTHER, c.registry.queue("/", "q")),
                                            ApplyPolicy({"max-length": 5}))]
    elsewhere = SetPolicy("/", "lim", "^q$", {"max-length": 7}, apply_to="quorum_queues")
    assert not sends(g.apply(ProposeCommand(("n2", 1), elsewhere), origin=OTHER), ApplyPolicy)  # n2 tells it
    out = g.run(c.admin("c", "clear_policy", {"vhost": "/", "name": "lim"}))
    assert [s.msg for s in sends(out, ApplyPolicy)] == [ApplyPolicy({})]
