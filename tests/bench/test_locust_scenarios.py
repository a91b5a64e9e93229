"""The locust scenarios, headless against a real warren node: no failures, and the counts locust
reports add up with what the node holds afterwards (published = consumed + left in the queue)."""
from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pika
import pytest

from tests.integration.nodes import start_node

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
LOCUSTFILE = ROOT / "bench" / "locust" / "locustfile.py"
run_timeout_s = 90


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    n = start_node(tmp_path_factory.mktemp("locust-node"))
    yield n
    n.stop()


def run(node, tmp_path, scenario: str, seconds: int, *extra: str) -> tuple[str, dict[tuple[str, str], dict]]:
    """Run one scenario; its queue prefix and locust's final stats by (request type, name)."""
    prefix = f"t{uuid.uuid4().hex[:6]}."
    out = tmp_path / scenario  # locust adds .json
    done = subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "-u", "4", "-r", "4",
         "-t", f"{seconds}s", "--host", node.url, "--scenario", scenario, "--queue-prefix", prefix,
         "--json-file", str(out), "--loglevel", "WARNING", *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=run_timeout_s)
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    # the final figures: locust writes its CSVs on a timer, the last one before stopping users ends
    return prefix, {(e["method"], e["name"]): e for e in json.loads(out.with_suffix(".json").read_text())}


def count(rows, kind: str, name: str) -> int:
    """Requests of this kind in the run (none: 0). How many a run makes depends on the machine's
    load, so tests check that a scenario ran and that its counts agree with the node, not a volume."""
    row = rows.get((kind, name))
    return row["num_requests"] if row else 0


def assert_no_failures(rows) -> None:
    failed = {k: r["num_failures"] for k, r in rows.items() if r["num_failures"]}
    assert not failed, failed


def depth(node, queue: str) -> int:
    with pika.BlockingConnection(pika.URLParameters(node.url)) as connection:
        return connection.channel().queue_declare(queue, passive=True).method.message_count


def test_steady_publishes_and_consumes_with_counts_the_node_agrees_with(node, tmp_path):
    prefix, rows = run(node, tmp_path, "steady", 4)
    assert_no_failures(rows)
    published, consumed = count(rows, "publish", "steady"), count(rows, "consume", "steady")
    assert published > 0
    assert published == consumed + depth(node, f"{prefix}steady")


def test_fanout_delivers_each_publish_once_per_queue(node, tmp_path):
    prefix, rows = run(node, tmp_path, "fanout", 3, "--fanout-queues", "5")
    assert_no_failures(rows)
    published = count(rows, "publish", "fanout")
    assert published > 0
    left = sum(depth(node, f"{prefix}fanout.{i}") for i in range(5))
    assert count(rows, "consume", "fanout") + left == 5 * published


def test_rpc_calls_are_each_served_once(node, tmp_path):
    prefix, rows = run(node, tmp_path, "rpc", 3)
    assert_no_failures(rows)
    assert count(rows, "rpc", "rpc") > 0
    assert count(rows, "rpc", "rpc") == count(rows, "serve", "rpc")
    assert depth(node, f"{prefix}rpc") == 0


def test_many_small_queues(node, tmp_path):
    # each user declares its queues first: a run long enough for a loaded machine to get past them
    _prefix, rows = run(node, tmp_path, "small_queues", 6, "--small-queues", "10")
    assert_no_failures(rows)
    assert count(rows, "declare", "small_queues") == 4 * 10
    assert count(rows, "publish", "small_queues") > 0
    assert count(rows, "consume", "small_queues") <= count(rows, "publish", "small_queues")


def test_a_long_queue_is_filled_then_worked(node, tmp_path):
    prefix, rows = run(node, tmp_path, "long_queue", 3, "--long-queue-backlog", "3000")
    assert_no_failures(rows)
    filled = rows[("fill", "long_queue")]["total_content_length"] // 1024
    assert filled == 3000
    published, consumed = count(rows, "publish", "long_queue"), count(rows, "consume", "long_queue")
    assert filled + published == consumed + depth(node, f"{prefix}long")


def test_quorum_and_classic_side_by_side(node, tmp_path):
    prefix, rows = run(node, tmp_path, "quorum", 3)
    assert_no_failures(rows)
    for kind in ("quorum", "classic"):
        published = count(rows, "publish", kind)
        assert published > 0
        assert published == count(rows, "consume", kind) + depth(node, f"{prefix}{kind}")
