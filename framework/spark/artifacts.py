"""Spark's Kafka connector (spark-sql-kafka) from Maven Central, cached like Kafka's own jars.

pyspark's wheel carries Spark's jars but not the Kafka connector. Its version must equal the
installed pyspark's (``spark-sql-kafka-0-10_2.13:<pyspark version>``); Maven Central has it for
4.2.0 but not for 4.2.1 or 4.3.0 (checked 2026-11-23), which is why the ``spark`` extra pins
pyspark. The connector and its runtime dependencies are fetched once with Maven into
``<cache>/spark-kafka-<version>/libs`` (the cache of :mod:`mirrorline.maven`);
jars pyspark already ships (slf4j, lz4, snappy, zstd ...) are left out so that one copy of each
class is on the classpath. Later sessions start without touching the network.
"""

from __future__ import annotations

import re
from pathlib import Path

from mirrorline.maven import MavenError, resolve_maven_classpath
from mirrorline.spark.errors import SparkUnavailable

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
    connector = f"spark-sql-kafka-0-10_{SCALA_BINARY} {spark_version}"
    try:
        jars = resolve_maven_classpath(f"spark-kafka-{spark_version}",
                                       _POM.format(spark=spark_version, scala=SCALA_BINARY), connector, cache_dir)
    except MavenError as exc:
        raise SparkUnavailable(f"{exc} (Spark's Kafka connector must match the installed pyspark {spark_version}; "
                               f"pip install 'mirrorline[spark]' installs a matching pyspark)") from None
    shipped = {artifact_name(p.name) for p in spark_jars_dir.glob("*.jar")}
    found = sorted(p for p in jars.glob("*.jar") if artifact_name(p.name) not in shipped)
    return sorted(found, key=lambda p: not p.name.startswith("spark-sql-kafka"))
