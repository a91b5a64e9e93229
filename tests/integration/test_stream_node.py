"""A stream on a node of its own: what operators see, kill -9 and restart, retention by segment.

One node for the module: `warrenctl list_queues` shows the stream's type and count,
`warrenctl stream_status` its offsets and segments, the management API and Prometheus its rows; every confirmed message is read back from
"first" after kill -9 of the node and a restart on the same data dir; a stream with small
segments and x-max-length-bytes drops whole segments from its head, and a consumer from "first"
starts at the first offset kept.
"""
from __future__ import annotations

import json
import urllib.request

import pika
import pytest

from actors.runtime.ports import stable_port
from scripts.local_cluster import start_node
from tests.integration.admin_support import ok
from tests.integration.stream_clients import STREAM, read_first
from tests.waiting import until

pytestmark = pytest.mark.integration

@pytest.fixture(scope="module")
def node(tmp_path_factory):
    mgmt, prometheus = stable_port(), stable_port()
    n = start_node(tmp_path_factory.mktemp("stream-node") / "n1", "--management-port", str(mgmt),
                   "--prometheus-port", str(prometheus))
    n.http = (mgmt, prometheus)
    yield n
    n.stop()


def publish(url: str, name: str, n: int, args: dict | None = None, size: int = 10) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    ch.queue_declare(name, durable=True, arguments={**STREAM, **(args or {})})
    ch.confirm_delivery()
    for i in range(n):
        ch.basic_publish("", name, str(i).encode().ljust(size, b"."))
    conn.close()


def table(text: str) -> list[list[str]]:
    return [line.split("\t") for line in text.strip().splitlines()]


def test_listing_status_and_kill_9(node):
    publish(node.url, "ops", 30)
    rows = table(ok(node, "list_queues", "name", "type", "messages"))
    assert ["ops", "stream", "30"] in rows
    status = table(ok(node, "stream_status", "ops"))
    assert status[1] == ["role", "node", "offset", "committed_offset", "first_offset", "readers", "segments",
                         "epoch"]
    assert status[2][0] == "writer" and status[2][2:] == ["29", "29", "0", "0", "1", "1"]
    _http_rows(node)
    node.kill()
    mgmt, prometheus = node.http
    restarted = start_node(node.data_dir, "--management-port", str(mgmt), "--prometheus-port", str(prometheus),
                           port=node.port, cluster_port=node.cluster_port)
    node.__dict__.update({k: v for k, v in restarted.__dict__.items() if k != "http"})  # the restarted one from here on
    got = read_first(node.url, "ops", 30)
    assert got == [(i, str(i).encode().ljust(10, b".")) for i in range(30)]


def _http_rows(node) -> None:
    """The management API's row (type, leader, members) and the Prometheus per-queue rows."""
    mgmt, prometheus = node.http

    def queue_row():
        request = urllib.request.Request(f"http://127.0.0.1:{mgmt}/api/queues/%2F/ops")
        request.add_header("Authorization", "Basic Z3Vlc3Q6Z3Vlc3Q=")  # guest:guest
        row = json.loads(urllib.request.urlopen(request, timeout=5).read())
        return row if row.get("messages") == 30 else None  # the next statistics sample
    row = until(queue_row, "the stream's row in /api/queues")
    assert (row["type"], row["durable"], row["members"], row["leader"]) == ("stream", True, [row["node"]], row["node"])
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{prometheus}/metrics/per-object", timeout=5).read().decode()
    assert 'rabbitmq_queue_messages{queue="ops",vhost="/"} 30.0' in metrics


def test_retention_drops_whole_segments(node):
    """1 KiB messages, 4 KiB segments, at most 8 KiB kept: the oldest segments go, never the one
    being written, and a consumer from first starts where the log now starts."""
    args = {"x-stream-max-segment-size-bytes": 4096, "x-max-length-bytes": 8192}
    publish(node.url, "kept", 40, args, size=1024)
    status = table(ok(node, "stream_status", "kept"))[2]
    first, segments = int(status[4]), int(status[6])
    assert first > 0 and 1 < segments <= 4
    got = read_first(node.url, "kept", 40 - first)
    assert [o for o, _ in got] == list(range(first, 40))


def test_a_policy_limits_a_stream(node):
    """A max-length-bytes policy applied to streams takes effect at once on an existing stream."""
    publish(node.url, "pol", 40, {"x-stream-max-segment-size-bytes": 4096}, size=1024)
    assert table(ok(node, "stream_status", "pol"))[2][4] == "0"
    ok(node, "set_policy", "--apply-to", "streams", "small", "^pol$", '{"max-length-bytes": 8192}')

    def first_offset() -> int:
        return int(table(ok(node, "stream_status", "pol"))[2][4])
    until(first_offset, "the policy's retention")
    assert int(table(ok(node, "stream_status", "pol"))[2][6]) <= 4


def test_a_deleted_stream_leaves_no_files(node):
    publish(node.url, "gone", 5)

    def dirs() -> list:
        return [d for d in (node.data_dir / "streams").glob("*/*") if (d / "NAME").read_text().split("\n")[1] == "gone"]
    assert len(dirs()) == 1 and list(dirs()[0].glob("*.segment"))
    conn = pika.BlockingConnection(pika.URLParameters(node.url))
    assert conn.channel().queue_delete("gone").method.message_count == 0
    conn.close()
    assert dirs() == []
