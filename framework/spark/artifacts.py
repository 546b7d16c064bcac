"""Spark's Kafka connector (spark-sql-kafka) from Maven Central, cached like Kafka's own jars.

pyspark's wheel carries Spark's jars but not the Kafka connector. Its version must equal the
installed pyspark's (``spark-sql-kafka-0-10_2.13:<pyspark version>``); Maven Central has it for
4.2.0 but not for 4.2.1 or 4.3.0 (checked 2026-11-23), which is why the ``spark`` extra pins
pyspark. The connector and its runtime dependencies are fetched once with Maven into
``<cache>/spark-kafka-<version>/jars`` (the cache of :mod:`framework.localkafka.artifacts`);
jars pyspark already ships (slf4j, lz4, snappy, zstd ...) are left out so that one copy of each
class is on the classpath. Later sessions start without touching the network.
"""

from __future__ import annotations

import fcntl
import re
import shutil
import subprocess
from pathlib import Path

from framework.localkafka.artifacts import default_cache_dir
from framework.spark.errors import SparkUnavailable

SCALA_BINARY = "2.13"

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.mirrorline</groupId>
  <artifactId>spark-kafka</artifactId>
  <version>{spark}</version>
  <dependencies>
    <dependency><groupId>org.apache.spark</groupId><artifactId>spark-sql-kafka-0-10_{scala}</artifactId><version>{spark}</version></dependency>
  </dependencies>
</project>
"""

_JAR_NAME = re.compile(r"^(?P<artifact>.+)-\d+(?:\.\d+)+(?:[-_.][\w.]+)?\.jar$")


def artifact_name(jar: str) -> str:
    """``lz4-java-1.8.0.jar`` -> ``lz4-java``: a jar's artifact id without its version."""
    match = _JAR_NAME.match(jar)
    return match.group("artifact") if match else jar


def spark_kafka_jars(spark_version: str, spark_jars_dir: Path, cache_dir: Path | None = None) -> list[Path]:
    """The jars to add to a session for Kafka (connector first), downloading them on first use.

    ``spark_jars_dir`` is pyspark's own ``jars`` directory; artifacts found there are not added
    twice. Raises SparkUnavailable naming the cause when Maven is missing or the download fails.
    """
    base = (cache_dir or default_cache_dir()) / f"spark-kafka-{spark_version}"
    jars = base / "jars"
    marker = base / "complete"
    if not marker.exists():
        base.mkdir(parents=True, exist_ok=True)
        with open(base / ".lock", "w") as lock:  # several sessions may start at once; one downloads
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not marker.exists():
                _download(base, jars, spark_version)
    shipped = {artifact_name(p.name) for p in spark_jars_dir.glob("*.jar")}
    found = sorted(p for p in jars.glob("*.jar") if artifact_name(p.name) not in shipped)
    return sorted(found, key=lambda p: not p.name.startswith("spark-sql-kafka"))


def _download(base: Path, jars: Path, version: str) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise SparkUnavailable("mvn was not found on PATH; it fetches Spark's Kafka connector from Maven Central "
                               "(Debian: apt-get install maven), or run scripts/bootstrap")
    staging = base / "jars.partial"
    shutil.rmtree(staging, ignore_errors=True)
    (base / "pom.xml").write_text(_POM.format(spark=version, scala=SCALA_BINARY))
    cmd = [mvn, "-B", "-q", "-f", str(base / "pom.xml"), "dependency:copy-dependencies",
           "-DincludeScope=runtime", f"-DoutputDirectory={staging}"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        output = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout + "\n" + result.stderr)
        errors = [line for line in output.splitlines() if "ERROR" in line]
        reason = (errors[0].replace("[ERROR]", "") if errors else output.strip() or "no output").strip()
        raise SparkUnavailable(f"could not download spark-sql-kafka-0-10_{SCALA_BINARY} {version} from Maven "
                               f"Central (it must match the installed pyspark {version}; "
                               f"pip install 'mirrorline[spark]' installs a matching pyspark): {reason}")
    shutil.rmtree(jars, ignore_errors=True)
    staging.rename(jars)
    (base / "complete").write_text(version + "\n")


def prefetch() -> None:
    """Download the Kafka connector for the installed pyspark now (``scripts/bootstrap``); no-op when cached."""
    from framework.spark.session import import_pyspark

    pyspark = import_pyspark()
    spark_kafka_jars(pyspark.__version__, Path(pyspark.__file__).parent / "jars")
