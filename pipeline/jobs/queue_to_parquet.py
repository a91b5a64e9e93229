"""Streaming job: a queue into Parquet, as per-minute aggregates.

    python -m pipeline.jobs.queue_to_parquet --url amqp://guest:guest@127.0.0.1:5672/%2F \\
        --queue events --out var/minutes --checkpoint var/minutes.ck [--once]

Each message counts in the minute of its `timestamp` property (the time it was received by the job
when it has none), grouped by routing key: messages, body bytes, and the smallest and largest body.
A minute is written once the watermark (the latest minute seen less --watermark) has passed it, so
every Parquet row is final; --once reads what the queue holds now and stops (Trigger.AvailableNow),
otherwise the job runs until interrupted. Messages are acked once the batch holding them is
committed, so a stopped job loses nothing: the next run picks up where it stopped.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from pyspark.sql import functions as F


def minute_aggregates(stream: Any, watermark: str) -> Any:
    event_time = F.coalesce(F.col("properties.timestamp"), F.current_timestamp())
    size = F.length("body")
    return (stream.withColumn("event_time", event_time).withWatermark("event_time", watermark)
            .groupBy(F.window("event_time", "1 minute").alias("window"), "routing_key")
            .agg(F.count("*").alias("messages"), F.sum(size).alias("body_bytes"),
                 F.min(size).alias("body_min"), F.max(size).alias("body_max"))
            .select(F.col("window.start").alias("minute"), "routing_key", "messages", "body_bytes",
                    "body_min", "body_max"))


def start(spark: Any, url: str, queue: str, out: str, checkpoint: str, once: bool, watermark: str = "1 minute",
          batch_max: int = 10_000) -> Any:
    """Start the query; the caller waits for it (awaitTermination)."""
    stream = (spark.readStream.format("amqp").option("url", url).option("queue", queue)
              .option("maxMessagesPerBatch", str(batch_max)).load())
    writer = (minute_aggregates(stream, watermark).writeStream.format("parquet").outputMode("append")
              .option("path", out).option("checkpointLocation", checkpoint))
    writer = writer.trigger(availableNow=True) if once else writer.trigger(processingTime="5 seconds")
    return writer.start()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True)
    p.add_argument("--queue", required=True)
    p.add_argument("--out", required=True, help="Parquet directory")
    p.add_argument("--checkpoint", required=True, help="the query's checkpoint directory")
    p.add_argument("--once", action="store_true", help="read what the queue holds now, then stop")
    p.add_argument("--watermark", default="1 minute", help="how late a message may be (default 1 minute)")
    p.add_argument("--max-messages-per-batch", type=int, default=10_000)
    p.add_argument("--master", default="local[2]")
    a = p.parse_args(argv)
    from pipeline.jobs.session import local_session
    spark = local_session("queue_to_parquet", a.master)
    query = start(spark, a.url, a.queue, a.out, a.checkpoint, a.once, a.watermark, a.max_messages_per_batch)
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
