"""Fixtures: quorum hosts as real node processes (no AMQP front end), and client Runtimes whose
QueueDrivers play channels (actors/quorum/drive.py).

`cluster` is one 3-node cluster with the fast settings, shared by a module's tests (a start costs
seconds): each test gets it with every node running and no queue left from the test before, and
may kill and restart its nodes. A test that needs other settings makes its own (`make_cluster`)."""
from __future__ import annotations

import asyncio
import itertools
from typing import Any, Awaitable, Callable

import pytest

from actors.quorum.drive import QueueDriver
from actors.quorum.launch import QueueRef, QuorumCluster
from actors.runtime.mailbox import Runtime
from tests.waiting import until

# fast elections for tests: 20 ms ticks, heartbeat every 40 ms, election timeout 200-400 ms
FAST = {"tick_ms": 20, "settings": {"election_ticks": 10, "heartbeat_ticks": 2}}
body_timeout_s = 90


@pytest.fixture
def make_cluster(tmp_path, request):
    """Start a QuorumCluster (fast elections, client hosts c1..c3), stopped after the test."""
    numbers = itertools.count()

    def make(**kwargs: Any) -> QuorumCluster:
        kwargs["host_config"] = {**FAST, **kwargs.get("host_config", {})}
        kwargs.setdefault("clients", ("c1", "c2", "c3"))
        cluster = QuorumCluster(tmp_path / f"c{next(numbers)}", **kwargs)
        request.addfinalizer(cluster.stop)
        cluster.start()
        return cluster
    return make


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory):
    cluster = QuorumCluster(tmp_path_factory.mktemp("quorum"), host_config=FAST, clients=("c1", "c2", "c3"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def cluster(shared_cluster: QuorumCluster) -> QuorumCluster:
    """The shared cluster, every node running (a node a test killed is started again), with the
    members of every earlier test's queues deleted."""
    stopped = [node for node in shared_cluster.nodes if node not in shared_cluster.running()]
    if stopped:
        shared_cluster.start(*stopped)
    for node in shared_cluster.nodes:
        for uid, *_ in shared_cluster.ask(node, "members"):
            shared_cluster.ask(node, "delete_member", {"uid": uid})
    return shared_cluster


def with_runtimes(cluster: QuorumCluster, body: Callable[..., Awaitable[Any]], *hosts: str) -> Any:
    """Run `body(*runtimes)` with a started client Runtime for each of `hosts`."""
    async def main() -> Any:
        runtimes = [Runtime(host, cluster.directory) for host in hosts]
        for runtime in runtimes:
            await runtime.start()
        try:
            return await body(*runtimes)
        finally:
            for runtime in runtimes:
                await runtime.close()
    return asyncio.run(asyncio.wait_for(main(), body_timeout_s))


def driver(runtime: Runtime, ref: QueueRef, name: str = "ch") -> QueueDriver:
    return QueueDriver(runtime, name, ref.members, retry_ticks=10)


def leader(cluster: QuorumCluster, ref: QueueRef, among: list[str] | None = None) -> str:
    return until(lambda: cluster.leader_of(ref, among), "a leader")


def agreed(cluster: QuorumCluster, ref: QueueRef, nodes: list[str], index: int) -> dict | None:
    """Every member's status once all have applied `index`, else None."""
    statuses = {n: cluster.status(n, ref) for n in nodes}
    if all(s is not None and s["applied"] >= index for s in statuses.values()):
        return statuses
    return None


def bodies(n: int, prefix: bytes = b"m", start: int = 0) -> list[bytes]:
    return [prefix + b"%06d" % i for i in range(start, start + n)]
