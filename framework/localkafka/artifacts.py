"""Resolve Apache Kafka's broker jars from Maven Central into a reusable cache.

The one place the Kafka version is pinned. Resolution goes through
:mod:`mirrorline.maven`: the jars land in ``<cache>/kafka-<version>/libs`` once, so later runs
start without touching the network.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from mirrorline.localkafka.errors import LocalKafkaError
from mirrorline.maven import MavenError, default_cache_dir, require_tool, resolve_maven_classpath

__all__ = ["KAFKA_VERSION", "default_cache_dir", "java_executable", "resolve_kafka_classpath",
           "resolve_mm2_classpath"]

#: The Apache Kafka release every local cluster runs. 4.4.0 is announced on Maven Central
#: but its ``kafka-tools-api`` artifact is missing there (checked 2026-11-21), so 4.3.1.
KAFKA_VERSION = "4.3.1"
LOG4J_VERSION = "2.24.3"
SLF4J_VERSION = "2.0.17"


def _pom(artifact_id: str, kafka_artifacts: list[str], version: str) -> str:
    """A ``pom.xml`` whose runtime dependencies are the given Kafka artifacts plus a logging binding."""
    kafka = "".join(f"    <dependency><groupId>org.apache.kafka</groupId><artifactId>{a}</artifactId>"
                    f"<version>{version}</version></dependency>\n" for a in kafka_artifacts)
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.mirrorline</groupId>
  <artifactId>{artifact_id}</artifactId>
  <version>{version}</version>
  <dependencies>
{kafka}    <!-- Kafka's POMs carry only slf4j-api; without a binding Kafka logs nothing. -->
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-api</artifactId><version>{SLF4J_VERSION}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j2-impl</artifactId><version>{LOG4J_VERSION}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>{LOG4J_VERSION}</version></dependency>
  </dependencies>
</project>
"""


def java_executable() -> str:
    """The ``java`` to run brokers with (``$JAVA_HOME/bin/java`` first), checked to be 17+."""
    java_home = os.environ.get("JAVA_HOME")
    candidate = os.path.join(java_home, "bin", "java") if java_home else None
    try:
        java = candidate if candidate and os.access(candidate, os.X_OK) else require_tool(
            "java", "Apache Kafka 4.x needs Java 17 or newer (Debian: apt-get install openjdk-17-jre-headless)"
        )
    except MavenError as exc:
        raise LocalKafkaError(str(exc)) from None
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    major = _java_major(out)
    if major is not None and major < 17:
        raise LocalKafkaError(f"{java} is Java {major}; Apache Kafka {KAFKA_VERSION} needs Java 17 or newer")
    return java


def _java_major(version_output: str) -> int | None:
    for token in version_output.replace('"', " ").split():
        head = token.split(".")[0]
        if head.isdigit() and "." in token:
            return int(head) if head != "1" else int(token.split(".")[1])
    return None


def resolve_kafka_classpath(cache_dir: Path | None = None, version: str = KAFKA_VERSION) -> Path:
    """Return the directory holding every jar the broker needs, downloading it on first use.

    Raises LocalKafkaError naming the cause when Maven is missing or the download fails.
    """
    return _resolve(f"kafka-{version}", _pom("local-kafka", ["kafka_2.13", "kafka-tools"], version),
                    f"Apache Kafka {version}", cache_dir)


def resolve_mm2_classpath(cache_dir: Path | None = None, version: str = KAFKA_VERSION) -> Path:
    """The jars of Java MirrorMaker 2 (``connect-mirror``) at the brokers' Kafka version, downloaded on first use.

    For side-by-side benchmarks and compatibility checks against the real MM2
    (``java -cp '<dir>/*' org.apache.kafka.connect.mirror.MirrorMaker mm2.properties``).
    """
    return _resolve(f"connect-mirror-{version}", _pom("java-mm2", ["connect-mirror"], version),
                    f"Apache Kafka's connect-mirror {version}", cache_dir)


def _resolve(name: str, pom: str, what: str, cache_dir: Path | None) -> Path:
    try:
        return resolve_maven_classpath(name, pom, what, cache_dir)
    except MavenError as exc:
        raise LocalKafkaError(str(exc)) from None
