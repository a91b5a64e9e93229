"""Idle quorum queues on three real nodes: their groups go quiet and their members stop being
ticked (raft/quiescence.py, actors/quorum/host.py), and a quiet queue still gets a new leader when
its leader's node dies (the cluster's liveness wakes the followers) or when its leader's quorum
host is killed and restarted (the restarted member's own vote request, which no lease holds back).
Through pika: publishing with confirms and consuming work again on the other nodes."""
from __future__ import annotations

import os
import signal

import pika
import pytest

from actors.runtime.client import control
from tests.integration.cluster import Cluster
from tests.integration.test_quorum_broker import PERSISTENT, QUORUM, connect, drain, members
from tests.waiting import poll_ask_s, until

pytestmark = pytest.mark.integration

QUEUES = ("idle-a", "idle-b", "idle-c")
# a fast clock and a node seen down after 1 s, so that a failover takes seconds in a test
CONFIG = "raft.tick_ms = 50\ncluster.node_down_after = 1000\n"


@pytest.fixture
def cluster(tmp_path):
    conf = tmp_path / "warren.conf"
    conf.write_text(CONFIG)
    c = Cluster(tmp_path / "c", 3, "--config", str(conf)).start()
    yield c
    c.stop()


def statuses(cluster: Cluster, nodes: tuple[str, ...]) -> list[dict]:
    return [s for node in nodes for queue in QUEUES for s in members(cluster, node, queue).values()]


def declare_and_wait_asleep(cluster: Cluster) -> None:
    conn, ch = connect(cluster, "n1")  # client-local: n1 leads them all
    for queue in QUEUES:
        ch.queue_declare(queue, durable=True, arguments=QUORUM)
    conn.close()
    until(lambda: (lambda all_: len(all_) == 9 and all(s["asleep"] and s["quiet"] for s in all_))(
        statuses(cluster, ("n1", "n2", "n3"))), "every member of the idle queues asleep", timeout_s=60)


def publish_and_consume(cluster: Cluster, via: str, then: str) -> None:
    """A confirmed message to every queue through `via`, consumed through `then`."""
    conn, ch = connect(cluster, via)
    ch.confirm_delivery()
    for queue in QUEUES:
        until(lambda: _published(ch, queue), f"a confirmed publish to {queue} through {via}", timeout_s=60)
    conn.close()
    conn, ch = connect(cluster, then)
    for queue in QUEUES:
        assert drain(conn, ch, queue, 1) == [queue.encode()]
    conn.close()


def _published(ch, queue: str) -> bool:
    try:
        ch.basic_publish("", queue, queue.encode(), PERSISTENT, mandatory=True)
        return True
    except pika.exceptions.NackError:  # no leader yet: the channel nacks, the client tries again
        return False


def test_idle_queues_sleep_and_the_death_of_their_leaders_node_elects_new_leaders(cluster) -> None:
    declare_and_wait_asleep(cluster)
    cluster.kill("n1")
    until(lambda: (lambda all_: sum(s["role"] == "leader" for s in all_) == 3)(statuses(cluster, ("n2", "n3"))),
          "a leader for every queue on n2 or n3", timeout_s=60)
    publish_and_consume(cluster, "n2", "n3")
    cluster.restart("n1")
    # woken by the publishes, the groups go quiet again, with n1's members caught up and asleep
    until(lambda: (lambda all_: len(all_) == 9 and all(s["asleep"] for s in all_))(
        statuses(cluster, ("n1", "n2", "n3"))), "every member asleep again", timeout_s=60)


def test_an_idle_queue_whose_leaders_quorum_host_is_killed_gets_a_leader_again(cluster) -> None:
    declare_and_wait_asleep(cluster)
    pid = cluster.control("n1", "quorum", "pid")
    os.kill(pid, signal.SIGKILL)  # the node stays up: no liveness says anything to n2 and n3

    admin = int((cluster.nodes["n1"].data_dir / "admin_port").read_text())

    def restarted() -> bool:
        try:
            return control(admin, "quorum", "pid", {}, timeout=poll_ask_s) != pid
        except (TimeoutError, RuntimeError):  # the host is still restarting
            return False
    until(restarted, "n1's quorum host restarted", timeout_s=60)
    until(lambda: (lambda all_: sum(s["role"] == "leader" for s in all_) == 3)(
        statuses(cluster, ("n1", "n2", "n3"))), "a leader for every queue again", timeout_s=60)
    publish_and_consume(cluster, "n2", "n3")
