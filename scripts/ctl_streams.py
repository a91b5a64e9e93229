"""warrenctl's stream command, as `rabbitmq-streams` gives it: `stream_status`.

The node host answers it (actors/node/streams.py); this module parses, prints the banner line
first (not with --formatter json), then a tab-separated table with a header row, or a JSON list.
"""
from __future__ import annotations

import argparse
from typing import Any, Callable, Protocol

COMMANDS = ("stream_status",)


class Node(Protocol):
    def ask(self, host: str, op: str, args: dict | None = None) -> Any: ...


def add_parsers(cmd: Callable[..., argparse.ArgumentParser]) -> None:
    sp = cmd("stream_status", vhost=True, help="a stream's members and log: offsets, readers, segments")
    sp.add_argument("queue")


def run(node: Node, a: argparse.Namespace, render: Callable[[list[dict], list[str], str], str],
        out: Callable[[str], None]) -> str:
    vhost = getattr(a, "vhost", None) or "/"
    if a.formatter != "json":
        out(f"Status of stream {a.queue} ...")
    answer = node.ask("node", "stream_status", {"vhost": vhost, "name": a.queue})
    return render(answer["rows"], answer["columns"], a.formatter)
