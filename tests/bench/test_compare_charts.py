"""The comparison runs' charts and the locust figures they are drawn from (no broker needed)."""
from __future__ import annotations

import json

from bench.compare_charts import durable_chart, locust_chart, perf_chart
from bench.compare_locust import row, table

PNG = b"\x89PNG\r\n\x1a\n"


def perf_result(rate: float) -> dict:
    lat = {"p50": 1.5, "p95": 3.0, "p99": 4.0}
    return {"summary": {"published_rate": rate, "consumed_rate": rate - 1, "confirmed_rate": rate, "latency_ms": lat},
            "samples": [{"elapsed_s": t, "published_rate": rate, "consumed_rate": rate, "latency_ms": lat}
                        for t in (1.0, 2.0, 3.0)], "errors": []}


def test_perf_and_durable_charts_are_pngs(tmp_path):
    paths = []
    for broker in ("warren", "rabbitmq"):
        for scenario in ("A", "B"):
            path = tmp_path / f"{broker}-{scenario}.json"
            path.write_text(json.dumps(perf_result(1000.0)))
            paths.append(path)
    assert perf_chart(paths, tmp_path / "compare.png").read_bytes()[:8] == PNG
    summary = perf_result(500.0)["summary"]
    durable = {"throughput": [["warren", 1024, summary], ["rabbitmq", 1024, summary]],
               "backlog": [{"broker": b, "mode": "default", "messages": 1000, "publish_rate": 10, "drain_rate": 20,
                            "pss_before_mb": 100, "peak_pss_mb": 120} for b in ("warren", "rabbitmq")]}
    assert durable_chart(durable, tmp_path / "durable.png").read_bytes()[:8] == PNG


def test_locust_rows_take_percentiles_from_the_histogram():
    # locust's JSON has the histogram's keys as strings: "10" sorts before "9" unless they are numbers
    entry = {"name": "steady", "method": "publish", "num_requests": 100, "num_failures": 2,
             "total_response_time": 250.0, "start_time": 100.0, "last_request_timestamp": 110.0,
             "response_times": {"1": 50, "2": 40, "9": 9, "10": 1}}
    r = row("warren", "steady", entry)
    assert (r["requests"], r["failures"], r["rps"], r["avg_ms"]) == (100, 2, 10.0, 2.5)
    assert (r["p50"], r["p95"], r["p99"]) == (2, 9, 10)  # locust's rule: the time that share is at or under
    assert "| steady | publish | warren | 10 | 2 | 2.5 | 2.0 | 9.0 | 10.0 |" in table([r])


def test_locust_chart_is_a_png(tmp_path):
    rows = [{"broker": b, "scenario": "steady", "type": t, "name": "steady", "rps": 100.0, "avg_ms": 0.5,
             "p50": 0, "p95": 1, "p99": 2} for b in ("warren", "rabbitmq") for t in ("publish", "consume")]
    assert locust_chart(rows, tmp_path / "locust.png").read_bytes()[:8] == PNG
