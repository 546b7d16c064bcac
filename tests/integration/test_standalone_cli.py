"""``mirrorline standalone`` as an operator runs it: files on the command line, SIGTERM, errors."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from support.kafka import read_all

pytestmark = pytest.mark.integration


def start_worker(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "mirrorline.cli.main", "standalone", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_log(proc: subprocess.Popen, pattern: str, timeout: float = 60.0) -> str:
    """Read stderr lines until ``pattern`` matches; returns the matching line."""
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            if proc.poll() is not None:
                break
            continue
        seen.append(line)
        if re.search(pattern, line):
            return line
    raise AssertionError(f"never logged {pattern!r}; output:\n{''.join(seen[-30:])}")


async def test_files_on_the_command_line_and_graceful_sigterm(cluster_a, make_topic, unique_name, tmp_path):
    topic = await make_topic(cluster_a, partitions=2)
    offsets = tmp_path / "offsets.json"
    (tmp_path / "worker.properties").write_text(
        f"# worker\nbootstrap.servers={cluster_a.bootstrap_servers}\nlisteners=http://127.0.0.1:0\n"
        f"offset.storage.file.filename={offsets}\noffset.flush.interval.ms=1000\n")
    name = unique_name("cli")
    (tmp_path / "sequence.yaml").write_text(
        f"name: {name}\nconnector.class: SequenceSource\ntasks.max: 2\ntopic: {topic}\nstreams: 2\n"
        f"records.per.poll: 10\npoll.interval.ms: 20\nmax.records: 200\n")
    proc = start_worker(str(tmp_path / "worker.properties"), str(tmp_path / "sequence.yaml"))
    try:
        wait_for_log(proc, f"Connector {name} created from its config file")
        records = await read_all(cluster_a.bootstrap_servers, topic, expect=400, timeout=60)
        assert sum(len(r) for r in records.values()) == 400
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    assert proc.returncode == 0, proc.stderr.read()
    stored = json.loads(offsets.read_text())["offsets"]
    assert sorted((o["partition"]["stream"], o["offset"]["seq"]) for o in stored) == [(0, 199), (1, 199)]


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mirrorline.cli.main", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})


def test_broker_down_is_one_readable_line(tmp_path):
    from mirrorline.localkafka.cluster import port_is_free
    from mirrorline.testing.fixtures import _free_base_port

    port = _free_base_port(1)
    assert port_is_free(port)
    (tmp_path / "w.properties").write_text(f"bootstrap.servers=127.0.0.1:{port}\nlisteners=http://127.0.0.1:0\n")
    result = run_cli("standalone", str(tmp_path / "w.properties"))
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"mirrorline: error: cannot reach Kafka at bootstrap.servers=127.0.0.1:{port}")
    assert "Traceback" not in result.stderr


def test_bad_files_are_one_readable_line(tmp_path, cluster_a):
    (tmp_path / "w.yaml").write_text("bootstrap.servers: [unclosed\n")
    result = run_cli("standalone", str(tmp_path / "w.yaml"))
    assert result.returncode == 1 and "is not valid YAML" in result.stderr and "Traceback" not in result.stderr

    result = run_cli("standalone", str(tmp_path / "missing.properties"))
    assert result.returncode == 1 and "cannot read config file" in result.stderr

    (tmp_path / "w.properties").write_text(
        f"bootstrap.servers={cluster_a.bootstrap_servers}\nlisteners=http://127.0.0.1:0\n"
        "offset.flush.interval.ms=soon\n")
    result = run_cli("standalone", str(tmp_path / "w.properties"))
    assert result.returncode == 1
    assert "Invalid value soon for configuration offset.flush.interval.ms" in result.stderr

    (tmp_path / "w.properties").write_text(
        f"bootstrap.servers={cluster_a.bootstrap_servers}\nlisteners=http://127.0.0.1:0\n")
    (tmp_path / "c.properties").write_text("name=x\nconnector.class=com.example.Nope\n")
    result = run_cli("standalone", str(tmp_path / "w.properties"), str(tmp_path / "c.properties"))
    assert result.returncode == 1
    assert "com.example.Nope" in result.stderr.strip().splitlines()[-1]

    # A worker-level converter no plugin provides would fail every task: the worker refuses to start.
    (tmp_path / "w.properties").write_text(
        f"bootstrap.servers={cluster_a.bootstrap_servers}\nlisteners=http://127.0.0.1:0\n"
        "value.converter=com.example.NopeConverter\n")
    result = run_cli("standalone", str(tmp_path / "w.properties"))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert "value.converter" in last and "com.example.NopeConverter" in last, result.stderr
