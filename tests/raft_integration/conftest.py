"""Fixtures: a 3-node Raft cluster of real processes, and a client Runtime to talk to it."""
from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

import pytest

from actors.raft.client import RaftClient
from actors.raft.launch import RaftCluster
from actors.runtime.mailbox import Runtime
from tests.waiting import until

deadline_s = 20.0
poll_s = 0.05


@pytest.fixture
def make_cluster(tmp_path):
    made: list[RaftCluster] = []

    def make(**kwargs: Any) -> RaftCluster:
        cluster = RaftCluster(tmp_path / f"c{len(made)}", **kwargs)
        made.append(cluster)
        cluster.start()
        return cluster
    yield make
    for cluster in made:
        cluster.stop()


def with_client(cluster: RaftCluster, body: Callable[[RaftClient], Awaitable[Any]]) -> Any:
    """Run `body(client)` on a fresh client Runtime bound to the cluster's "client" endpoint."""
    async def main() -> Any:
        runtime = Runtime("client", cluster.directory)
        await runtime.start()
        try:
            return await body(RaftClient(runtime, "client", cluster.members()))
        finally:
            await runtime.close()
    return asyncio.run(asyncio.wait_for(main(), 60))


def wait_until(check: Callable[[], Any], what: str, timeout_s: float = deadline_s) -> Any:
    return until(check, what, timeout_s)
