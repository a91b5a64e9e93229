"""warrenctl's stream commands, as `rabbitmq-streams` gives them: `stream_status`, `add_replica`
and `delete_replica`.

The node host answers them (actors/node/streams.py, actors/node/stream_membership.py); this
module parses, prints RabbitMQ's banner line first (on stdout, not with --formatter json), then
the answer: stream_status a tab-separated table with a header row, or a JSON list; a membership
change nothing, or with --formatter json 3.10's `{"node":...,"result":"ok"}`. Failures print
"Error: <reason>" and exit 69, as rabbitmq-streams does.
"""
from __future__ import annotations

import argparse
import json
from typing import Any, Callable, Protocol

COMMANDS = ("stream_status", "add_replica", "delete_replica")
BANNERS = {"add_replica": "Adding a replica for queue {queue} on node {node}...",
           "delete_replica": "Removing a replica of queue {queue} on node {node}..."}


class Node(Protocol):
    def ask(self, host: str, op: str, args: dict | None = None) -> Any: ...


def add_parsers(cmd: Callable[..., argparse.ArgumentParser]) -> None:
    sp = cmd("stream_status", vhost=True, help="a stream's members and log: offsets, readers, segments")
    sp.add_argument("queue")
    for name, what in (("add_replica", "add a stream's replica on a node; it catches up from the leader"),
                       ("delete_replica", "remove a stream's replica on a node, and its log there")):
        sp = cmd(name, vhost=True, help=what)
        sp.add_argument("queue")
        sp.add_argument("member_node")


def run(node: Node, a: argparse.Namespace, render: Callable[[list[dict], list[str], str], str],
        out: Callable[[str], None]) -> str:
    vhost = getattr(a, "vhost", None) or "/"
    if a.command in BANNERS:
        if a.formatter != "json":
            out(BANNERS[a.command].format(queue=a.queue, node=a.member_node))
        node.ask("node", a.command, {"vhost": vhost, "name": a.queue, "node": a.member_node})
        if a.formatter != "json":
            return ""
        me = node.ask("$supervisor", "node_status")["node"]
        return json.dumps({"node": me, "result": "ok"}, separators=(",", ":"))
    if a.formatter != "json":
        out(f"Status of stream {a.queue} ...")
    answer = node.ask("node", "stream_status", {"vhost": vhost, "name": a.queue})
    return render(answer["rows"], answer["columns"], a.formatter)
