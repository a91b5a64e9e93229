"""A quorum host's part of the publish chain for `warrenctl flow` (flow/bottleneck.py's Links).

Each leading member is a `queue` link: channels send it their publishes with credit, it is in flow
while it spent most of the window waiting for a commit (flow/commit_wait.py), and below it are what
it waited on: the host's one WAL (`wal`, its share the time spent writing and syncing) and its
followers (`follower`, each with the share of time the leader waited for its acknowledgement).
Followers are named by their member id, as the leader knows them, so a follower on another node
is shown from here. Members that do not lead are left out: no channel sends them anything.
"""
from __future__ import annotations

from typing import Any

from flow.commit_wait import WAL
from flow.state import waiting_state
from raft.roles import LEADER


def flow_links(members: list[Any], wal: Any, host: str, now_ms: int,
               wal_label: str = "quorum queues' write-ahead log", wal_downstream: tuple[str, ...] = ()) -> list[dict]:
    """`members`: QuorumMembers; `wal`: their WalActor (or WalClient: then its share is the time
    it had batches in flight to the node's WAL process, which `warrenctl flow` shows too)."""
    wal_name = f"{host}/wal"
    links = []
    for member in members:
        core = member.core
        if core.role != LEADER:
            continue
        wait = member.commit_wait
        config = core.state.config
        followers = sorted(core.progress)
        state = waiting_state(wait.member, now_ms)
        on = {key: record.flow_share(now_ms) for key, record in wait.on.items()}
        names = {WAL: wal_name}
        links.append({"kind": "queue", "name": str(member.me),
                      "label": f"{config.name} (vhost {config.vhost}, quorum leader)",
                      "state": state, "downstream": [wal_name, *followers],
                      "blocked_on": [names.get(k, k) for k in sorted(wait.waiting)] if state == "flow" else [],
                      "flow_share": wait.member.flow_share(now_ms), "credit": {}})
        for follower in followers:
            share = on.get(follower, 0.0)
            links.append({"kind": "follower", "name": follower, "label": f"{follower} (follower of {config.name})",
                          "state": waiting_state(wait.on[follower], now_ms) if follower in wait.on else "running",
                          "downstream": [], "blocked_on": [], "flow_share": share, "credit": {}})
    if links:
        links.append({"kind": "wal", "name": wal_name, "label": f"{wal_name} ({wal_label})",
                      "state": waiting_state(wal.syncing, now_ms), "downstream": list(wal_downstream), "blocked_on": [],
                      "flow_share": wal.syncing.flow_share(now_ms), "credit": {}})
    return links
