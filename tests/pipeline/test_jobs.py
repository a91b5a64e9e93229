"""The example jobs in pipeline/jobs, on the shared local SparkSession and the test node."""
from __future__ import annotations

import json

import pika
import pytest

from tests.pipeline.test_source import channel, queue_state, settled, unique

pytest.importorskip("pyspark", reason="the pipeline extra is not installed (scripts/setup installs it)")
from pipeline.jobs import bench_report, publish_dataframe, queue_to_parquet  # noqa: E402 - needs pyspark

pytestmark = pytest.mark.integration
minute_s = 1_700_000_040  # 2023-11-14 22:14:00 UTC, the start of a minute


def test_queue_to_parquet_writes_final_per_minute_aggregates(spark, node, tmp_path):
    queue = unique("minutes")
    connection, ch = channel(node.url)
    with connection:
        ch.queue_declare(queue)
        ch.confirm_delivery()
        for i in range(30):  # 30 messages in one minute, bodies of 1..30 bytes
            ch.basic_publish("", queue, b"x" * (i + 1), pika.BasicProperties(timestamp=minute_s + i))
        # ten minutes later: moves the watermark past the first minute, which is then final
        ch.basic_publish("", queue, b"late", pika.BasicProperties(timestamp=minute_s + 600))
    query = queue_to_parquet.start(spark, node.url, queue, str(tmp_path / "out"), str(tmp_path / "ck"),
                                   once=True, batch_max=20)
    query.awaitTermination()
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    assert len(rows) == 1  # the later minute is still open: not written yet
    row = rows[0]
    assert int(row.minute.timestamp()) == minute_s and row.routing_key == queue
    assert (row.messages, row.body_bytes, row.body_min, row.body_max) == (30, sum(range(1, 31)), 1, 30)
    assert settled(node.url, queue) == 0


def test_publish_dataframe_sends_each_row_as_json(spark, node, tmp_path):
    exchange = unique("orders")
    connection, ch = channel(node.url)
    with connection:
        ch.exchange_declare(exchange, "direct")
        for region in ("eu", "us"):
            ch.queue_declare(f"{exchange}.{region}")
            ch.queue_bind(f"{exchange}.{region}", exchange, region)
    source = tmp_path / "orders.json"
    source.write_text("".join(json.dumps({"id": i, "region": "eu" if i % 4 else "us"}) + "\n" for i in range(40)))
    df = publish_dataframe.read(spark, str(source), "json")
    assert publish_dataframe.publish(df, node.url, exchange, routing_key_column="region") == 40
    assert queue_state(node.url, f"{exchange}.eu")[0] == 30
    assert queue_state(node.url, f"{exchange}.us")[0] == 10
    connection, ch = channel(node.url)
    with connection:
        _, props, body = ch.basic_get(f"{exchange}.us", auto_ack=True)
    assert props.content_type == "application/json"
    assert json.loads(body)["region"] == "us" and json.loads(body)["id"] % 4 == 0


LOCUST_STATS = """Type,Name,Request Count,Failure Count,Median Response Time,Average Response Time,Min Response Time,Max Response Time,Average Content Size,Requests/s,Failures/s,50%,66%,75%,80%,90%,95%,98%,99%,99.9%,99.99%,100%
consume,steady,7246,0,2,2.0791,0.47,18.1,1024.0,1448.5,0.0,2,2,2,3,4,5,6,7,10,18,18
publish,steady,7247,3,1,1.2803,0.40,12.6,1024.0,1448.7,0.6,1,1,1,1,2,3,4,5,8,13,13
,Aggregated,14493,3,1,1.6797,0.40,18.1,1024.0,2897.2,0.6,1,2,2,2,3,4,5,6,9,13,18
"""
HISTORY_HEADER = ("Timestamp,User Count,Type,Name,Requests/s,Failures/s,50%,66%,75%,80%,90%,95%,98%,99%,99.9%,"
                  "99.99%,100%,Total Request Count,Total Failure Count,Total Median Response Time,"
                  "Total Average Response Time,Total Min Response Time,Total Max Response Time,"
                  "Total Average Content Size\n")


def locust_history() -> str:
    rows = [HISTORY_HEADER, "1795553541,0,,Aggregated,0,0,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,0,0,0,0,0,0,0\n"]
    for t in range(1795553542, 1795553548):
        for kind in ("consume", "publish"):
            rows.append(f"{t},4,{kind},steady,1400,0,1,1,1,1,2,3,4,5,8,13,13,100,0,1,1.2,0.4,12,1024\n")
    return "".join(rows)


def test_bench_report_reads_logs_flow_and_locust_and_draws_them(spark, tmp_path):
    (tmp_path / "run_stats.csv").write_text(LOCUST_STATS)
    (tmp_path / "run_stats_history.csv").write_text(locust_history())
    log = tmp_path / "node.log"
    log.write_text("\n".join([
        json.dumps({"timestamp": "2026-11-24T20:28:13.5Z", "level": "info", "event": "node.ready"}),
        json.dumps({"timestamp": 1795553542.2, "level": "warning", "event": "memory.alarm_set"}),
        "2026-11-24 20:28:14 [info     ] connection.accepted            host=conn0 owner=conn0:1",
        "++++ Actor System gen (3, 10) started",  # neither JSON nor structlog: skipped
        "{not json",
    ]) + "\n")
    flow = tmp_path / "flow.jsonl"
    flow.write_text("".join(json.dumps(s) + "\n" for s in [
        {"ts": 1795553542.0, "kind": "connection", "name": "c1", "state": "running", "flow_share": 0.0},
        {"ts": 1795553542.0, "kind": "queue", "name": "q1", "state": "flow", "flow_share": 0.5},
        {"ts": 1795553543.0, "kind": "connection", "name": "c1", "state": "flow", "flow_share": 0.25},
        {"ts": 1795553543.0, "kind": "queue", "name": "q1", "state": "flow", "flow_share": 0.75},
        # a snapshot line as `warrenctl flow --formatter json` prints it
        {"ts": 1795553544.0, "links": [{"kind": "queue", "name": "q1", "state": "flow", "flow_share": 1.0,
                                        "downstream": [], "blocked_on": []}],
         "silent_hosts": [], "bottleneck": None, "line": "bottleneck: none"},
        {"ts": 1795553543.0, "bottleneck": "queue q1"},  # no state: not a link sample
    ]))
    out = tmp_path / "report"
    text = bench_report.report(spark, out, str(tmp_path / "run"), [str(log)], str(flow)).read_text()
    assert "| publish | steady | 7247 | 3 | 1.28 | 1 | 3 | 5 | 1448.7 |" in text
    assert "| queue | flow | 3 | 100.0% | 0.75 |" in text
    assert "| connection | flow | 1 | 50.0% | 0.25 |" in text
    assert "| info | 2 |" in text and "| warning | 1 |" in text
    assert "memory.alarm_set" in text
    for png in ("throughput.png", "latency.png", "flow.png", "log.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"]({png})" in text


def test_bench_report_says_what_it_did_not_get(spark, tmp_path):
    text = bench_report.report(spark, tmp_path / "r", str(tmp_path / "nothing"), [str(tmp_path / "none.log")],
                               str(tmp_path / "flow.jsonl")).read_text()
    assert "no locust CSVs" in text and "no flow samples" in text and "no node logs" in text
    assert not list((tmp_path / "r").glob("*.png"))
