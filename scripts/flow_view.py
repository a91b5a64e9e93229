"""`warrenctl flow`: the publish chain reader -> channel -> queue -> store, live, with its bottleneck named.

Each connection host reports its connections and channels, each host holding classic queues (the
connection hosts, or the queue hosts of a node that has them) its queues and the store its
durable queues wait on, the quorum host its leading members with the WAL and followers
their commits wait on (`flow_links`, as flow/bottleneck.py's `Link`s plus a label and
the credit left per link). A host that does not answer in time (stopped, or too busy to answer) is
listed as silent, and every actor that a reported one sends to on it is shown with the state
`no answer`: that is where the chain stops moving. It shows the node's own hosts (named by kind,
"conn0"): an actor on another node of a cluster is not reported here. The view prints each connection's chain as a
tree - state, the credit its sender has left towards it, the share of the last 5 s spent in flow
(for a store: syncing) - and last the line `bottleneck: <kind> <name> (<why>)` or `bottleneck: none`
(flow/bottleneck.py's rule). `--once` prints one snapshot; otherwise the view refreshes every
`--interval` seconds until Ctrl-C; `--formatter json` prints each snapshot as one JSON object on a
line (`ts`, `links`, `silent_hosts`, `bottleneck`, `line`): redirected to a file, the flow samples
pipeline/jobs/bench_report.py plots.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from actors.placement import QUEUE_ACTOR_PREFIX, kind_of
from flow.bottleneck import Bottleneck, Link, find, line

CLEAR = "\x1b[H\x1b[2J"
NO_ANSWER = "no answer"
KIND_OF_HOST = {"queue": "queue", "quorum": "queue", "conn": "channel"}  # a silent host's actors, by its name
ROOT_KINDS = ("connection",)


@dataclass
class Snapshot:
    rows: list[dict]
    silent: list[str] = field(default_factory=list)
    ts: float = 0.0  # when it was taken (Unix seconds)

    def links(self) -> list[Link]:
        """The rows as Links, with the actors on silent hosts that reported ones send to."""
        known = {row["name"] for row in self.rows}
        links = [Link(r["kind"], r["name"], r["state"], tuple(r["downstream"]), tuple(r["blocked_on"]),
                      r["flow_share"]) for r in self.rows]
        for name in sorted({d for r in self.rows for d in r["downstream"]} - known):
            host, _, actor = name.partition("/")
            host_kind = kind_of(host)  # "queue0" of "n1@box:queue0"
            # a classic queue's actor is "q:VHOST:NAME" on a queue host or on a connection host
            kind = "queue" if actor.startswith(QUEUE_ACTOR_PREFIX) else next(
                (k for prefix, k in KIND_OF_HOST.items() if host_kind.startswith(prefix)), None)
            if host_kind in self.silent and kind is not None:
                links.append(Link(kind, name, NO_ANSWER))
        return links

    def bottleneck(self) -> Bottleneck | None:
        return find(self.links())

    def as_json(self) -> dict:
        verdict = self.bottleneck()
        return {"ts": self.ts, "links": self.rows, "silent_hosts": self.silent,
                "bottleneck": None if verdict is None else {"kind": verdict.kind, "name": verdict.name,
                                                            "why": verdict.why},
                "line": line(verdict)}

    def table(self) -> str:
        by_name = {row["name"]: row for row in self.rows}
        for link in self.links():
            by_name.setdefault(link.name, {"kind": link.kind, "name": link.name, "label": link.name,
                                           "state": link.state, "downstream": [], "credit": {}, "flow_share": 0.0})
        lines = [("link", "state", "credit", "in flow")]
        roots = [row for row in self.rows if row["kind"] in ROOT_KINDS]
        for root in roots:
            self._tree(root, by_name, 0, None, lines)
        if not roots:
            lines.append(("(no connections)", "", "", ""))
        widths = [max(len(cells[i]) for cells in lines) for i in range(4)]
        text = ["  ".join((cells[0].ljust(widths[0]), cells[1].ljust(widths[1]), cells[2].rjust(widths[2]),
                           cells[3].rjust(widths[3]))).rstrip() for cells in lines]
        if self.silent:
            text.append(f"silent hosts: {', '.join(self.silent)}")
        text.append(line(self.bottleneck()))
        return "\n".join(text)

    def _tree(self, row: dict, by_name: dict, depth: int, credit: int | None, lines: list) -> None:
        label = row.get("label") or row["name"]
        share = "" if row["state"] == NO_ANSWER else f"{round(100 * row['flow_share'])}%"
        lines.append(("  " * depth + f"{row['kind']} {label}", row["state"], "-" if credit is None else str(credit),
                      share))
        for name in row["downstream"]:
            below = by_name.get(name)
            if below is not None:
                self._tree(below, by_name, depth + 1, row["credit"].get(name), lines)


Ask = Callable[[str], list[dict] | None]  # a host -> its flow_links, None when it did not answer


def snapshot(hosts: list[str], ask: Ask) -> Snapshot:
    rows: list[dict] = []
    silent: list[str] = []
    for host in hosts:
        answer = ask(host)
        if answer is None:
            silent.append(host)
        else:
            rows += answer
    return Snapshot(rows, silent, time.time())


def render(snap: Snapshot, formatter: str) -> str:
    return json.dumps(snap.as_json(), sort_keys=True) if formatter == "json" else snap.table()


def run(take: Callable[[], Snapshot], formatter: str, once: bool, interval_s: float,
        out: Callable[[str], Any]) -> None:
    """Print one snapshot (`once`), or refresh until interrupted (the caller's Ctrl-C ends it)."""
    while True:
        text = render(take(), formatter)
        if once:
            out(text)
            return
        out(text if formatter == "json" else CLEAR + text)
        time.sleep(interval_s)  # the refresh period of a live view, not a synchronisation
