"""Spark fixtures shared by the Spark tests (backfill, reconcile): one embedded session, one real cluster.

- ``spark`` (in tests/conftest.py, shared with the unit tests): a session-scoped ``local[2]``
  SparkSession built with :func:`mirrorline.spark.session.spark_session` (Kafka connector
  included). Only one SparkContext can live in a process, so tests that need another master run
  the CLI in a subprocess.
- ``spark_standalone``: a real Spark standalone cluster started from the pyspark package on
  loopback — a master and two workers of one core each
  (:class:`mirrorline.spark.standalone.StandaloneCluster`); the value is the cluster, whose
  ``master_url`` goes into ``spark.master``.

Both skip the test when pyspark is not installed (``pip install 'mirrorline[spark]'``).

Tests marked ``spark_slow`` (a REST job on the standalone cluster, and the automatic backfill with
a million records) are skipped unless selected with ``-m spark_slow`` or
``MIRRORLINE_SPARK_SLOW=1``, which ``scripts/spark-jobs`` sets.
"""

from __future__ import annotations

import os

import pytest


def _slow_selected(config: pytest.Config) -> bool:
    if os.environ.get("MIRRORLINE_SPARK_SLOW", "").lower() in ("1", "yes", "all"):
        return True
    expression = config.getoption("markexpr", "") or ""
    return "spark_slow" in expression and "not spark_slow" not in expression


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the slow Spark job scenarios unless they were asked for."""
    if _slow_selected(config):
        return
    skip = pytest.mark.skip(reason="slow Spark job scenario: run scripts/spark-jobs, -m spark_slow or "
                                   "MIRRORLINE_SPARK_SLOW=1")
    for item in items:
        if item.get_closest_marker("spark_slow") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def spark_standalone(tmp_path_factory):
    """A standalone master and two one-core workers on 127.0.0.1, stopped at the end of the session."""
    pytest.importorskip("pyspark")
    from mirrorline.spark.standalone import StandaloneCluster

    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-standalone"), workers=2, cores=1).start()
    yield cluster
    cluster.stop()
