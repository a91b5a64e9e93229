"""A node with `quorum_hosts = 2` (issue 36 item 1): its quorum queue members spread over two quorum
hosts, the node's one WAL in a process of its own, and nothing confirmed lost when either kind of
process, or both at once, is killed -9 under confirmed publishing: the supervisor restarts it, a quorum host recovers
its members from the WAL and its segments, a WAL restart makes the hosts send again what it had not
acknowledged. A small `raft.wal_max_size_bytes` makes the WAL roll over into the members' segments
(in both hosts) during the run. Real node, real pika clients."""
from __future__ import annotations

import threading

import pika
import pika.exceptions
import psutil
import pytest

from actors.placement import quorum_kind
from actors.runtime.client import control
from scripts.warrenctl import Node as CtlNode, flow_snapshot
from tests.integration.nodes import start_node
from tests.waiting import poll_ask_s, until

pytestmark = pytest.mark.integration

QUORUM = {"x-queue-type": "quorum"}
PERSISTENT = pika.BasicProperties(delivery_mode=2)
QUEUES = 4


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    data = tmp_path_factory.mktemp("qhosts") / "data"
    conf = data.with_name("qhosts.conf")
    conf.write_text("quorum_hosts = 2\nraft.wal_max_size_bytes = 262144\n")
    n = start_node(data, "--config", str(conf))
    yield n
    n.stop()


def ask(node, host: str, op: str, args: dict | None = None, timeout: float = 10):
    return control(int((node.data_dir / "admin_port").read_text()), host, op, args or {}, timeout)


def queues_on_both_hosts(node) -> list[str]:
    """Declare quorum queues until each quorum host leads some (placement is by the queue's uid)."""
    names: list[str] = []
    with pika.BlockingConnection(pika.URLParameters(node.url)) as conn:
        ch = conn.channel()
        i = 0
        while len(names) < QUEUES or len({host_of(node, q) for q in names}) < 2:
            name = f"qq{i}"
            ch.queue_declare(name, durable=True, arguments=QUORUM)
            names.append(name)
            i += 1
    return names


def host_of(node, queue: str) -> str:
    for kind in ("quorum", "quorum1"):
        if ask(node, kind, "status", {"queue": queue}):
            return kind
    raise AssertionError(f"{queue} on no quorum host")


class Publisher(threading.Thread):
    """Publishes with confirms to every queue in turn until stopped; remembers what was confirmed."""

    def __init__(self, node, queues: list[str]) -> None:
        super().__init__(daemon=True)
        self.node, self.queues = node, queues
        self.confirmed: dict[str, list[bytes]] = {q: [] for q in queues}
        self.stop = threading.Event()
        self.sent = 0

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                with pika.BlockingConnection(pika.URLParameters(self.node.url)) as conn:
                    ch = conn.channel()
                    ch.confirm_delivery()
                    while not self.stop.is_set():
                        q = self.queues[self.sent % len(self.queues)]
                        body = b"%s:%d:" % (q.encode(), self.sent) + b"x" * 900
                        self.sent += 1
                        ch.basic_publish("", q, body, PERSISTENT, mandatory=True)
                        self.confirmed[q].append(body)  # basic_publish returned: confirmed
            except (pika.exceptions.AMQPError, OSError):
                pass  # a publish not confirmed is not counted; connect again

    def total(self) -> int:
        return sum(map(len, self.confirmed.values()))


def kill_and_wait(node, kinds: tuple[str, ...], publisher: Publisher) -> None:
    """kill -9 of `kinds` at once, under confirmed publishing; until they serve again."""
    before = publisher.total()
    until(lambda: publisher.total() >= before + 200, "confirms before the kill", timeout_s=60)
    pids = {kind: ask(node, kind, "pid") for kind in kinds}
    for pid in pids.values():
        psutil.Process(pid).kill()
    for kind, pid in pids.items():
        until(lambda: _pid(node, kind) not in (None, pid), f"{kind} restarted", timeout_s=60)
    after = publisher.total()
    until(lambda: publisher.total() >= after + 200,
          lambda: f"confirms again after {kinds} restarted (at {publisher.total() - after}): {_state(node)}", timeout_s=60)


def _state(node) -> str:
    """What a stalled run shows: each quorum host's members and WAL link, the WAL's counters."""
    out = {}
    for kind in ("quorum", "quorum1", "wal"):
        try:
            out[kind] = {"wal": ask(node, kind, "wal_stats", timeout=poll_ask_s)}
            if kind != "wal":
                out[kind]["members"] = {u: {k: v for k, v in st.items() if k in (
                    "queue", "role", "term", "commit", "applied", "last", "written", "quiet", "asleep", "messages")} for u, st in ask(node, kind, "status", timeout=poll_ask_s).items()}
        except Exception as e:  # a host that does not answer says so
            out[kind] = repr(e)
    for kind in ("conn0", "conn1"):
        try:
            out[kind] = [r for r in ask(node, kind, "flow_links", timeout=poll_ask_s) if r["kind"] != "connection"]
        except Exception as e:
            out[kind] = repr(e)
    return repr(out)


def _pid(node, kind: str) -> int | None:
    try:
        return ask(node, kind, "pid", timeout=poll_ask_s)
    except Exception:
        return None


def consume_all(node, queue: str, expected: list[bytes]) -> list[bytes]:
    got: list[bytes] = []
    with pika.BlockingConnection(pika.URLParameters(node.url)) as conn:
        ch = conn.channel()
        ch.basic_qos(prefetch_count=500)
        for method, _props, body in ch.consume(queue, inactivity_timeout=10):
            if method is None:
                break
            got.append(body)
            ch.basic_ack(method.delivery_tag)
            if len(got) >= len(expected) and ch.get_waiting_message_count() == 0:
                break
        ch.cancel()
    return got


def test_nothing_confirmed_is_lost_when_a_quorum_host_or_the_wal_is_killed(node) -> None:
    queues = queues_on_both_hosts(node)
    assert {host_of(node, q) for q in queues} == {"quorum", "quorum1"}
    publisher = Publisher(node, queues)
    publisher.start()
    try:  # the WAL rolls over into both hosts' segments before the kills and between them
        until(lambda: ask(node, "wal", "wal_stats")["rollovers"] >= 1, "a rollover", timeout_s=60)
        for kinds in (("quorum1",), ("wal",), ("quorum",), ("wal", "quorum1")):
            kill_and_wait(node, kinds, publisher)
    finally:
        publisher.stop.set()
        publisher.join(30)
    for q in queues:
        got = set(consume_all(node, q, publisher.confirmed[q]))
        missing = [b[:20] for b in publisher.confirmed[q] if b not in got]
        assert not missing, f"{q}: {len(missing)} confirmed messages lost, first {missing[:3]}"


def test_status_and_flow_list_every_quorum_host_and_the_wal(node) -> None:
    queues_on_both_hosts(node)  # (declared again, if the test above ran: the same queues)
    status = ask(node, "node", "status")
    assert status["quorum_hosts"] == ["quorum", "quorum1", "wal"]
    processes = {p["name"] for p in ask(node, "$supervisor", "node_status")["processes"]}  # warrenctl status
    assert {"quorum", "quorum1", "wal"} <= processes
    # warrenctl flow: the leaders of both quorum hosts, each host's link to the WAL, the WAL itself
    snap = flow_snapshot(CtlNode(int((node.data_dir / "admin_port").read_text()), None))
    rows = {(r["kind"], r["name"].split("/")[0].rpartition(":")[2]) for r in snap.rows}
    assert {("queue", "quorum"), ("queue", "quorum1"), ("wal", "quorum"), ("wal", "quorum1"), ("wal", "wal")} <= rows
    assert not snap.silent


def test_placement_is_by_the_queue_uid_hash_slot(node) -> None:
    """The member a node reports for a queue is on the host its hash slot names."""
    queues_on_both_hosts(node)
    uids = list(ask(node, "quorum1", "status"))
    assert uids and all(quorum_kind(uid, 2) == "quorum1" for uid in uids)
