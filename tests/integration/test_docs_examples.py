"""The docs' example plugins, installed as a plugin author installs them, run against Kafka on broker defaults.

Every complete example of docs/plugin-authoring.md (and README.md, whose tick plugin must be the
guide's) is cut out of the page (:mod:`support.doc_examples`), pip-installed into a scratch
directory and put on ``PYTHONPATH`` of real ``mirrorline`` processes, which find them through their
entry points only. Then, as the guide says to use them:

- ``mirrorline plugins`` lists each of them and no load failure;
- on a standalone worker: ``POST /connectors`` with the guide's body (``TickSource``) writes ticks to
  a topic that did not exist (nothing else creates it: the worker's producer lets the broker
  auto-create it, as Kafka Connect's does); ``GET /connector-plugins`` shows the guide's PluginInfo;
  the guide's ``transforms=prefix`` properties route keyed records to ``dr.<topic>``; the
  ``UpperCase`` converter upper-cases values; the ``ConnectorCount`` REST extension answers;
- ``mirrorline tick <bootstrap>`` (the guide's command) writes ticks.

Records are read back with librdkafka (confluent-kafka), not with our client. The Spark job example
runs in tests/integration/spark/test_docs_job_example.py; the tick plugin's own test, the by-hand
script and the sink test (no broker) in tests/unit/test_plugin_authoring_examples.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from support.doc_examples import examples, install, write
from support.worker import Rest, all_running

pytestmark = pytest.mark.integration

#: Projects a worker process loads (the Spark job's is run with the session's Spark, elsewhere).
PLUGINS = ("tick-plugin", "tick-command", "count-routes", "upper-converter", "prefix-transform")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """A directory holding the installed example plugins (for ``PYTHONPATH``)."""
    root = tmp_path_factory.mktemp("doc-plugins")
    projects = examples()
    install([write(name, projects[name], root) for name in PLUGINS], root / "site")
    return root / "site"


def environment(site: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}


def mirrorline(site: Path, *args: str, log: Path) -> subprocess.Popen:
    """Start ``mirrorline ARGS`` with the example plugins installed; its output goes to ``log``."""
    with log.open("w") as out:
        return subprocess.Popen([sys.executable, "-m", "mirrorline.cli.main", *args], stdout=out,
                                stderr=subprocess.STDOUT, env=environment(site))


async def logged(log: Path, pattern: str, process: subprocess.Popen, timeout: float = 60.0) -> re.Match:
    """Wait for a line of ``log`` matching ``pattern``; fail with the log if the process ends first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        match = re.search(pattern, log.read_text())
        if match:
            return match
        if process.poll() is not None:
            break
        await asyncio.sleep(0.1)
    raise AssertionError(f"never logged {pattern!r}; output:\n{log.read_text()[-4000:]}")


def stop(process: subprocess.Popen, log: Path) -> None:
    """SIGTERM, and the process must exit 0 (a graceful stop)."""
    process.send_signal(signal.SIGTERM)
    try:
        assert process.wait(60) == 0, log.read_text()[-4000:]
    finally:
        if process.poll() is None:
            process.kill()


def _values(bootstrap: str, topic: str, count: int, timeout: float) -> list[bytes]:
    """The first ``count`` values of ``topic`` (all partitions), read with librdkafka; fewer after ``timeout``."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while topic not in admin.list_topics(timeout=10).topics:  # all topics: never creates one
        if time.monotonic() > deadline:
            return []
        time.sleep(0.2)
    partitions = admin.list_topics(timeout=10).topics[topic].partitions
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "docs-examples", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    values: list[bytes] = []
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                values.append(message.value())
    finally:
        consumer.close()
    return values


async def values(bootstrap: str, topic: str, count: int, timeout: float = 60.0) -> list[bytes]:
    """:func:`_values` off the event loop."""
    return await asyncio.to_thread(_values, bootstrap, topic, count, timeout)


def properties(text: str) -> dict[str, str]:
    """A ``.properties`` block as a dict."""
    pairs = (line.split("=", 1) for line in text.splitlines() if line.strip() and not line.startswith("#"))
    return {key.strip(): value.strip() for key, value in pairs}


def test_mirrorline_plugins_lists_the_installed_examples(site):
    result = subprocess.run([sys.executable, "-m", "mirrorline.cli.main", "plugins"], capture_output=True,
                            text=True, timeout=120, env=environment(site))
    assert result.returncode == 0 and "FAILED" not in result.stdout, result.stdout + result.stderr
    for line in ("tick_plugin.TickSourceConnector  type=source version=0.1.0",
                 "prefix_transform.PrefixTopic  type=transformation", "prefix_transform.HasKey  type=predicate",
                 "upper_converter.UpperCase  type=converter"):
        assert line in result.stdout, result.stdout


async def test_the_documented_plugins_run_on_a_worker(site, cluster_a, unique_name, tmp_path):
    bootstrap = cluster_a.bootstrap_servers
    (tmp_path / "worker.properties").write_text(
        f"bootstrap.servers={bootstrap}\nlisteners=http://127.0.0.1:0\noffset.flush.interval.ms=500\n"
        f"offset.storage.file.filename={tmp_path / 'offsets.json'}\n")
    log = tmp_path / "worker.log"
    worker = mirrorline(site, "standalone", str(tmp_path / "worker.properties"), log=log)
    try:
        url = (await logged(log, r"REST API listening on (http://\S+)", worker)).group(1)
        async with Rest(url) as rest:
            _, plugins = await rest.call("GET", "/connector-plugins")
            assert {"class": "tick_plugin.TickSourceConnector", "type": "source", "version": "0.1.0"} in plugins

            # The guide's POST /connectors, to a topic nobody created
            ticks, topic = unique_name("ticks"), unique_name("ticks")
            assert not await values(bootstrap, topic, 1, timeout=0)
            code, _ = await rest.call("POST", "/connectors", {"name": ticks, "config": {
                "connector.class": "TickSource", "topic": topic}})
            assert code == 201

            # The guide's transform properties on a source of keyed records
            routed = unique_name("keyed")
            transform = {**properties(examples()["prefix-transform"]["connector.properties"]),
                         "connector.class": "SequenceSource", "topic": routed, "max.records": "5"}
            assert transform["transforms.prefix.type"] == "PrefixTopic"
            code, _ = await rest.call("PUT", f"/connectors/{unique_name('prefix')}/config", transform)
            assert code == 201

            # The guide's converter as a connector's value.converter
            upper = unique_name("upper")
            code, _ = await rest.call("PUT", f"/connectors/{unique_name('upper')}/config", {
                "connector.class": "SequenceSource", "topic": upper, "max.records": "3",
                "value.converter": "UpperCase"})
            assert code == 201

            await rest.wait_for(f"/connectors/{ticks}/status", all_running(1))
            assert await values(bootstrap, topic, 2) == [b"0", b"1"]
            keyed = await values(bootstrap, f"dr.{routed}", 5)
            assert sorted(json.loads(v)["seq"] for v in keyed) == [0, 1, 2, 3, 4]
            assert await values(bootstrap, upper, 3) == [b'{"STREAM": 0, "SEQ": %d}' % n for n in range(3)]

            # The guide's REST extension
            code, body = await rest.call("GET", f"/admin/count/{ticks}")
            assert (code, body) == (200, {"count": 1})
            code, body = await rest.call("GET", "/admin/count/no-such-prefix")
            assert code == 404 and body["message"] == "no connector starts with no-such-prefix"
    finally:
        stop(worker, log)


async def test_the_documented_command_writes_ticks(site, cluster_a, tmp_path):
    """``mirrorline tick BOOTSTRAP``, the guide's command: a worker it describes writes to ``ticks``."""
    bootstrap = cluster_a.bootstrap_servers
    before = len(await values(bootstrap, "ticks", 10_000, timeout=0))
    log = tmp_path / "tick.log"
    command = mirrorline(site, "tick", bootstrap, log=log)
    try:
        deadline = time.monotonic() + 60
        while len(await values(bootstrap, "ticks", before + 1, timeout=1)) <= before:
            assert command.poll() is None and time.monotonic() < deadline, log.read_text()[-4000:]
    finally:
        stop(command, log)
