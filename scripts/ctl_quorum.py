"""warrenctl's quorum queue commands, as `rabbitmq-queues` gives them: `quorum_status`,
`add_member`, `delete_member`, `grow`, `shrink`, `rebalance` and `check_if_node_is_quorum_critical`.

The node host runs each as an admin operation (actors/node/quorum_membership.py), through the
queue's leader; this module parses, prints RabbitMQ's banner line first (as rabbitmq-queues does,
on stdout, not with --formatter json), then the answer: a tab-separated table with a header row (or
a JSON list), or RabbitMQ's message. Failures print "Error: <reason>" and exit as rabbitmq-queues
does (69 for not_found, node_not_running, last_node and a failed check; 64 for bad arguments).
"""
from __future__ import annotations

import argparse
import json
from typing import Any, Callable, Protocol

EX_USAGE, EX_UNAVAILABLE = 64, 69
VALIDATION = "Error (argument validation)"
GROW_COLUMNS = ["vhost", "name", "size", "result"]
REBALANCE_COLUMNS = ["Node name", "Number of quorum queues", "Number of replicated classic queues"]
COMMANDS = ("quorum_status", "add_member", "delete_member", "grow", "shrink", "rebalance",
            "check_if_node_is_quorum_critical")


class Node(Protocol):
    def ask(self, host: str, op: str, args: dict | None = None) -> Any: ...


Render = Callable[[list[dict], list[str], str], str]


def add_parsers(cmd: Callable[..., argparse.ArgumentParser]) -> None:
    """The commands' arguments, on warrenctl's parser (`cmd(name, vhost=...)` adds one)."""
    cmd("quorum_status", vhost=True, help="a quorum queue's members: Raft state, indexes, term").add_argument("queue")
    for name in ("add_member", "delete_member"):
        sp = cmd(name, vhost=True, help=f"{name.split('_')[0]} a quorum queue's member (replica) on a node")
        sp.add_argument("queue")
        sp.add_argument("member_node")
    sp = cmd("grow", help="a member on NODE for every matching quorum queue (all, or those with an even count)")
    sp.add_argument("member_node")
    sp.add_argument("strategy")
    _patterns(sp)
    sp.add_argument("--errors-only", dest="errors_only", action="store_true")
    sp = cmd("shrink", help="remove the members on NODE of every quorum queue")
    sp.add_argument("member_node")
    sp.add_argument("--errors-only", dest="errors_only", action="store_true")
    sp = cmd("rebalance", help="even out quorum queue leaders over the running nodes (all | classic | quorum)")
    sp.add_argument("queue_type")
    _patterns(sp)
    cmd("check_if_node_is_quorum_critical",
        help="exit 69 if stopping this node would leave a quorum queue without a majority")


def _patterns(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--vhost-pattern", dest="vhost_pattern", default=".*")
    sp.add_argument("--queue-pattern", dest="queue_pattern", default=".*")


def run(node: Node, a: argparse.Namespace, render: Render, out: Callable[[str], None],
        failure: Callable[..., Exception]) -> str:
    c, f = a.command, a.formatter
    me = node.ask("$supervisor", "node_status")["node"]
    vhost = getattr(a, "vhost", None) or "/"

    def banner(text: str) -> None:
        if f != "json":
            out(text)

    def ask(op: str, args: dict) -> Any:
        return node.ask("node", op, args)
    if c == "quorum_status":
        banner(f"Status of quorum queue {a.queue} on node {me} ...")
        answer = ask("quorum_status", {"vhost": vhost, "name": a.queue})
        return render(answer["rows"], answer["columns"] + (["Lag"] if f == "json" else []), f)
    if c == "add_member":
        banner(f"Adding a replica for queue {a.queue} on node {a.member_node}...")
        ask("add_member", {"vhost": vhost, "name": a.queue, "node": a.member_node})
        return json.dumps({"result": "ok"}) if f == "json" else ""
    if c == "delete_member":
        banner(f"Removing a replica of queue {a.queue} on node {a.member_node}...")
        ask("delete_member", {"vhost": vhost, "name": a.queue, "node": a.member_node})
        return json.dumps({"result": "ok"}) if f == "json" else ""
    if c == "grow":
        if a.strategy not in ("all", "even"):
            raise failure(f"\"strategy '{a.strategy}' is not recognised.\"", EX_USAGE, VALIDATION)
        banner(f"Growing {a.strategy} quorum queues on {a.member_node}...")
        rows = ask("grow", {"node": a.member_node, "strategy": a.strategy, "vhost_pattern": a.vhost_pattern,
                            "queue_pattern": a.queue_pattern, "errors_only": a.errors_only})["rows"]
        return render(rows, GROW_COLUMNS, f) if rows or f == "json" else ""
    if c == "shrink":
        banner(f"Shrinking quorum queues on {a.member_node}...")
        rows = ask("shrink", {"node": a.member_node, "errors_only": a.errors_only})["rows"]
        return render(rows, GROW_COLUMNS, f) if rows or f == "json" else ""
    if c == "rebalance":
        kinds = {"quorum": "quorum queues", "classic": "replicated (mirrored, non-exclusive) classic queues",
                 "all": "all replicated queues"}
        if a.queue_type not in kinds:
            raise failure("\"queue type must be one of: all, classic, quorum\"", EX_USAGE, VALIDATION)
        banner(f"Re-balancing leaders of {kinds[a.queue_type]}...")
        rows = ask("rebalance_quorum", {"vhost_pattern": a.vhost_pattern, "queue_pattern": a.queue_pattern})["rows"]
        for r in rows:
            r["Number of replicated classic queues"] = 0  # warren has no mirrored classic queues
        return render(rows, REBALANCE_COLUMNS, f)
    if c == "check_if_node_is_quorum_critical":
        banner(f"Checking if node {me} is critical for quorum of any quorum queues ...")
        answer = ask("quorum_critical", {})
        if answer["single_node_cluster"]:
            text = f"Node {me} seems to be the only one in a single node cluster, the check does not apply"
            return json.dumps({"result": "ok", "message": text}) if f == "json" else text
        if not answer["queues"]:
            text = f"Node {me} reported no quorum queues with minimum quorum"
            return json.dumps({"result": "ok", "message": text}) if f == "json" else text
        lines = [f"{q['readable_name']} would lose quorum if node {me} is stopped" for q in answer["queues"]]
        raise failure("\n".join(lines), EX_UNAVAILABLE)
    raise AssertionError(c)
