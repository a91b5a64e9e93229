"""Stream membership (actors/node/stream_membership.py): the pure decisions, table-driven with
RabbitMQ 3.10's answers (probed on a three-node 3.10.8 cluster: rabbitmq-streams add_replica /
delete_replica), the record's change (SetStreamReplicas), and the node's operations as exact
effects: commit first, then the old members take the list, then the new member starts or the
removed one is disposed of, and forget_cluster_node's removal of a forgotten node's members."""
from __future__ import annotations

import random

import pytest

from actors.messages.calls import Reply
from actors.messages.node import CreateQueue, Dispose, StreamMembers, Sync
from actors.node.stream_membership import (LAST_MEMBER, NODE_NOT_RUNNING, NOT_FOUND, plan_add, plan_delete,
                                          plan_forget)
from actors.placement import host_of, queue_address, queue_manager, route_host
from effects import AnswerAdmin, Send
from metadata.admin_errors import AdminError
from metadata.changes import StreamReplicasSet
from metadata.commands import PutQueue, SetStreamReplicas
from metadata.records import QueueRecord
from metadata.registry import Registry
from tests.actors.test_node_core import ME, OTHER, node, sends

THIRD = "n3@box"
STREAM = {"x-queue-type": "stream"}
RUNNING = {"a", "b", "c"}


def rec(*replicas: str, args: dict | None = None, home: str = "a:queue0", members: tuple[str, ...] = ()) -> QueueRecord:
    return QueueRecord("/", "s", True, None, False, STREAM if args is None else args, home=home,
                       replicas=replicas, members=members)


CLASSIC = rec(args={})
QUORUM = rec(args={"x-queue-type": "quorum"}, home="quorum!u1", members=("a", "b"))

ADD_CASES = [
    # (record, node) -> the new member list, None (nothing to change) or RabbitMQ 3.10's refusal
    ((None, "b"), NOT_FOUND),
    ((QUORUM, "c"), AdminError("Cannot add replicas to a quorum queue")),
    ((CLASSIC, "c"), AdminError("Cannot add replicas to a classic queue")),
    ((rec("a", "b"), "rabbit@nowhere"), NODE_NOT_RUNNING),  # not in the cluster, or not running
    ((rec("a", "b"), "b"), None),  # already a member: ok, nothing changes
    ((rec("a", "b"), "c"), ("a", "b", "c")),  # new members go last
    ((rec("b"), "a"), ("b", "a")),
    ((rec(), "b"), ("a", "b")),  # declared on one node: its home's node is its member
]

DELETE_CASES = [
    ((None, "b"), NOT_FOUND),
    ((QUORUM, "a"), AdminError("Cannot delete replicas from a quorum queue")),
    ((CLASSIC, "a"), AdminError("Cannot delete replicas from a classic queue")),
    ((rec("a", "b"), "rabbit@nowhere"), NODE_NOT_RUNNING),
    ((rec("a"), "a"), LAST_MEMBER),
    ((rec("a"), "b"), LAST_MEMBER),  # 3.10 refuses the last member before it looks for the node
    ((rec(), "a"), LAST_MEMBER),
    ((rec("a", "b"), "c"), None),  # not a member: ok, nothing changes
    ((rec("a", "b", "c"), "a"), ("b", "c")),  # the declared leader's member too
    ((rec("a", "b"), "b"), ("a",)),
]


@pytest.mark.parametrize("case, expected", ADD_CASES)
def test_plan_add(case, expected) -> None:
    assert plan_add(*case, RUNNING) == expected


@pytest.mark.parametrize("case, expected", DELETE_CASES)
def test_plan_delete(case, expected) -> None:
    assert plan_delete(*case, RUNNING) == expected


def test_a_node_that_is_down_is_refused_for_add_and_delete() -> None:
    assert plan_add(rec("a", "b"), "c", {"a", "b"}) == NODE_NOT_RUNNING
    assert plan_delete(rec("a", "b", "c"), "c", {"a", "b"}) == NODE_NOT_RUNNING


def test_refusals_exit_69_as_rabbitmq_streams_does() -> None:
    assert {e.exit_code for e in (NOT_FOUND, NODE_NOT_RUNNING, LAST_MEMBER)} == {69}
    assert plan_add(QUORUM, "c", RUNNING).exit_code == 69


# ---------------------------------------------------------------- the record
def test_the_record_follows_and_another_incarnation_is_left_alone() -> None:
    reg = Registry(random.Random(1))
    reg.apply_command(PutQueue("/", "s", True, False, False, STREAM, home="a:queue0", replicas=("a", "b")))
    new, changes = reg.apply_command(SetStreamReplicas("/", "s", "a:queue0", ("a", "b", "c")))
    assert changes == [StreamReplicasSet("/", "s", ("a", "b", "c"))] and new.replicas == ("a", "b", "c")
    copy = Registry(random.Random(2))
    copy.apply(reg.snapshot())
    assert copy.queue("/", "s").replicas == ("a", "b", "c")
    assert reg.apply_command(SetStreamReplicas("/", "s", "b:queue0", ("a",))) == (None, [])  # not that one
    assert reg.apply_command(SetStreamReplicas("/", "s", "a:queue0", ())) == (None, [])
    assert reg.apply_command(SetStreamReplicas("/", "s", "a:queue0", ("a", "b", "c")))[1] == []  # no change
    reg.apply_command(PutQueue("/", "c", True, False, False, {}, home="a:queue0"))
    assert reg.apply_command(SetStreamReplicas("/", "c", "a:queue0", ("a",))) == (None, [])  # not a stream


def test_a_channel_on_a_node_without_a_member_routes_to_the_first_member() -> None:
    assert route_host("a:queue0", ("b", "c"), "a") == "b:queue0"  # a's member was deleted
    assert route_host("a:queue0", ("b", "c"), "c") == "c:queue0"
    assert route_host("a:queue0", (), "b") == "a:queue0"


# ---------------------------------------------------------------- the operations, exact effects
def declared(*replicas: str) -> tuple:
    c, g = node()
    c.nodes([ME, OTHER, THIRD], [])
    c.registry.apply_command(PutQueue("/", "s", True, False, False, STREAM, home=f"{ME}:queue0", replicas=replicas))
    return c, g


def test_add_replica_commits_then_tells_the_members_then_starts_the_new_one() -> None:
    c, g = declared(ME, OTHER)
    tells = sends(g.run(c.admin("a", "add_replica", {"name": "s", "node": THIRD})), StreamMembers)
    assert c.registry.queue("/", "s").replicas == (ME, OTHER, THIRD)  # committed before anyone hears
    assert [(t.to, type(t.msg)) for t in tells] == [
        (queue_address(host_of(n, "queue0"), "/", "s"), StreamMembers) for n in (ME, OTHER)]
    assert {tuple(t.msg.members) for t in tells} == {(ME, OTHER, THIRD)}
    assert g.receive(tells[0].to, Reply(tells[0].msg.rid)) == []  # every member first
    [start] = g.receive(tells[1].to, Reply(tells[1].msg.rid))
    assert start.to == queue_manager(host_of(THIRD, "queue0")) and type(start.msg) is CreateQueue
    assert tuple(start.msg.members) == (ME, OTHER, THIRD)
    [sync] = sends(g.receive(start.to, Reply(start.msg.rid)), Sync)
    assert g.receive(sync.to, Reply(sync.msg.rid)) == [AnswerAdmin("a", {"ok": True})]


def test_delete_replica_commits_then_tells_every_old_member_then_disposes_of_the_removed_one() -> None:
    c, g = declared(ME, OTHER, THIRD)
    tells = sends(g.run(c.admin("a", "delete_replica", {"name": "s", "node": ME})), StreamMembers)  # ME leads
    assert c.registry.queue("/", "s").replicas == (OTHER, THIRD)
    assert len(tells) == 3 and {tuple(t.msg.members) for t in tells} == {(OTHER, THIRD)}  # ME's steps down
    for t in tells[:-1]:
        g.receive(t.to, Reply(t.msg.rid))
    [dispose] = g.receive(tells[-1].to, Reply(tells[-1].msg.rid))
    assert dispose.to == queue_address(host_of(ME, "queue0"), "/", "s") and type(dispose.msg) is Dispose


def test_no_change_answers_ok_at_once_and_refusals_answer_rabbitmqs_text() -> None:
    c, g = declared(ME, OTHER)
    out = g.run(c.admin("a", "add_replica", {"name": "s", "node": OTHER}))
    [sync] = sends(out, Sync)
    assert g.receive(sync.to, Reply(sync.msg.rid)) == [AnswerAdmin("a", {"ok": True})]
    assert g.run(c.admin("b", "delete_replica", {"name": "s", "node": "rabbit@nowhere"})) == [
        AnswerAdmin("b", {"error": "node_not_running", "exit": 69})]
    assert g.run(c.admin("c", "add_replica", {"vhost": "nope", "name": "s", "node": THIRD})) == [
        AnswerAdmin("c", {"error": "not_found", "exit": 69})]  # a missing vhost too, as 3.10 answers


# ---------------------------------------------------------------- forget_cluster_node
def test_plan_forget_is_the_coordinators_check_alone() -> None:
    """3.13's delete_all_replicas asks the coordinator directly: a node not running is no refusal."""
    assert plan_forget(rec("a", "b", "c"), "c") == ("a", "b")
    assert plan_forget(rec("c"), "c") == LAST_MEMBER
    assert plan_forget(rec("a", "b"), "c") is None


def test_forgetting_a_node_removes_its_member_of_every_stream_through_the_members_left() -> None:
    """The stream declared on the forgotten node stays (its home names that node) and, like the
    one merely replicated there, takes the list without it; nothing is asked of the gone node.
    One stream at a time, as the change add and delete take."""
    c, g = node()
    g.run(c.nodes([ME, OTHER, THIRD], []))
    c.registry.apply_command(PutQueue("/", "s", True, False, False, STREAM, home=f"{THIRD}:queue0",
                                      replicas=(THIRD, ME, OTHER)))
    c.registry.apply_command(PutQueue("/", "t", True, False, False, STREAM, home=f"{ME}:queue0", replicas=(ME, THIRD)))
    c.registry.apply_command(PutQueue("/", "u", True, False, False, STREAM, home=f"{ME}:queue0", replicas=(ME, OTHER)))
    g.run(c.nodes([ME, OTHER], [THIRD]))  # stopped, then forgotten
    tells = sends(g.run(c.admin("f", "forget_node_queues", {"node": THIRD})), StreamMembers)
    assert [(t.to, tuple(t.msg.members)) for t in tells] == [
        (queue_address(host_of(n, "queue0"), "/", "s"), (ME, OTHER)) for n in (ME, OTHER)]
    assert c.registry.queue("/", "t").replicas == (ME, THIRD)  # not yet: s's members answer first
    g.receive(tells[0].to, Reply(tells[0].msg.rid))
    [tell] = sends(g.receive(tells[1].to, Reply(tells[1].msg.rid)), StreamMembers)
    assert tell.to == queue_address(host_of(ME, "queue0"), "/", "t") and tuple(tell.msg.members) == (ME,)
    out = g.receive(tell.to, Reply(tell.msg.rid))
    assert not [e for e in out if type(e) is Send and (type(e.msg) is Dispose or e.to.host.startswith(THIRD))]
    [sync] = sends(out, Sync)
    assert g.receive(sync.to, Reply(sync.msg.rid)) == [AnswerAdmin("f", {"ok": True})]
    assert [c.registry.queue("/", n).replicas for n in "stu"] == [(ME, OTHER), (ME,), (ME, OTHER)]


def test_forgetting_a_streams_last_member_fails_naming_streams_as_rabbitmqctl_does_and_keeps_it() -> None:
    """3.13's error names every kind that failed, streams first."""
    c, g = node()
    g.run(c.nodes([ME, OTHER], []))
    g.run(c.nodes([ME], []))  # OTHER forgotten before the command ran
    c.registry.apply_command(PutQueue("/", "s", True, False, False, STREAM, home=f"{OTHER}:queue0",
                                      replicas=(OTHER,)))
    c.registry.apply_command(PutQueue("/", "q", True, False, False, {"x-queue-type": "quorum"}, home="quorum!u1",
                                      members=(OTHER,)))
    out = g.run(c.admin("f", "forget_node_queues", {"node": OTHER}))
    error = f"Failed to shrink some entities on node {OTHER} : Streams, Quorum queues"
    assert [e for e in out if type(e) is AnswerAdmin] == [AnswerAdmin("f", {"error": error, "exit": 69})]
    assert c.registry.queue("/", "s").replicas == (OTHER,)
