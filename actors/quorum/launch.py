"""Quorum hosts as real node processes, for tests and benchmarks (no AMQP front end).

`QuorumCluster` starts N nodes (actors/raft/launch.py's NodeCluster: one `run_node` each, a static
tcp directory on 127.0.0.1, kill -9 of a whole node) whose one host is the quorum host
(actors/quorum/host.py). `declare` starts a queue's members through each node's control op, as
the metadata store will through `StartMember`; the rest reads the hosts' "status".
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from actors.quorum.names import host_name, member_id
from actors.raft.launch import NodeCluster


@dataclass(frozen=True)
class QueueRef:
    uid: str
    name: str
    nodes: tuple[str, ...]

    @property
    def members(self) -> list[str]:
        return [member_id(node, self.uid) for node in self.nodes]


@dataclass
class QuorumCluster(NodeCluster):
    entry = "actors.quorum.host:quorum_host"

    def host_of(self, node: str) -> str:
        return host_name(node)

    def node_host_config(self, node: str) -> dict:
        """These nodes have no cluster view, from which a quiet group's followers learn that their
        leader's node is down (actors/quorum/host.py): their groups do not quiesce unless asked."""
        return {"settings": {"quiesce": False, **self.host_config.get("settings", {})}}

    def declare(self, name: str, *, nodes: tuple[str, ...] | None = None, arguments: dict | None = None,
                created_ms: int = 0, leader: str = "") -> QueueRef:
        """Start a quorum queue's members on `nodes` (default: every node), durably; `leader`'s
        member asks for votes first."""
        return self.declare_many([name], nodes=nodes, arguments=arguments, created_ms=created_ms,
                                 leader=leader)[0]

    def declare_many(self, names: list[str], *, nodes: tuple[str, ...] | None = None,
                     arguments: dict | None = None, created_ms: int = 0, leader: str = "") -> list[QueueRef]:
        """Several queues, with one control ask per node."""
        refs = [QueueRef(uuid.uuid4().hex[:12], name, tuple(nodes or self.nodes)) for name in names]
        # the leader's member last: it asks for votes at its first tick, when the others exist
        for node in sorted(nodes or self.nodes, key=lambda n: n == leader):
            self.ask(node, "start_members", {"leader": leader, "members": [
                {"uid": ref.uid, "name": ref.name, "nodes": list(ref.nodes), "arguments": arguments or {},
                 "created_ms": created_ms} for ref in refs]}, timeout=120)
        return refs

    def delete(self, ref: QueueRef) -> None:
        for node in ref.nodes:
            if node in self.running():
                self.ask(node, "delete_member", {"uid": ref.uid})

    def status(self, node: str, ref: QueueRef) -> dict[str, Any] | None:
        return self.ask(node, "status", {"uid": ref.uid}).get(ref.uid)

    def leader_of(self, ref: QueueRef, among: list[str] | None = None) -> str | None:
        """The node whose member leads the queue with the highest term (as reported now)."""
        best = None
        for node in among or [n for n in ref.nodes if n in self.running()]:
            st = self.status(node, ref)
            if st is not None and st["role"] == "leader" and (best is None or st["term"] > best[1]):
                best = (node, st["term"])
        return best[0] if best else None
