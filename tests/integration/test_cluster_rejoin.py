"""A node of a three-node cluster restarted while the processes of its old run are still on their
way out (bench/soak.py's n3 once waited ~14 s for its data dir's lock and then never heard from
its peers): the new start waits for the old processes, then rejoins and serves."""
from __future__ import annotations

import json

import pytest

from actors.runtime.logs import log_path
from scripts.local_cluster import Cluster, wait_serving
from tests.waiting import until

pytestmark = pytest.mark.integration


def events(node) -> list[dict]:
    path = log_path(node.data_dir)
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_node_restarted_while_its_old_processes_linger_rejoins_its_cluster(tmp_path):
    cluster = Cluster(tmp_path, 3).start()
    try:
        old = cluster.nodes["n3"]
        lingering = [p for p in old.processes() if p.pid != old.proc.pid]
        for p in lingering:  # frozen: they hold the lock and the ports, as processes still exiting do
            p.suspend()
        old.proc.kill()
        old.proc.wait()
        new = cluster.restart("n3", wait=False)
        until(lambda: any(e["event"] == "node.waiting_for_old_incarnation" and e["old_pid"] == old.proc.pid
                          for e in events(new)), "the new start waiting for the old run")
        for p in lingering:
            p.resume()  # their lifeline says the main process is gone: they exit
        wait_serving(new)
        everyone = sorted(cluster.node_name(n) for n in cluster.names)
        until(lambda: all(cluster.cluster_status(n)["running"] == everyone for n in cluster.names),
              "every node seeing all three up")
    finally:
        cluster.stop()
