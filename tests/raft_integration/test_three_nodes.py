"""A Raft group over three real node processes: replication, kill -9 of the leader, restart and
catch-up from the WAL, and many groups sharing each node's WAL (Raft §5.2, §5.3; docs/DESIGN.md §4, §7).
"""
from __future__ import annotations

import pytest

from actors.raft import machine
from tests.raft_integration.conftest import wait_until, with_client

pytestmark = pytest.mark.integration


def applied_everywhere(cluster, group: str, nodes: list[str], index: int) -> dict | None:
    """The members' statuses if every one has applied at least `index`, else None."""
    statuses = {n: cluster.status(n, [group])[group] for n in nodes}
    if all(s["applied"] >= index for s in statuses.values()):
        return statuses
    return None


def test_a_committed_command_is_applied_on_all_three_members(make_cluster) -> None:
    cluster = make_cluster()

    async def body(client):
        return [await client.call("g0", machine.incr("hits", k)) for k in (1, 2, 3)]
    assert with_client(cluster, body) == [1, 3, 6]  # the leader's machine replies, in order
    leader = cluster.leader_of("g0")
    commit = cluster.status(leader, ["g0"])["g0"]["commit"]
    statuses = wait_until(lambda: applied_everywhere(cluster, "g0", list(cluster.nodes), commit),
                          "every member to apply the commit index")
    assert {s["state"]["kv"]["hits"] for s in statuses.values()} == {6}
    assert sum(s["role"] == "leader" for s in statuses.values()) == 1
    assert {s["leader"] for s in statuses.values()} == {f"raft-{leader}/g0"}


def test_killing_the_leader_elects_a_new_one_and_the_restarted_node_catches_up(make_cluster):
    # a tiny WAL rolls over often, so the restarted node recovers from segments AND the WAL
    cluster = make_cluster(host_config={"wal_max_size_bytes": 2048, "segment_max_entries": 16})

    async def before(client):
        for i in range(50):
            await client.call("g0", machine.set_(f"k{i}", i))
    with_client(cluster, before)
    old = cluster.leader_of("g0")
    old_term = cluster.status(old, ["g0"])["g0"]["term"]
    assert cluster.ask(old, "wal_stats")["rollovers"] > 0
    cluster.kill(old)  # kill -9 of the whole node

    survivors = cluster.running()
    new = wait_until(lambda: cluster.leader_of("g0", survivors), "a new leader (§5.2)")
    assert new != old
    assert cluster.status(new, ["g0"])["g0"]["term"] > old_term

    async def after(client):
        for i in range(50, 100):
            await client.call("g0", machine.set_(f"k{i}", i))
        return await client.call("g0", machine.incr("after", 1))
    assert with_client(cluster, after) == 1  # commits continue on the surviving majority

    cluster.start(old)  # recovers its log and vote from the WAL, then catches up (§5.3)
    commit = cluster.status(new, ["g0"])["g0"]["commit"]
    statuses = wait_until(lambda: applied_everywhere(cluster, "g0", list(cluster.nodes), commit),
                          "the restarted member to catch up")
    assert statuses[old]["recovered"] >= 51  # its 50 commands and the no-op came from disk
    kvs = [s["state"]["kv"] for s in statuses.values()]
    assert kvs[0] == kvs[1] == kvs[2]
    assert kvs[0]["k99"] == 99 and kvs[0]["k0"] == 0 and kvs[0]["after"] == 1


def test_many_groups_share_each_nodes_wal(make_cluster) -> None:
    groups = 30  # the brief's 100 groups per node, scaled down to keep the suite quick
    # many members per node: the slower clock the benchmark uses (see bench/raft_bench.py)
    cluster = make_cluster(groups=groups, host_config={
        "tick_ms": 50, "settings": {"election_ticks": 10, "heartbeat_ticks": 2}})

    async def body(client):
        import asyncio
        return await asyncio.gather(*(client.call(g, machine.incr("n", 1))
                                      for g in cluster.group_names() for _ in range(5)))
    replies = with_client(cluster, body)
    assert sorted(replies).count(5) == groups  # each group counted to 5
    for node in cluster.nodes:
        wait_until(lambda: all(s["state"]["kv"].get("n") == 5
                               for s in cluster.status(node).values()),
                   f"all groups applied on {node}")
        stats = cluster.ask(node, "wal_stats")
        # one WAL per node: entries of many groups go out in one flush (one sync)
        assert stats["entries"] > stats["flushes"], stats
        wal_dir = cluster.procs[node].data_dir / "raft" / "wal"
        assert len(list(wal_dir.glob("*.wal"))) == 1
        # a member's directory is made with its first file (a segment, a snapshot): none rolled over
        assert len(list((cluster.procs[node].data_dir / "raft" / "members").iterdir())) <= groups
