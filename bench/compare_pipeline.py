"""The Spark `amqp` source and sink (pipeline/) against warren and Debian's RabbitMQ, in one run. Prints;
not a test.

    .venv/bin/python -m bench.compare_pipeline [--messages 100000] [--size 1024] [--master local[2]]
        [--partitions 2] [--batch 10000] [--no-rabbitmq] [--warren-port P] [--rabbit-port P]

For each broker (started fresh in a temporary directory, stopped at the end):
1. sink: a DataFrame of N rows with SIZE-byte bodies (spark.range, `partitions` partitions) written to
   the default exchange, routed to one queue, with confirms (window 1000) and mandatory; rate =
   N / the save()'s wall time. The queue must then hold N messages.
2. source: a streaming query (Trigger.AvailableNow, maxMessagesPerBatch BATCH) reads those N
   messages into Spark's noop sink, acking each batch after its commit; rates = N / the query's wall
   time (start to end: planning, the JVM's batches, the acks) and N / the sum of its batches'
   triggerExecution times. The queue must be empty afterwards.
Each measurement runs twice on one SparkSession; the second (warm JVM and Python workers) is
reported.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pika

from bench.compare_brokers import ROOT, Broker, Rabbit, Warren, add_broker_options

rounds = 2
settle_timeout_s = 60.0


def depth(url: str, queue: str) -> tuple[int, int]:
    with pika.BlockingConnection(pika.URLParameters(url)) as connection:
        ok = connection.channel().queue_declare(queue, passive=True).method
        return ok.message_count, ok.consumer_count


def wait_depth(url: str, queue: str, want: int) -> int:
    """The queue's ready count once it is `want` and no consumer is left, or when time runs out."""
    deadline = time.monotonic() + settle_timeout_s
    while True:
        count, consumers = depth(url, queue)
        if (count == want and consumers == 0) or time.monotonic() > deadline:
            return count
        time.sleep(0.1)


def sink(spark, url: str, queue: str, n: int, size: int, partitions: int) -> float:
    from pyspark.sql import functions as F
    df = spark.range(0, n, 1, partitions).select(F.expr(f"repeat('x', {size})").cast("binary").alias("body"))
    df.cache().count()  # rows built before the clock starts: the write is what is measured
    started = time.monotonic()
    df.write.format("amqp").mode("append").option("url", url).option("routing_key", queue).save()
    elapsed = time.monotonic() - started
    df.unpersist()
    got = wait_depth(url, queue, n)
    if got != n:
        raise SystemExit(f"sink: the queue holds {got} messages, not {n}")
    return n / elapsed


def source(spark, url: str, queue: str, n: int, batch: int, checkpoint: Path) -> tuple[float, float, int]:
    query = (spark.readStream.format("amqp").option("url", url).option("queue", queue)
             .option("maxMessagesPerBatch", str(batch)).load()
             .writeStream.format("noop").option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True))
    started = time.monotonic()
    running = query.start()
    running.awaitTermination()
    elapsed = time.monotonic() - started
    progress = running.recentProgress
    rows = sum(p["numInputRows"] for p in progress)
    busy_s = sum(p["durationMs"].get("triggerExecution", 0) for p in progress if p["numInputRows"]) / 1000
    left = wait_depth(url, queue, 0)
    if rows != n or left:
        raise SystemExit(f"source: read {rows} of {n}, {left} left in the queue")
    return n / elapsed, n / busy_s, sum(1 for p in progress if p["numInputRows"])


def measure(spark, broker: Broker, n: int, size: int, partitions: int, batch: int, work: Path) -> dict:
    queue = "bench.pipeline"
    with pika.BlockingConnection(pika.URLParameters(broker.uri)) as connection:
        connection.channel().queue_declare(queue)
    result: dict = {}
    for attempt in range(rounds):
        print(f"== {broker.name}: round {attempt + 1}/{rounds}, sink {n:,} x {size} B", file=sys.stderr, flush=True)
        result["sink_msg_s"] = round(sink(spark, broker.uri, queue, n, size, partitions))
        print(f"   {result['sink_msg_s']:,} msg/s; source", file=sys.stderr, flush=True)
        wall, busy, batches = source(spark, broker.uri, queue, n, batch, work / f"ck-{broker.name}-{attempt}")
        result.update(source_msg_s=round(wall), source_batch_msg_s=round(busy), batches=batches)
        print(f"   {round(wall):,} msg/s ({round(busy):,} within batches, {batches} batches)",
              file=sys.stderr, flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--messages", type=int, default=100_000)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--partitions", type=int, default=2, help="partitions of the DataFrame the sink writes")
    p.add_argument("--batch", type=int, default=10_000, help="the source's maxMessagesPerBatch")
    add_broker_options(p, 5695, 5696)
    a = p.parse_args(argv)
    from pipeline.jobs.session import local_session
    spark = local_session("compare_pipeline", a.master)
    work = Path(tempfile.mkdtemp(prefix="warren-pipeline-"))
    brokers: list[Broker] = [Warren("warren", a.warren_port, work / "warren")]
    if not a.no_rabbitmq:
        brokers.append(Rabbit("rabbitmq", a.rabbit_port, work / "rabbit"))
    rows = []
    try:
        for broker in brokers:
            broker.data_dir.mkdir(parents=True)
            broker.start()
            try:
                rows.append({"broker": broker.name, **measure(spark, broker, a.messages, a.size, a.partitions, a.batch, work)})
            finally:
                broker.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
        spark.stop()
    print(f"Spark {a.master}, {a.messages:,} messages of {a.size} B, maxMessagesPerBatch {a.batch:,}, "
          f"{os.cpu_count()} cores")
    print("| broker | DataFrame -> exchange msg/s | queue -> Spark (query wall) msg/s | "
          "queue -> Spark (within batches) msg/s | batches |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['broker']} | {r['sink_msg_s']:,} | {r['source_msg_s']:,} | {r['source_batch_msg_s']:,} | "
              f"{r['batches']} |")
    out = ROOT / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / "compare_pipeline.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
