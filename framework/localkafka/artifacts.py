"""Resolve Apache Kafka's broker jars from Maven Central into a reusable cache.

The one place the Kafka version is pinned. Resolution runs the machine's Maven on a
generated ``pom.xml`` (``dependency:copy-dependencies``); the jars land in
``<cache>/kafka-<version>/libs`` and a marker file records a complete download, so later
runs start without touching the network.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
from pathlib import Path

from mirrorline.localkafka.errors import LocalKafkaError

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


def default_cache_dir() -> Path:
    """Where downloaded jars live: ``$MIRRORLINE_CACHE`` or ``~/.cache/mirrorline``."""
    root = os.environ.get("MIRRORLINE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "mirrorline"
    )
    return Path(root)


def require_tool(name: str, hint: str) -> str:
    """Return the path of executable ``name`` or raise a LocalKafkaError saying how to get it."""
    path = shutil.which(name)
    if path is None:
        raise LocalKafkaError(f"{name} was not found on PATH; {hint}")
    return path


def java_executable() -> str:
    """The ``java`` to run brokers with (``$JAVA_HOME/bin/java`` first), checked to be 17+."""
    java_home = os.environ.get("JAVA_HOME")
    candidate = os.path.join(java_home, "bin", "java") if java_home else None
    java = candidate if candidate and os.access(candidate, os.X_OK) else require_tool(
        "java", "Apache Kafka 4.x needs Java 17 or newer (Debian: apt-get install openjdk-17-jre-headless)"
    )
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
    return resolve_maven_classpath(f"kafka-{version}", _pom("local-kafka", ["kafka_2.13", "kafka-tools"], version),
                                   f"Apache Kafka {version}", cache_dir)


def resolve_mm2_classpath(cache_dir: Path | None = None, version: str = KAFKA_VERSION) -> Path:
    """The jars of Java MirrorMaker 2 (``connect-mirror``) at the brokers' Kafka version, downloaded on first use.

    For side-by-side benchmarks and compatibility checks against the real MM2
    (``java -cp '<dir>/*' org.apache.kafka.connect.mirror.MirrorMaker mm2.properties``).
    """
    return resolve_maven_classpath(f"connect-mirror-{version}", _pom("java-mm2", ["connect-mirror"], version),
                                   f"Apache Kafka's connect-mirror {version}", cache_dir)


def resolve_maven_classpath(name: str, pom: str, what: str, cache_dir: Path | None = None) -> Path:
    """Return ``<cache>/<name>/libs``, holding the runtime dependencies of ``pom``, downloaded once with Maven.

    ``what`` names the artifacts in errors. Raises LocalKafkaError naming the cause when Maven is
    missing or the download fails; a marker file records a complete download.
    """
    base = (cache_dir or default_cache_dir()) / name
    libs = base / "libs"
    marker = base / "complete"
    if marker.exists():
        return libs
    base.mkdir(parents=True, exist_ok=True)
    # Several clusters (or processes) may start at once; one downloads, the others wait.
    with open(base / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not marker.exists():
            _download(base, libs, pom, what)
    return libs


def _download(base: Path, libs: Path, pom: str, what: str) -> None:
    mvn = require_tool("mvn", f"it fetches {what} from Maven Central (Debian: apt-get install maven)")
    staging = base / "libs.partial"
    shutil.rmtree(staging, ignore_errors=True)
    (base / "pom.xml").write_text(pom)
    cmd = [mvn, "-B", "-q", "-f", str(base / "pom.xml"), "dependency:copy-dependencies",
           "-DincludeScope=runtime", f"-DoutputDirectory={staging}"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        output = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout + "\n" + result.stderr)
        errors = [line for line in output.splitlines() if "ERROR" in line]
        reason = errors[0].replace("[ERROR]", "") if errors else (output.strip() or "no output")
        raise LocalKafkaError(
            f"could not download {what} from Maven Central: {reason.strip()}"
        )
    shutil.rmtree(libs, ignore_errors=True)
    staging.rename(libs)
    (base / "complete").write_text(what + "\n")
