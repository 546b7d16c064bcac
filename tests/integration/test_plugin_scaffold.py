"""``mirrorline plugin new`` round trip: generate each kind, install it, run its tests, run it on a real worker.

The three projects (``--source``, ``--sink``, ``--transform``) are written by the CLI as a plugin
author runs it, pip-installed into a scratch directory (no index, no build isolation) and put on
``PYTHONPATH`` of real processes: their generated tests (the plugin test kit) must pass as
generated, and on a standalone worker (a subprocess, which finds them through their entry points
only) the source connector writes a topic the worker creates with ``topic.creation.default.*``
settings, through the transform (its header on every record), and the sink connector writes what
it consumes from that topic to its file. Records are read back with librdkafka.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from support.doc_examples import install
from support.worker import Rest, all_running
from test_docs_examples import environment, logged, mirrorline, stop  # same folder: on sys.path under pytest

pytestmark = pytest.mark.integration

KINDS = {"source": "scaffold-src", "sink": "scaffold-snk", "transform": "scaffold-hdr"}


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> tuple[Path, Path]:
    """``(projects directory, installed site directory)``: one project of each kind, generated and installed."""
    root = tmp_path_factory.mktemp("scaffold")
    for kind, name in KINDS.items():
        result = subprocess.run([sys.executable, "-m", "mirrorline.cli.main", "plugin", "new", name, f"--{kind}"],
                                cwd=root, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"Created the {kind} plugin {name} in {name}:" in result.stdout
        for path in ("pyproject.toml", "README.md", f"tests/test_{name.replace('-', '_')}.py"):
            assert (root / name / path).is_file(), path
    install([root / name for name in KINDS.values()], root / "site")
    return root, root / "site"


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_generated_tests_pass_as_generated(generated, kind):
    root, site = generated
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=root / KINDS[kind],
                            capture_output=True, text=True, timeout=120, env=environment(site))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    passed = int(re.search(r"(\d+) passed", output).group(1))
    assert passed >= 5 and "skipped" not in output and "warning" not in output.lower(), output


def _topic(bootstrap: str, topic: str, count: int, timeout: float = 60.0) -> tuple[int, list]:
    """``(partitions, first count messages)`` of ``topic`` with librdkafka (listing all topics never creates one)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while topic not in (topics := admin.list_topics(timeout=10).topics):
        assert time.monotonic() < deadline, f"{topic} never appeared"
        time.sleep(0.2)
    partitions = topics[topic].partitions
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "scaffold-check", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    messages = []
    try:
        while len(messages) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                messages.append(message)
    finally:
        consumer.close()
    return len(partitions), messages


async def test_the_generated_plugins_run_on_a_worker(generated, cluster_a, unique_name, tmp_path):
    _, site = generated
    bootstrap = cluster_a.bootstrap_servers
    topic, out = unique_name("scaffold"), tmp_path / "sink.txt"
    (tmp_path / "worker.properties").write_text(
        f"bootstrap.servers={bootstrap}\nlisteners=http://127.0.0.1:0\noffset.flush.interval.ms=500\n")
    log = tmp_path / "worker.log"
    worker = mirrorline(site, "standalone", str(tmp_path / "worker.properties"), log=log)
    try:
        url = (await logged(log, r"REST API listening on (http://\S+)", worker)).group(1)
        async with Rest(url) as rest:
            source, sink = unique_name("src"), unique_name("snk")
            code, body = await rest.call("PUT", f"/connectors/{source}/config", {
                "connector.class": "ScaffoldSrcSource", "topic": topic, "poll.interval.ms": "50",
                "transforms": "mark", "transforms.mark.type": "ScaffoldHdr",
                "topic.creation.default.partitions": "2", "topic.creation.default.replication.factor": "1"})
            assert code == 201, body
            await rest.wait_for(f"/connectors/{source}/status", all_running(1))
            partitions, messages = await asyncio.to_thread(_topic, bootstrap, topic, 5)
            assert partitions == 2  # created by the worker with the connector's topic.creation settings
            assert len(messages) == 5 and all(m.headers() == [("scaffold-hdr", b"true")] for m in messages)
            # the sink consumes the topic now that it exists (a consumer finds a topic created after it
            # subscribed only at its next metadata refresh, minutes later by default)
            code, body = await rest.call("PUT", f"/connectors/{sink}/config", {
                "connector.class": "ScaffoldSnkSink", "topics": topic, "file": str(out)})
            assert code == 201, body
            await rest.wait_for(f"/connectors/{sink}/status", all_running(1))
            deadline = time.monotonic() + 60
            while not {"0", "1", "2", "3", "4"} <= set(out.read_text().split() if out.exists() else ()):
                assert time.monotonic() < deadline, out.read_text() if out.exists() else "no sink file"
                await asyncio.sleep(0.2)
            _, plugins = await rest.call("GET", "/connector-plugins?connectorsOnly=false")
            classes = {p["class"] for p in plugins}
            assert {"scaffold_src.connector.ScaffoldSrcSourceConnector", "scaffold_snk.connector.ScaffoldSnkSinkConnector",
                    "scaffold_hdr.transform.ScaffoldHdr"} <= classes
    finally:
        stop(worker, log)
