"""``mirrorline local-kafka`` as a person uses it: start, status, re-start, stop; and its errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mirrorline.localkafka import LocalKafkaError, resolve_kafka_classpath
from mirrorline.localkafka.artifacts import java_executable
from mirrorline.testing.fixtures import _free_base_port

pytestmark = pytest.mark.integration


def mirrorline(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mirrorline.cli.main", *args],
                          capture_output=True, text=True, timeout=180)


def test_start_status_restart_stop(tmp_path):
    state = str(tmp_path / "state")
    base = _free_base_port(1)
    started = mirrorline("local-kafka", "--state-dir", state, "start", "--clusters", "C1", "--base-port", str(base))
    try:
        assert started.returncode == 0, started.stderr
        assert f"cluster C1: bootstrap.servers=127.0.0.1:{base}" in started.stdout
        status = mirrorline("local-kafka", "--state-dir", state, "status")
        assert "cluster C1" in status.stdout and "running pid=" in status.stdout
        again = mirrorline("local-kafka", "--state-dir", state, "start", "--clusters", "C1")
        assert again.returncode == 0 and started.stdout.splitlines()[0] == again.stdout.splitlines()[0]
    finally:
        stopped = mirrorline("local-kafka", "--state-dir", state, "stop")
    assert stopped.returncode == 0 and "stopped: C1" in stopped.stdout
    assert "stopped" in mirrorline("local-kafka", "--state-dir", state, "status").stdout


def test_download_failure_is_one_readable_line(tmp_path):
    with pytest.raises(LocalKafkaError, match=r"could not download Apache Kafka 0\.0\.1-nope from Maven Central"):
        resolve_kafka_classpath(tmp_path, version="0.0.1-nope")


def test_missing_java_and_maven_are_named(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(LocalKafkaError, match="java was not found on PATH; Apache Kafka 4.x needs Java 17"):
        java_executable()
    with pytest.raises(LocalKafkaError, match="mvn was not found on PATH"):
        resolve_kafka_classpath(tmp_path / "empty-cache")


def test_cli_error_is_one_line_and_nonzero(tmp_path, cluster_a):
    result = mirrorline("local-kafka", "--state-dir", str(tmp_path), "start", "--clusters", "Z",
                        "--base-port", str(cluster_a.port))
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0
    assert f"mirrorline: error: cannot start cluster Z: port {cluster_a.port}" in result.stderr
