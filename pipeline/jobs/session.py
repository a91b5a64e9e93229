"""A SparkSession for the jobs: local mode on loopback, the venv's Python for the workers, `amqp`
registered."""
from __future__ import annotations

import os
import sys
from typing import Any


def local_session(app: str, master: str = "local[2]", ui: bool = False) -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from pipeline import register
    spark = (SparkSession.builder.master(master).appName(app)
             .config("spark.ui.enabled", str(ui).lower())
             .config("spark.sql.shuffle.partitions", "4")
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    return spark
