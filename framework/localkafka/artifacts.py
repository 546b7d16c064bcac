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

from framework.localkafka.errors import LocalKafkaError

#: The Apache Kafka release every local cluster runs. 4.4.0 is announced on Maven Central
#: but its ``kafka-tools-api`` artifact is missing there (checked 2026-11-21), so 4.3.1.
KAFKA_VERSION = "4.3.1"
LOG4J_VERSION = "2.24.3"
SLF4J_VERSION = "2.0.17"

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.mirrorline</groupId>
  <artifactId>local-kafka</artifactId>
  <version>{kafka}</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>{kafka}</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>{kafka}</version></dependency>
    <!-- Kafka's POMs carry only slf4j-api; without a binding the broker logs nothing. -->
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-api</artifactId><version>{slf4j}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j2-impl</artifactId><version>{log4j}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>{log4j}</version></dependency>
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
    base = (cache_dir or default_cache_dir()) / f"kafka-{version}"
    libs = base / "libs"
    marker = base / "complete"
    if marker.exists():
        return libs
    base.mkdir(parents=True, exist_ok=True)
    # Several clusters (or processes) may start at once; one downloads, the others wait.
    with open(base / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not marker.exists():
            _download(base, libs, version)
    return libs


def _download(base: Path, libs: Path, version: str) -> None:
    mvn = require_tool("mvn", "it fetches Apache Kafka from Maven Central (Debian: apt-get install maven)")
    staging = base / "libs.partial"
    shutil.rmtree(staging, ignore_errors=True)
    (base / "pom.xml").write_text(_POM.format(kafka=version, log4j=LOG4J_VERSION, slf4j=SLF4J_VERSION))
    cmd = [mvn, "-B", "-q", "-f", str(base / "pom.xml"), "dependency:copy-dependencies",
           "-DincludeScope=runtime", f"-DoutputDirectory={staging}"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        output = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout + "\n" + result.stderr)
        errors = [line for line in output.splitlines() if "ERROR" in line]
        reason = errors[0].replace("[ERROR]", "") if errors else (output.strip() or "no output")
        raise LocalKafkaError(
            f"could not download Apache Kafka {version} from Maven Central: {reason.strip()}"
        )
    shutil.rmtree(libs, ignore_errors=True)
    staging.rename(libs)
    (base / "complete").write_text(version + "\n")
