"""Builds the SparkSession every job runs on, from plain settings.

Embedded ``local[*]`` by default: nothing to set up beyond ``pip install 'mirrorline[spark]'``
and Java 17+. ``spark.master`` selects a standalone cluster (``spark://host:7077``) or
Kubernetes (``k8s://...``); every ``spark.*`` setting is passed to the builder unchanged.
Spark's Kafka connector is added from the project's cache (see :mod:`mirrorline.spark.artifacts`).

What is decided here and not left to the settings: speculation stays off (two attempts of one
task would write one partition twice, out of order), and executors run this process's Python
(``PYSPARK_PYTHON``), so they import the same mirrorline. Each failure that can be foreseen —
pyspark missing, no or old Java, a master that does not answer — is one SparkUnavailable line.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from mirrorline.maven import default_cache_dir
from mirrorline.spark.artifacts import spark_kafka_jars
from mirrorline.spark.errors import SparkUnavailable

if TYPE_CHECKING:  # pyspark is an optional dependency
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

#: Spark 4 runs on Java 17 or 21.
MIN_JAVA = 17
DEFAULT_MASTER = "local[*]"
#: Seconds a ``spark://`` master gets to accept a TCP connection before it counts as unreachable.
MASTER_CONNECT_TIMEOUT_S = 5.0
#: Fixed settings: order within a partition depends on one attempt per task.
FORCED = {"spark.speculation": "false"}
DEFAULTS = {
    "spark.app.name": "mirrorline",
    # a job's Kafka reads are planned per partition; Spark's own cache of consumers is not needed
    "spark.sql.shuffle.partitions": "8",
    "spark.ui.showConsoleProgress": "false",
    # the backfill writer reads its input in Arrow batches of this many records: smaller than Spark's
    # 10,000, so a cancelled job's writers stop within a couple of thousand records (they notice the
    # cancellation only when they ask for the next batch); the cost per batch is negligible at this size
    "spark.sql.execution.arrow.maxRecordsPerBatch": "2000",
}


def import_pyspark():
    """The pyspark module, or SparkUnavailable saying how to install it."""
    try:
        import pyspark
    except ImportError:
        raise SparkUnavailable("pyspark is not installed: pip install 'mirrorline[spark]'") from None
    return pyspark


def java_major(version_output: str) -> int | None:
    """The major version in ``java -version`` output (``1.8.0`` -> 8, ``17.0.15`` -> 17)."""
    match = re.search(r'version "(\d+)(?:\.(\d+))?', version_output)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def check_java() -> str:
    """The ``java`` Spark will run (``$JAVA_HOME/bin/java`` first), checked to be 17+."""
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java or not os.access(java, os.X_OK):
        raise SparkUnavailable(f"no Java found{' in JAVA_HOME=' + java_home if java_home else ' on PATH'}: "
                               f"Spark {spark_version()} needs Java {MIN_JAVA} or 21 "
                               f"(Debian: apt-get install openjdk-17-jre-headless)")
    output = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    major = java_major(output)
    if major is not None and major < MIN_JAVA:
        raise SparkUnavailable(f"{java} is Java {major}: Spark {spark_version()} needs Java {MIN_JAVA} or 21 "
                               f"(set JAVA_HOME to one)")
    return java


def spark_version() -> str:
    """The installed pyspark's version (``?`` when pyspark is missing)."""
    try:
        return import_pyspark().__version__
    except SparkUnavailable:
        return "?"


def check_master(master: str, timeout: float = MASTER_CONNECT_TIMEOUT_S) -> None:
    """SparkUnavailable when a ``spark://`` master does not accept a connection (others are not checked)."""
    if not master.startswith("spark://"):
        return
    for address in master[len("spark://"):].split(","):
        parsed = urlparse(f"//{address}")
        host, port = parsed.hostname or "", parsed.port or 7077
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return
        except OSError as exc:
            reason = exc.strerror or exc.__class__.__name__
    raise SparkUnavailable(f"Spark master {master} is unreachable ({reason}): start it, or drop spark.master "
                           f"to run embedded (local[*])")


def session_settings(settings: Mapping[str, str], jars: list[Path]) -> dict[str, str]:
    """The builder settings: defaults, the caller's ``spark.*`` settings, the Kafka jars, the forced ones."""
    out = dict(DEFAULTS)
    out.update({k: str(v) for k, v in settings.items() if k.startswith("spark.")})
    out.setdefault("spark.master", DEFAULT_MASTER)
    extra = [str(p) for p in jars]
    if out.get("spark.jars"):
        extra.append(out["spark.jars"])
    out["spark.jars"] = ",".join(extra)
    out.setdefault("spark.jars.ivy", str(default_cache_dir() / "ivy"))  # for any spark.jars.packages given
    out.update(FORCED)
    return out


def spark_session(settings: Mapping[str, str]) -> SparkSession:
    """A SparkSession built from ``settings`` (``spark.master`` and any ``spark.*``), Kafka connector included.

    Blocking (a JVM starts: 10-35 s on a loaded machine): call it through ``asyncio.to_thread``
    from a coroutine. The Spark UI's URL is logged. Raises SparkUnavailable with one line when
    pyspark or Java is missing, the connector cannot be fetched or the master does not answer.
    """
    pyspark = import_pyspark()
    check_java()
    jars = spark_kafka_jars(pyspark.__version__, Path(pyspark.__file__).parent / "jars")
    conf = session_settings(settings, jars)
    check_master(conf["spark.master"])
    if conf["spark.master"].startswith("local"):  # an embedded session binds to loopback, quietly
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    try:
        session = builder.getOrCreate()
    except Exception as exc:  # py4j/JVM start-up failures: keep the first meaningful line
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), exc.__class__.__name__)
        raise SparkUnavailable(f"Spark could not start (master {conf['spark.master']}): {first}") from None
    session.sparkContext.setLogLevel(settings.get("spark.log.level", "WARN"))
    url = session.sparkContext.uiWebUrl
    log.info("Spark %s session on %s; Spark UI: %s", pyspark.__version__, conf["spark.master"], url or "disabled")
    return session


def ui_url(session: SparkSession) -> str | None:
    """The Spark UI's address for ``session`` (None when the UI is disabled)."""
    return session.sparkContext.uiWebUrl


def prefetch() -> None:
    """Download the Kafka connector for the installed pyspark now (``scripts/bootstrap``); no-op when cached."""
    pyspark = import_pyspark()
    spark_kafka_jars(pyspark.__version__, Path(pyspark.__file__).parent / "jars")
