"""One warren node and one local SparkSession for every pipeline test (a JVM takes ~6 s to start and
a session ~425 MB, so the whole run shares it): local[2] on 127.0.0.1, no UI, this venv's Python
for the workers (pipeline.jobs.session)."""
from __future__ import annotations

import shutil

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
    from pipeline.jobs.session import local_session
    session = local_session("warren-pipeline-tests", "local[2]")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


PIPELINE_TIMEOUT_S = 300  # a JVM start and Spark's first job alone take ~100 s on a busy 2-core machine


def pytest_collection_modifyitems(items):
    for item in items:
        if item.nodeid.startswith("tests/pipeline/") and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(PIPELINE_TIMEOUT_S))
