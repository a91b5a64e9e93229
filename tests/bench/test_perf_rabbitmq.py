"""Short runs of the perf tool against RabbitMQ: nothing lost, every publish confirmed, latency
measured, and broker refusals reported with their reply code and a non-zero exit."""

import json

import pika
import pytest

from bench.perf import main
from tests.bench.conftest import rabbitmqctl

pytestmark = pytest.mark.integration


def run(tmp_path, uri, *args):
    out = tmp_path / "perf.json"
    code = main(["--uri", uri, "--json", str(out), "--warmup", "1", "--drain", "5", *args])
    return code, json.loads(out.read_text()) if out.exists() else None


def test_auto_ack_consumes_everything_published(tmp_path, oracle_uri):
    code, result = run(tmp_path, oracle_uri, "--time", "3", "--auto-ack", "--rate", "3000",
                       "--producers", "1", "--consumers", "2")
    assert code == 0 and result["errors"] == []
    s = result["summary"]
    assert s["published"] > 0  # a volume depends on the machine's load: the accounting is what is checked
    assert s["consumed"] == s["published"]
    assert s["confirmed"] == 0 and s["nacked"] == 0
    for p in ("p50", "p95", "p99"):
        assert s["latency_ms"][p] is not None and s["latency_ms"][p] >= 0
    assert s["latency_samples"] > 0 and s["warmup_excluded"]
    assert len(result["samples"]) >= 2
    assert all({"elapsed_s", "published_rate", "consumed_rate", "latency_ms"} <= set(x)
               for x in result["samples"])


def test_confirms_and_manual_multi_ack(tmp_path, oracle_uri):
    code, result = run(tmp_path, oracle_uri, "--time", "3", "--confirm", "200", "--prefetch", "100",
                       "--multi-ack", "10", "--size", "2000", "--persistent", "--durable",
                       "--queue", "perf-test-confirms")
    assert code == 0 and result["errors"] == []
    s = result["summary"]
    assert s["published"] > 0  # a volume depends on the machine's load: the accounting is what is checked
    assert s["confirmed"] == s["published"] and s["nacked"] == 0
    assert s["consumed"] == s["published"]
    assert s["latency_ms"]["p99"] is not None
    with pika.BlockingConnection(pika.URLParameters(oracle_uri)) as conn:
        ch = conn.channel()
        assert ch.queue_declare("perf-test-confirms", passive=True).method.message_count == 0
        ch.queue_delete("perf-test-confirms")


def test_unroutable_mandatory_publishes_are_returned_and_confirmed(tmp_path, oracle_uri):
    code, result = run(tmp_path, oracle_uri, "--time", "2", "--consumers", "0", "--predeclared",
                       "--exchange", "amq.direct", "--routing-key", "perf-nowhere", "--mandatory",
                       "--confirm", "50", "--rate", "500")
    assert code == 0
    s = result["summary"]
    assert s["published"] > 100
    assert s["returned"] == s["published"] == s["confirmed"]


def test_broker_refusal_is_reported_with_its_reply_code(tmp_path, oracle_uri, capsys):
    code, result = run(tmp_path, oracle_uri, "--time", "2", "--predeclared",
                       "--queue", "perf-test-no-such-queue")
    assert code != 0
    assert any("404" in e and "NOT_FOUND" in e for e in result["errors"])
    assert "NOT_FOUND" in capsys.readouterr().err


def test_memory_alarm_blocks_publishing(tmp_path, oracle):
    uri, workdir = oracle
    if workdir is None:
        pytest.skip("oracle was started by hand: no cookie to run rabbitmqctl with")
    rabbitmqctl(workdir, "set_vm_memory_high_watermark", "0.00001")
    try:
        code, result = run(tmp_path, uri, "--time", "2", "--auto-ack", "--rate", "1000",
                           "--drain", "1")
    finally:
        rabbitmqctl(workdir, "set_vm_memory_high_watermark", "0.4")
    assert code == 0
    # RabbitMQ blocks a connection at its first publish, so at most one burst gets through.
    assert result["summary"]["published"] <= 256
    assert result["samples"][-1]["blocked_producers"] == 1
