"""`warrenctl flow`'s view (scripts/flow_view.py) of a snapshot: the chain as a tree with credit and
share, the bottleneck line, and the actors on a host that did not answer."""
from __future__ import annotations

import json

import pytest

from flow.bottleneck import Link
from scripts.flow_view import NO_ANSWER, Snapshot, render, snapshot


def row(kind: str, name: str, state: str = "running", downstream=(), blocked_on=(), share: float = 0.0,
        credit=None, label: str | None = None) -> dict:
    return {"kind": kind, "name": name, "label": label or name, "state": state, "downstream": list(downstream),
            "blocked_on": list(blocked_on), "flow_share": share, "credit": credit or {}}


CHAIN = [row("connection", "conn0:1", "flow", ["conn0/ch:1"], ["conn0/ch:1"], 0.8, label="conn0:1 (guest@h:1)"),
         row("channel", "conn0/ch:1", "flow", ["queue0/q:/:jobs"], ["queue0/q:/:jobs"], 0.75,
             {"queue0/q:/:jobs": -12}, label="conn0:1 (1)"),
         row("queue", "queue0/q:/:jobs", "running", ["queue0/msg_store"], share=0.1, label="jobs (vhost /)"),
         row("store", "queue0/msg_store", share=0.1)]


def test_the_chain_as_a_tree_with_the_bottleneck_last():
    assert Snapshot(CHAIN).table().splitlines() == [
        "link                            state    credit  in flow",
        "connection conn0:1 (guest@h:1)  flow          -      80%",
        "  channel conn0:1 (1)           flow          -      75%",
        "    queue jobs (vhost /)        running     -12      10%",
        "      store queue0/msg_store    running       -      10%",
        "bottleneck: queue queue0/q:/:jobs (channel conn0/ch:1 in flow, none of its queues in flow)"]


def test_a_silent_host_shows_what_was_sent_to_it_as_not_answering_and_it_is_named():
    asked = {"conn0": CHAIN[:2], "queue0": None}
    snap = snapshot(["conn0", "queue0"], asked.__getitem__)
    assert snap.silent == ["queue0"]
    lines = snap.table().splitlines()
    assert lines[3].split() == ["queue", "queue0/q:/:jobs", NO_ANSWER.split()[0], NO_ANSWER.split()[1], "-12"]
    assert lines[-2:] == ["silent hosts: queue0",
                          "bottleneck: queue queue0/q:/:jobs (channel conn0/ch:1 in flow, none of its queues in flow)"]


def test_json_carries_the_rows_and_the_verdict():
    snap = json.loads(render(Snapshot(CHAIN), "json"))
    assert snap["bottleneck"] == {"kind": "queue", "name": "queue0/q:/:jobs",
                                  "why": "channel conn0/ch:1 in flow, none of its queues in flow"}
    assert snap["links"] == CHAIN and snap["silent_hosts"] == []


def test_nothing_in_flow_and_no_connections():
    assert Snapshot([row("connection", "c", downstream=["ch"]), row("channel", "ch")]).table().endswith(
        "bottleneck: none")
    assert Snapshot([]).table().splitlines()[1:] == ["(no connections)", "bottleneck: none"]


@pytest.mark.parametrize("host", ["queue0", "conn1"])  # a queue host, or a connection host holding queues
def test_a_queue_on_a_silent_host_is_matched_in_cluster_wide_names(host: str):
    queue = f"n1@h:{host}/q:/:jobs"
    rows = [row("connection", "n1@h:conn0:1", "flow", ["n1@h:conn0/ch:1"], ["n1@h:conn0/ch:1"]),
            row("channel", "n1@h:conn0/ch:1", "flow", [queue], [queue])]
    snap = Snapshot(rows, silent=[host])
    assert snap.links()[-1] == Link("queue", queue, NO_ANSWER)
    assert snap.as_json()["bottleneck"]["name"] == queue
