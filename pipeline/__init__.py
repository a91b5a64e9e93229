"""PySpark data sources for warren (and any AMQP 0-9-1 broker): a queue as a stream, a DataFrame into
an exchange, and the jobs in pipeline/jobs/.

    from pipeline import register
    register(spark)
    stream = (spark.readStream.format("amqp").option("url", "amqp://guest:guest@127.0.0.1:5672/%2F")
              .option("queue", "events").load())
    df.write.format("amqp").mode("append").option("url", URL).option("exchange", "amq.topic").save()

Needs the `pipeline` extra (pyspark[sql] 4.2+, pyarrow, pandas<3) and a Java runtime.
"""
from __future__ import annotations

from typing import Any


def register(spark: Any) -> None:
    """Register the `amqp` format with a SparkSession."""
    from pipeline.source import AmqpDataSource
    spark.dataSource.register(AmqpDataSource)
