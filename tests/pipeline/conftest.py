"""One warren node and one local SparkSession for every pipeline test (a JVM takes ~6 s to start and
a session ~425 MB, so the whole run shares it)."""
from __future__ import annotations

import os
import shutil
import sys

import pytest

from tests.integration.nodes import start_node


@pytest.fixture(scope="session")
def node(tmp_path_factory):
    n = start_node(tmp_path_factory.mktemp("pipeline-node"))
    yield n
    n.stop()


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark", reason="the pipeline extra is not installed (scripts/setup installs it)")
    if shutil.which("java") is None:
        pytest.skip("no Java runtime (scripts/setup installs openjdk-17-jre-headless)")
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from pipeline import register
    session = (SparkSession.builder.master("local[2]").appName("warren-pipeline-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()
