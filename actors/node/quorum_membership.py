"""Quorum queue replica management, as `rabbitmq-queues` does it: `quorum_status`, `add_member`,
`delete_member`, `grow`, `shrink`, `rebalance quorum` and `check_if_node_is_quorum_critical`, as
NodeCore admin operations (actors/node/admin.py's table), and the reconciliation a node does when it starts
serving.

Theory of operation. A quorum queue's members are two facts kept in step: its Raft configuration
(held by its members' logs) and its metadata record's `members` (metadata/records.py). A change goes
through the queue's leader, one member at a time (raft/membership.py; the member holds a change
asked while another is uncommitted and answers once it commits, actors/quorum/member_changes.py),
and only then through the metadata (`SetQueueMembers`), so the record never names a member the
Raft group has not taken:
- add: start the new member on its node's quorum host with the current members as its
  configuration (it is not among them, so it never campaigns), ask the leader to add it (as a
  learner, promoted to voter once caught up), then record it. A refused add deletes the new member.
- delete: ask the leader to remove it (a leader that removes itself steps down once that commits),
  record it, then delete the member's files on its node (a node that is down deletes them when it
  serves again: `reconcile`).
Calls to the leader follow `NotQueueLeader` as every call to a quorum queue does (NodeCore's
`_redirected`). Everything an operation decides from (placement, plans, criticality) is in pure
functions below; the operations are generator steps of the core's serial order.

Reconciliation on serve: this node's quorum host gets `StartMember` for every queue whose record
names this node (a member missed while it was down at declare, say) and `KeepMembers` with those
queues, so a member of a queue deleted while this node was down goes.

Continuous membership reconciliation (RabbitMQ 4.0's CMR, off by default: `Reconciliation`;
rabbit_quorum_queue_periodic_membership_reconciliation): a round runs every `interval_ms`, or
`trigger_interval_ms` after a trigger or after a round that changed something (so a queue grows
one member per round, a round apart). 4.0's triggers: a node joining, leaving, coming up or going
down (rabbit_node_monitor tells the reconciliation of every node it sees come and go, whatever the
guide says of failures), a policy change, and a quorum queue declared through this node. In a
round each node looks at the queues whose member on it leads:
- with `auto_remove`, members on nodes no longer in the cluster go (never the last), and that
  queue grows no further this round;
- otherwise a queue below its target size (`target_size`: the largest of the configured
  target_group_size, x-quorum-target-group-size and the policies' target-group-size; none: no
  growth) gets ONE member, on a running node without one (the one holding the fewest members,
  where RabbitMQ picks at random), if an odd size is reachable (the size is even, or two nodes
  are free) and every other member is running (`grow_onto`).
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from actors.messages.quorum import (ChangeQueueMembers, KeepMembers, MemberStatus,
                                    TransferQueueLeader)
from actors.node import quorum_queues as qq
from actors.node.steps import Apply, Ask, AskAll, Op
from actors.quorum.member_changes import DEADLINE_MS
from actors.quorum.names import member_id
from effects import Effect, Send, StartTimer
from metadata.admin_errors import EX_SOFTWARE, EX_UNAVAILABLE, AdminError, named_queue
from metadata.commands import SetQueueMembers
from metadata.policies import TARGET_GROUP_SIZE
from metadata.records import QueueRecord
from wire.errors import NOT_FOUND, AmqpError

if TYPE_CHECKING:
    from actors.node.core import NodeCore

STATUS_COLUMNS = ("Node Name", "Raft State", "Membership", "Last Log Index", "Last Written", "Last Applied",
                  "Commit Index", "Snapshot Index", "Term", "Machine Version")  # RabbitMQ 4.0's
_NOPROC = AmqpError(NOT_FOUND, "noproc")
# a change waits through the queue's election (its leader's node just stopped, say) and the member
# answers by its own deadline: the call outlives both, whatever the metadata time-out (RabbitMQ's
# membership calls have their own time-out too, not the metadata store's)
CHANGE_CALL_MS = DEADLINE_MS + 5_000
_TIMEOUT = AdminError("the operation timed out: the metadata store has no majority", EX_SOFTWARE)


# ---------------------------------------------------------------- pure parts
def matching(records: Iterable[QueueRecord], vhost_pattern: str = ".*", queue_pattern: str = ".*") -> list[QueueRecord]:
    """The quorum queues whose vhost and name match the patterns (RabbitMQ's re:run: a search)."""
    v, q = re.compile(vhost_pattern), re.compile(queue_pattern)
    return sorted((r for r in records if r.quorum and v.search(r.vhost) and q.search(r.name)),
                  key=lambda r: (r.vhost, r.name))


def minimum_quorum(records: Iterable[QueueRecord], node: str, down: set[str]) -> list[QueueRecord]:
    """The quorum queues with a member on `node` that would lose their majority were it stopped
    (RabbitMQ's list_with_minimum_quorum: running members <= quorum)."""
    out = []
    for rec in sorted(records, key=lambda r: (r.vhost, r.name)):
        if rec.quorum and node in rec.members:
            running = sum(1 for n in rec.members if n not in down)
            if running <= len(rec.members) // 2 + 1:
                out.append(rec)
    return out


def plan_rebalance(leaders: dict[str, str], members: dict[str, tuple[str, ...]], up: set[str]) -> list[tuple[str, str]]:
    """Leader moves (uid, to node) that even out the leaders over the nodes that are up: while a
    node leads more than the average rounded up, one of its queues moves to the member node
    (up) with the fewest leaders, if that one has fewer than the average."""
    counts = Counter({n: 0 for n in up})
    counts.update(n for n in leaders.values() if n in up)
    target = -(-sum(counts.values()) // max(len(counts), 1))
    moves: list[tuple[str, str]] = []
    current = dict(leaders)
    for uid in sorted(current, key=lambda u: (current[u], u)):
        node = current[uid]
        if counts[node] <= target:
            continue
        options = sorted((counts[n], n) for n in members[uid] if n in up and n != node)
        if options and options[0][0] < target and options[0][0] + 1 < counts[node]:
            to = options[0][1]
            counts[node] -= 1
            counts[to] += 1
            current[uid] = to
            moves.append((uid, to))
    return moves


def status_row(node: str, st: dict[str, Any] | None) -> dict[str, Any]:
    """One row of quorum_status: a member's status (None: no member process answered)."""
    if st is None:
        return {"Node Name": node, "Raft State": "noproc", **{c: "" for c in STATUS_COLUMNS[2:]}}
    me = st["id"]
    membership = "voter" if me in st["members"] else "promotable" if me in st.get("learners", ()) else "non_voter"
    return {"Node Name": node, "Raft State": st["role"], "Membership": membership, "Last Log Index": st["last"],
            "Last Written": st["written"], "Last Applied": st["applied"], "Commit Index": st["commit"],
            "Snapshot Index": st["snapshot_index"] or "undefined", "Term": st["term"],
            "Machine Version": st["machine_version"]}  # the version its log runs (raft/versions.py)


def with_lag(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each member's lag: the leader's last log index minus its own (warren's column)."""
    leads = [r["Last Log Index"] for r in rows if r["Raft State"] == "leader"]
    for r in rows:
        r["Lag"] = leads[0] - r["Last Log Index"] if leads and r["Last Log Index"] != "" else ""
    return rows


def reconcile(node: str, records: Iterable[QueueRecord]) -> list[Effect]:
    """What this node's quorum host is told when the node starts serving (see the docstring)."""
    mine = [r for r in records if r.quorum and node in r.members]
    out: list[Effect] = [Send(qq.manager(node, r), qq.start_member(r)(0)) for r in mine]
    keep = KeepMembers(sorted(qq.uid_of(r) for r in mine))  # every host keeps those of it that it holds
    out += [Send(manager, keep) for manager in qq.managers(node)]
    return out


# ---------------------------------------------------------------- the operations
def _queue(core: NodeCore, a: dict) -> QueueRecord | AdminError:
    rec = named_queue(core.registry, a)
    if isinstance(rec, AdminError):
        return rec
    if not rec.quorum:
        return AdminError(a.get("classic_error", "classic_queue_not_supported"), EX_UNAVAILABLE)
    return rec


def quorum_status(core: NodeCore, a: dict) -> Op:
    rec = _queue(core, {**a, "classic_error": "Cannot get quorum status of a classic queue"})
    if isinstance(rec, AdminError):
        return rec
    uid = qq.uid_of(rec)
    rows = []
    for node in rec.members:
        reply = yield Ask(qq.manager(node, rec), lambda rid: MemberStatus(rid, uid), _NOPROC)
        rows.append(status_row(node, reply.value if reply.ok else None))
    return {"rows": with_lag(rows), "columns": list(STATUS_COLUMNS)}


def add_member(core: NodeCore, a: dict) -> Op:
    return (yield from _one(core, a, _add))


def delete_member(core: NodeCore, a: dict) -> Op:
    return (yield from _one(core, a, _delete))


def _one(core: NodeCore, a: dict, change: Callable[[NodeCore, QueueRecord, str], Op]) -> Op:
    rec = _queue(core, a)
    if isinstance(rec, AdminError):
        return rec
    result = yield from change(core, rec, a["node"])
    return result if isinstance(result, AdminError) else {"ok": True}


def _add(core: NodeCore, rec: QueueRecord, node: str) -> Op:
    """Add `node`'s member; the new size, or an AdminError."""
    if node not in core.cluster_now or node in core.down:
        return AdminError("node_not_running", EX_UNAVAILABLE)
    if node in rec.members:
        return len(rec.members)
    uid = qq.uid_of(rec)
    started = yield Ask(qq.manager(node, rec), qq.start_member(rec), _NOPROC)
    if not started.ok:
        return AdminError("node_not_running", EX_UNAVAILABLE)
    reply = yield Ask(core.queue_target(rec), lambda rid: ChangeQueueMembers(rid, member_id(node, uid), True),
                      _NOPROC, timeout_ms=CHANGE_CALL_MS)
    if not reply.ok:
        yield Ask(qq.manager(node, rec), qq.delete_member(rec), _NOPROC)
        return AdminError(reply.error.detail, EX_UNAVAILABLE)
    return (yield from _record(rec, (*rec.members, node)))


def _delete(core: NodeCore, rec: QueueRecord, node: str) -> Op:
    """Remove `node`'s member; the new size, or an AdminError."""
    if node not in rec.members:
        return len(rec.members)
    if len(rec.members) == 1:
        return AdminError("last_node", EX_UNAVAILABLE)
    uid = qq.uid_of(rec)
    reply = yield Ask(core.queue_target(rec), lambda rid: ChangeQueueMembers(rid, member_id(node, uid), False),
                      _NOPROC, timeout_ms=CHANGE_CALL_MS)
    if not reply.ok:
        return AdminError(reply.error.detail, EX_UNAVAILABLE)
    core.leaders.forget(rec)  # it may have led: the next call asks a member that is left
    size = yield from _record(rec, tuple(n for n in rec.members if n != node))
    if node in core.cluster_now or node == core.node:  # a node that is down deletes it when it serves
        yield Ask(qq.manager(node, rec), qq.delete_member(rec), _NOPROC)
    return size


def _record(rec: QueueRecord, members: tuple[str, ...]) -> Op:
    result, _ = yield Apply(SetQueueMembers(rec.vhost, rec.name, rec.home, members), _TIMEOUT)
    return len(members) if result is None else len(result.members)


def grow(core: NodeCore, a: dict) -> Op:
    """A member on `node` for every matching queue without one (`even`: those with an even count)."""
    node, strategy = a["node"], a["strategy"]
    if node not in core.cluster_now or node in core.down:
        return {"rows": []}  # RabbitMQ grows onto running nodes only
    rows = []
    for rec in matching(core.registry.queues(), a.get("vhost_pattern", ".*"), a.get("queue_pattern", ".*")):
        if node in rec.members or (strategy == "even" and len(rec.members) % 2):
            continue
        result = yield from _add(core, rec, node)
        rows.append(_result_row(rec, len(rec.members), result))
    return {"rows": _errors_only(rows, a)}


def shrink(core: NodeCore, a: dict) -> Op:
    """Remove the member on `node` of every queue that has one (never a queue's last member)."""
    node = a["node"]
    rows = []
    for rec in matching(core.registry.queues()):
        if node not in rec.members:
            continue
        result = yield from _delete(core, rec, node)
        rows.append(_result_row(rec, len(rec.members), result))
    return {"rows": _errors_only(rows, a)}


def _result_row(rec: QueueRecord, size: int, result: int | AdminError) -> dict[str, Any]:
    if isinstance(result, AdminError):
        text = "the last node cannot be removed" if result.message == "last_node" else result.message
        return {"vhost": rec.vhost, "name": rec.name, "size": size, "result": f"error: {text}"}
    return {"vhost": rec.vhost, "name": rec.name, "size": result, "result": "ok"}


def _errors_only(rows: list[dict[str, Any]], a: dict) -> list[dict[str, Any]]:
    return [r for r in rows if r["result"] != "ok"] if a.get("errors_only") else rows


def _statuses(node: str) -> Op:
    """Every member's status on `node`, by uid: one ask to each of its quorum hosts, at once (a
    host that does not answer adds none)."""
    replies = yield AskAll(tuple(Ask(manager, lambda rid: MemberStatus(rid, ""), _NOPROC)
                                 for manager in qq.managers(node)))
    return {uid: st for reply in replies if reply.ok for uid, st in (reply.value or {}).items()}


def rebalance(core: NodeCore, a: dict) -> Op:
    """Move leaders so that every node that is up leads about as many queues (RabbitMQ's
    rebalance does not change members); the leaders per node as planned."""
    records = matching(core.registry.queues(), a.get("vhost_pattern", ".*"), a.get("queue_pattern", ".*"))
    up = core.cluster_now - core.down
    leaders: dict[str, tuple[int, str]] = {}  # uid -> (term, node)
    for node in sorted(up):
        for uid, st in (yield from _statuses(node)).items():
            if st["role"] == "leader" and st["term"] >= leaders.get(uid, (-1, ""))[0]:
                leaders[uid] = (st["term"], node)
    by_uid = {qq.uid_of(r): r for r in records}
    led = {uid: node for uid, (_, node) in leaders.items() if uid in by_uid}
    for uid, to in plan_rebalance(led, {u: r.members for u, r in by_uid.items()}, up):
        rec = by_uid[uid]
        yield Ask(qq.member(led[uid], rec), lambda rid, to=to, uid=uid: TransferQueueLeader(rid, member_id(to, uid)),
                  _NOPROC, timeout_ms=CHANGE_CALL_MS)
        led[uid] = to
    counts = Counter(led.values())
    return {"rows": [{"Node name": n, "Number of quorum queues": counts[n]} for n in sorted(up)]}


def quorum_critical(core: NodeCore, a: dict) -> Op:
    """check_if_node_is_quorum_critical for this node."""
    yield from ()  # it reads this node's copy only: no step
    if len(core.cluster_now) == 1:
        return {"single_node_cluster": True, "queues": []}
    critical = minimum_quorum(core.registry.queues(), core.node, core.down)
    return {"single_node_cluster": False, "queues": [
        {"name": r.name, "vhost": r.vhost, "readable_name": f"queue '{r.name}' in vhost '{r.vhost}'"}
        for r in critical]}


ADMIN_OPS = {"quorum_status": quorum_status, "add_member": add_member, "delete_member": delete_member,
             "grow": grow, "shrink": shrink, "rebalance_quorum": rebalance, "quorum_critical": quorum_critical}


# ---------------------------------------------------------------- continuous membership reconciliation
CMR_TIMER = "quorum-membership-reconciliation"
TARGET_ARGUMENT = "x-quorum-target-group-size"


@dataclass(frozen=True, slots=True)
class Reconciliation:
    """quorum_queue.continuous_membership_reconciliation.* (RabbitMQ 4.0's names and defaults)."""

    enabled: bool = False
    target_group_size: int | None = None
    auto_remove: bool = False
    interval_ms: int = 3_600_000
    trigger_interval_ms: int = 10_000


@dataclass(frozen=True, slots=True)
class Reconcile:
    """An internal operation of the node's serial order: one round of reconciliation."""


def schedule(settings: Reconciliation, *, triggered: bool) -> list[Effect]:
    """The next round: after the interval, or (a trigger) after the trigger interval."""
    if not settings.enabled:
        return []
    return [StartTimer(CMR_TIMER, settings.trigger_interval_ms if triggered else settings.interval_ms)]


def target_size(rec: QueueRecord, configured: int | None, policy_value: Any) -> int:
    """get_target_size/2: the largest of the configured target group size, the queue's
    x-quorum-target-group-size and the target-group-size its policies give it (0: none)."""
    def positive(value: Any) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
    return max(positive(configured), positive(rec.arguments.get(TARGET_ARGUMENT)), positive(policy_value))


def grow_onto(rec: QueueRecord, target: int, up: set[str], load: Counter[str]) -> str | None:
    """should_add_node/3 and the node to add a member on: a running node without one (the one
    holding the fewest members, then by name), when the queue is below its target, an odd size is
    reachable (its size is even, or two nodes are free) and every member is running."""
    free = sorted((n for n in up if n not in rec.members), key=lambda n: (load[n], n))
    size = len(rec.members)
    if not free or size >= target or (size % 2 and len(free) < 2) or not set(rec.members) <= up:
        return None
    return free[0]


def reconcile_members(core: NodeCore, _op: Reconcile) -> Op:
    """One round (see the module docstring); whether it added or removed members (or tried to)."""
    settings: Reconciliation = core.reconciliation
    leading = {uid for uid, st in (yield from _statuses(core.node)).items() if st["role"] == "leader"}
    present = core.cluster_now | {core.node}
    up = present - core.down
    changed = False
    for first in [r for r in matching(core.registry.queues()) if qq.uid_of(r) in leading]:
        key = (first.vhost, first.name, first.home)
        dangling = [n for n in first.members if n not in present] if settings.auto_remove else []
        if dangling:
            for node in dangling:
                rec = _current(core, key)
                if rec is not None and len(rec.members) > 1:
                    yield from _delete(core, rec, node)
            changed = True
            continue
        rec = _current(core, key)
        if rec is None:
            continue
        load = Counter(n for r in core.registry.queues() if r.quorum for n in r.members)
        policy = core.registry.queue_policy_definition(rec.vhost, rec.name, "quorum")
        target = target_size(rec, settings.target_group_size, policy.get(TARGET_GROUP_SIZE))
        node = grow_onto(rec, target, up, load)
        if node is not None:
            yield from _add(core, rec, node)
            changed = True
    return changed


def _current(core: NodeCore, key: tuple[str, str, str]) -> QueueRecord | None:
    """The queue's record now (an operation's earlier steps changed it), if still that incarnation."""
    rec = core.registry.queue(key[0], key[1])
    return rec if rec is not None and rec.home == key[2] else None
