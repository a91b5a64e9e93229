"""Batch job: the rows of a file (JSON lines, CSV with a header, or Parquet) into an exchange, one
message per row with the row as its JSON body, with publisher confirms.

    python -m pipeline.jobs.publish_dataframe --url amqp://guest:guest@127.0.0.1:5672/%2F \\
        --input orders.json --exchange amq.topic --routing-key orders.new
    ... --routing-key-column region       # each row's routing key from one of its columns

Every row is confirmed by the broker, or the job fails (a nack, or an unroutable row: the publish
is mandatory); a failed task is retried by Spark, so a row may arrive twice, never not at all.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from pyspark.sql import functions as F


def as_messages(df: Any, routing_key_column: str | None = None) -> Any:
    """Rows as (body = the row as JSON, content type application/json[, routing_key])."""
    columns = [F.to_json(F.struct(*df.columns)).alias("body"),
               F.struct(F.lit("application/json").alias("content_type")).alias("properties")]
    if routing_key_column:
        columns.append(F.col(routing_key_column).cast("string").alias("routing_key"))
    return df.select(*columns)


def publish(df: Any, url: str, exchange: str, routing_key: str = "", routing_key_column: str | None = None,
            mandatory: bool = True) -> int:
    """Publish `df`; the number of rows published."""
    messages = as_messages(df, routing_key_column)
    (messages.write.format("amqp").mode("append").option("url", url).option("exchange", exchange)
     .option("routing_key", routing_key).option("mandatory", str(mandatory).lower()).save())
    return df.count()


def read(spark: Any, path: str, fmt: str) -> Any:
    if fmt == "csv":
        return spark.read.option("header", "true").option("inferSchema", "true").csv(path)
    return spark.read.format(fmt).load(path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True)
    p.add_argument("--input", required=True)
    p.add_argument("--format", choices=("json", "csv", "parquet"), help="default: from the file name")
    p.add_argument("--exchange", default="")
    p.add_argument("--routing-key", default="")
    p.add_argument("--routing-key-column")
    p.add_argument("--no-mandatory", action="store_true", help="drop unroutable rows instead of failing")
    p.add_argument("--master", default="local[2]")
    a = p.parse_args(argv)
    fmt = a.format or next((f for f in ("json", "csv", "parquet") if a.input.endswith(f".{f}")), "json")
    from pipeline.jobs.session import local_session
    spark = local_session("publish_dataframe", a.master)
    n = publish(read(spark, a.input, fmt), a.url, a.exchange, a.routing_key, a.routing_key_column,
                not a.no_mandatory)
    print(f"published {n} rows to exchange {a.exchange!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
