"""Quorum queue members on three real node processes, driven by channel stand-ins on client hosts:
confirms only once a majority has the messages, consumers across a leader's kill -9, catch-up of a
restarted member by delta and by snapshot, and the disk given back when a queue drains."""
from __future__ import annotations

import asyncio

import pytest

from actors.messages.quorum import ChannelsGone
from actors.quorum.drive import QueueDriver
from actors.runtime.address import Address
from raft.messages import RequestVote
from tests.quorum_integration.conftest import agreed, bodies, driver, leader, with_runtimes
from tests.waiting import poll_ask_s, until

pytestmark = pytest.mark.integration

window = 1000


async def publish_all(drv: QueueDriver, payloads: list[bytes], during=None) -> None:
    """Publish with at most `window` unconfirmed until all are confirmed; `during(confirmed)`
    runs after every confirm that arrives."""
    base, sent = drv.confirmed, 0
    while drv.confirmed < base + len(payloads):
        room = window - (base + sent - drv.confirmed)
        if sent < len(payloads) and room > 0:
            batch = payloads[sent:sent + min(room, 200)]
            drv.publish(batch)
            sent += len(batch)
            await asyncio.sleep(0)  # let the batch leave, as a channel's turn would
            continue
        confirmed = drv.confirmed
        await drv.until(lambda: drv.confirmed > confirmed, 60)
        if during is not None:
            await during(drv.confirmed - base)


def test_confirmed_messages_are_consumed_in_order_and_every_member_agrees(cluster):
    ref = cluster.declare("orders")
    leader(cluster, ref)
    payloads = bodies(3000)

    async def body(pub_rt, con_rt):
        pub, con = driver(pub_rt, ref, "p"), driver(con_rt, ref, "c")
        await con.consume("ctag", 300)
        await publish_all(pub, payloads)
        await con.until(lambda: len(con.deliveries) >= len(payloads))
        assert con.bodies() == payloads  # FIFO, each once
        assert not any(d.redelivered for d in con.deliveries)
        await con.until(lambda: not con.client.consumers["ctag"].held)  # every ack sent
    with_runtimes(cluster, body, "c1", "c2")
    st = cluster.status(cluster.leader_of(ref), ref)
    statuses = until(lambda: agreed(cluster, ref, list(cluster.nodes), st["commit"]), "all members applied")
    assert {s["messages"] for s in statuses.values()} == {0}
    assert sum(s["role"] == "leader" for s in statuses.values()) == 1


# slow: the broker-level tests check the same through pika (integration/test_quorum_broker.py's kill -9
# of the leader's node: nothing confirmed lost, publishing goes on, the member catches up) and the fault
# campaign's kill nemesis (consumers of quorum queues go on, nothing lost, none stuck)
@pytest.mark.slow
def test_kill_9_of_the_leaders_node_loses_no_confirmed_message_and_consumers_go_on(cluster):
    ref = cluster.declare("jobs")
    old = leader(cluster, ref)
    old_term = cluster.status(old, ref)["term"]
    payloads = bodies(8000)
    at_kill: dict = {}

    async def body(pub_rt, con_rt):
        pub, con = driver(pub_rt, ref, "p"), driver(con_rt, ref, "c")
        await con.consume("ctag", 300)
        loop = asyncio.get_running_loop()

        async def kill_once(confirmed: int) -> None:
            if not at_kill and confirmed >= 2000:
                at_kill["confirmed"], at_kill["delivered"] = confirmed, len(con.deliveries)
                await loop.run_in_executor(None, cluster.kill, old)
        await publish_all(pub, payloads, kill_once)
        await con.until(lambda: set(payloads) <= set(con.bodies()), 60)
        delivered = con.bodies()
        assert set(payloads) - set(delivered) == set()  # lost = 0
        assert len(delivered) > at_kill["delivered"]  # the consumer kept consuming after the kill
        assert pub.client.switches >= 1 and con.client.switches >= 1
        firsts = [d.body for d in con.deliveries if not d.redelivered]
        assert firsts == sorted(firsts)  # FIFO for one publisher, apart from redeliveries
    with_runtimes(cluster, body, "c1", "c2")
    survivors = cluster.running()
    new = leader(cluster, ref, survivors)
    assert new != old and cluster.status(new, ref)["term"] > old_term

    cluster.start(old)  # recovers from its WAL, then catches up with the new leader
    commit = cluster.status(new, ref)["commit"]
    statuses = until(lambda: agreed(cluster, ref, list(cluster.nodes), commit), "the restarted member caught up")
    assert statuses[old]["recovered"] > 0 and statuses[old]["role"] == "follower"


def test_a_restarted_member_catches_up_by_delta_and_by_snapshot_when_far_behind(cluster):
    ref = cluster.declare("events")
    lead = leader(cluster, ref)
    lagging = next(n for n in cluster.nodes if n != lead)

    async def body(pub_rt, con_rt):
        pub = driver(pub_rt, ref, "p")
        await publish_all(pub, bodies(500))  # kept: nothing is released, the log stays whole
        await asyncio.get_running_loop().run_in_executor(None, cluster.kill, lagging)
        await publish_all(pub, bodies(500, start=500))
    with_runtimes(cluster, body, "c1", "c2")
    cluster.start(lagging)
    commit = cluster.status(lead, ref)["commit"]
    delta = until(lambda: agreed(cluster, ref, list(cluster.nodes), commit), "catch-up by delta")[lagging]
    # every message came as a log entry: a member may snapshot what precedes them (the leader's
    # first no-op), never one of them, as a snapshot installed from the leader would
    first_message = delta["last"] - 999  # the 1,000 publishes are the log's last 1,000 entries
    assert delta["snapshot_index"] < first_message and delta["messages_ready"] == 1000
    assert delta["recovered"] >= 500  # its own 500 from disk, the other 500 from the leader

    async def drain(con_rt):
        con = driver(con_rt, ref, "c")
        await asyncio.get_running_loop().run_in_executor(None, cluster.kill, lagging)
        await con.consume("ctag", 300)
        await con.until(lambda: len(con.deliveries) >= 1000)
        await con.until(lambda: not con.client.consumers["ctag"].held)
    with_runtimes(cluster, drain, "c3")
    snapshot = until(lambda: cluster.status(lead, ref)["snapshot_index"] > delta["last"] and
                     cluster.status(lead, ref)["first"] > delta["last"] + 1 and cluster.status(lead, ref),
                     "the leader compacted past the lagging member")
    cluster.start(lagging)
    caught = until(lambda: agreed(cluster, ref, list(cluster.nodes), snapshot["commit"]),
                   "catch-up by snapshot")[lagging]
    assert caught["snapshot_index"] >= snapshot["snapshot_index"] and caught["messages"] == 0
    assert caught["first"] > delta["last"] + 1  # nothing below the snapshot was sent: it was installed


def test_a_channel_gone_with_unacked_messages_gives_them_back_redelivered(cluster):
    ref = cluster.declare("tasks")
    lead = leader(cluster, ref)

    async def body(pub_rt, lost_rt, other_rt):
        pub, lost = driver(pub_rt, ref, "p"), driver(lost_rt, ref, "gone")
        await lost.consume("a", 10, auto_ack=False)
        await publish_all(pub, bodies(10))
        await lost.until(lambda: len(lost.deliveries) == 10)
        lost.close()
        await lost_rt.close()  # the channel's host dies: no ChannelDown, no acks
        other = driver(other_rt, ref, "o")
        await other.consume("b", 100)
        other_rt.send(Address.parse(ref.members[cluster.nodes.index(lead)]), ChannelsGone("c2/"), sender=other.me)
        await other.until(lambda: len(other.deliveries) == 10)
        assert other.bodies() == bodies(10)
        assert all(d.redelivered and d.delivery_count == 1 for d in other.deliveries)
    with_runtimes(cluster, body, "c1", "c2", "c3")


def test_a_drained_queue_gives_its_segment_files_back(make_cluster):
    # a small WAL rolls over often, so the messages reach segment files
    cluster = make_cluster(host_config={"wal_max_size_bytes": 64 * 1024, "segment_max_entries": 128})
    ref = cluster.declare("bulk")
    leader(cluster, ref)

    def segments() -> dict[str, int]:
        return {n: cluster.ask(n, "disk")[ref.uid]["segments"] for n in cluster.nodes}

    async def body(pub_rt, con_rt):
        pub = driver(pub_rt, ref, "p")
        await publish_all(pub, [b"x" * 200 + p for p in bodies(2000)])
        full = segments()
        assert all(count >= 2 for count in full.values()), full
        con = driver(con_rt, ref, "c")
        await con.consume("ctag", 300)
        await con.until(lambda: len(con.deliveries) >= 2000)
        await con.until(lambda: not con.client.consumers["ctag"].held)
    with_runtimes(cluster, body, "c1", "c2")
    until(lambda: set(segments().values()) == {0}, "every member deleted its segments")


def test_a_single_node_member_recovers_everything_confirmed_after_kill_9(make_cluster):
    cluster = make_cluster(nodes=("n1",), host_config={"wal_max_size_bytes": 64 * 1024,
                                                        "segment_max_entries": 100})
    ref = cluster.declare("solo")
    leader(cluster, ref)
    payloads = bodies(3000)

    async def publish(pub_rt):
        await publish_all(driver(pub_rt, ref, "p"), payloads)
    with_runtimes(cluster, publish, "c1")
    cluster.kill("n1")
    cluster.start("n1")
    st = until(lambda: (s := cluster.status("n1", ref)) and s["role"] == "leader" and s["applied"] >= s["recovered"]
               and s, "the member recovered and leads again")
    assert st["recovered"] >= 3000 and st["messages_ready"] == 3000, st

    async def consume(con_rt):
        con = driver(con_rt, ref, "c")
        await con.consume("ctag", 300)
        await con.until(lambda: len(con.deliveries) >= 3000)
        assert con.bodies() == payloads
    with_runtimes(cluster, consume, "c2")


def test_a_deleted_member_leaves_no_files_and_stays_deleted_across_a_restart(make_cluster):
    cluster = make_cluster(nodes=("n1",))
    ref = cluster.declare("gone")
    leader(cluster, ref)

    async def publish(pub_rt):
        await publish_all(driver(pub_rt, ref, "p"), bodies(100))
    with_runtimes(cluster, publish, "c1")
    cluster.delete(ref)
    members_dir = cluster.procs["n1"].data_dir / "quorum" / "members"
    assert list(members_dir.iterdir()) == []
    cluster.kill("n1")  # its entries are still in the WAL file, which has not rolled over
    cluster.start("n1")
    assert cluster.ask("n1", "members") == [] and list(members_dir.iterdir()) == []
    again = cluster.declare("gone")  # the same name again: a new incarnation, empty
    st = until(lambda: cluster.leader_of(again) and cluster.status("n1", again), "the new queue")
    assert st["messages"] == 0


def test_message_ttl_expires_messages_through_the_leaders_timer(cluster):
    ref = cluster.declare("ttl", arguments={"x-queue-type": "quorum", "x-message-ttl": 300})
    leader(cluster, ref)

    async def publish(pub_rt):
        await publish_all(driver(pub_rt, ref, "p"), bodies(20))
    with_runtimes(cluster, publish, "c1")  # 20 confirmed: they are in the queue
    # nobody consumes: the leader's timer proposes a Tick once the head expires, on every member
    until(lambda: all(cluster.status(n, ref)["messages"] == 0 for n in cluster.nodes), "the messages expired")


# slow: quorum_features/test_declare.py's test_group_size_and_the_client_local_leader[three] checks
# through pika that the declaring node's member leads (client-local); this one proves it for every node
# with a clock so slow that no other member could have asked first
@pytest.mark.slow
def test_the_leader_locators_node_asks_for_votes_first(make_cluster):
    # elections after 5-10 s of silence: the members start one control ask apart, and the chosen
    # node's member asks at its first tick (50 ms), long before any other member would
    cluster = make_cluster(host_config={"tick_ms": 50, "settings": {"election_ticks": 100, "heartbeat_ticks": 2}})
    refs = {node: cluster.declare(f"placed-{node}", leader=node) for node in cluster.nodes}
    for node, ref in refs.items():
        assert leader(cluster, ref) == node


def test_a_member_that_crashes_takes_its_host_down_and_comes_back_from_the_wal(cluster):
    """The runtime removes an actor whose receive raised; a quorum member so removed was still
    ticked by its host, deaf for good (found looking at what faults could do to members)."""
    ref = cluster.declare("crashy")
    lead = leader(cluster, ref)
    victim = next(n for n in cluster.nodes if n != lead)
    pid = cluster.ask(victim, "pid")

    async def body(pub_rt):
        pub = driver(pub_rt, ref, "p")
        await publish_all(pub, bodies(100))
        # a peer message its Raft core cannot take (a term that is no number) makes receive raise
        pub_rt.send(Address.parse(ref.members[cluster.nodes.index(victim)]), RequestVote("x", "c1/x", 0, 0),
                    sender=pub.me)
        await asyncio.get_running_loop().run_in_executor(
            None, lambda: until(lambda: _pid(cluster, victim) not in (None, pid), "the victim's host restarted"))
        await publish_all(pub, bodies(100, start=100))
    with_runtimes(cluster, body, "c1")
    commit = cluster.status(cluster.leader_of(ref), ref)["commit"]
    statuses = until(lambda: agreed(cluster, ref, list(cluster.nodes), commit), "every member applied")
    assert statuses[victim]["messages"] == 200


def _pid(cluster, node: str) -> int | None:
    try:
        return cluster.ask(node, "pid", timeout=poll_ask_s)
    except (RuntimeError, ConnectionError, TimeoutError, OSError):
        return None
