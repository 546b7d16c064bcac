"""A planted secret never leaves the worker: REST responses, statuses and the log of a standalone
worker (in-process, and the ``mirrorline standalone`` command's stderr) running a MirrorSource flow
whose config holds ``source.cluster.sasl.jaas.config``. The flow still replicates (the session
clusters are PLAINTEXT, so the JAAS setting is not used)."""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import subprocess
import sys
import time

import pytest

from support.kafka import produce, read_all
from support.worker import Rest, all_running, running_standalone

pytestmark = pytest.mark.integration

SECRET = "Pl4nted-MM2-s3cret-91c4"
JAAS = f'org.apache.kafka.common.security.plain.PlainLoginModule required username="mm2" password="{SECRET}";'
HIDDEN = "[hidden]"


async def exercise(rest: Rest, name: str, config: dict[str, str]) -> list:
    """Create the connector over REST and read everything that might show its config; returns the bodies."""
    seen = []
    status, body = await rest.call("POST", "/connectors", {"name": name, "config": config})
    assert status == 201, body
    seen.append(body)
    seen.append(await rest.wait_for(f"/connectors/{name}/status", all_running(1), timeout=60))
    for path in (f"/connectors/{name}", f"/connectors/{name}/config", f"/connectors/{name}/tasks",
                 f"/connectors/{name}/tasks/0/status", "/connectors?expand=info&expand=status"):
        status, body = await rest.call("GET", path)
        assert status == 200, body
        seen.append(body)
    assert seen[3]["source.cluster.sasl.jaas.config"] == HIDDEN
    assert seen[3]["target.cluster.ssl.keystore.password"] == HIDDEN
    assert all(t["config"].get("source.cluster.sasl.jaas.config", HIDDEN) == HIDDEN for t in seen[4])
    # a bad config: validated, and refused on creation
    bad = {**config, "tasks.max": "many", "replication.policy.class": "os.system"}
    status, body = await rest.call("PUT", "/connector-plugins/MirrorSourceConnector/config/validate", bad)
    assert status == 200 and body["error_count"] >= 2, body
    seen.append(body)
    status, body = await rest.call("PUT", f"/connectors/{name}-bad/config", bad)
    assert status == 400 and "unknown replication policy" in body["message"], body
    seen.append(body)
    # a config read and written back keeps the secret: the flow goes on replicating
    status, body = await rest.call("PUT", f"/connectors/{name}/config", seen[3])
    assert status == 200, body
    seen.append(body)
    seen.append(await rest.wait_for(f"/connectors/{name}/status", all_running(1), timeout=60))
    return seen


async def test_mirror_source_secret_hidden_in_rest_and_log(cluster_a, cluster_b, flow_config, make_topic,
                                                           unique_name, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    topic = await make_topic(cluster_a, partitions=1)
    name = unique_name("secret")
    config = flow_config(topics=topic, tasks_max=1)
    config["source.cluster.sasl.jaas.config"] = JAAS
    config["target.cluster.ssl.keystore.password"] = SECRET
    worker = {"bootstrap.servers": cluster_b.bootstrap_servers,
              "offset.storage.file.filename": str(tmp_path / "offsets.json")}
    async with running_standalone(worker) as url:
        async with Rest(url) as rest:
            seen = await exercise(rest, name, config)
            await produce(cluster_a.bootstrap_servers, topic, [(0, b"k", b"v%d" % i, [], None) for i in range(5)])
            copied = await read_all(cluster_b.bootstrap_servers, f"A.{topic}", expect=5, timeout=60)
            assert sum(len(r) for r in copied.values()) == 5
    assert SECRET not in repr(seen)
    assert SECRET not in caplog.text


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_cli_stderr_never_shows_the_secret(cluster_a, cluster_b, flow_config, make_topic, unique_name,
                                                 tmp_path):
    topic = await make_topic(cluster_a, partitions=1)
    port = _free_port()
    (tmp_path / "worker.properties").write_text(
        f"bootstrap.servers={cluster_b.bootstrap_servers}\nlisteners=http://127.0.0.1:{port}\n"
        f"offset.storage.file.filename={tmp_path / 'offsets.json'}\n")
    config = flow_config(topics=topic, tasks_max=1)
    config["source.cluster.sasl.jaas.config"] = JAAS
    config["target.cluster.ssl.keystore.password"] = SECRET
    proc = subprocess.Popen([sys.executable, "-m", "mirrorline.cli.main", "standalone",
                             str(tmp_path / "worker.properties")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        async with Rest(f"http://127.0.0.1:{port}") as rest:
            deadline = time.monotonic() + 60
            while True:
                try:
                    status, _ = await rest.call("GET", "/connectors")
                    if status == 200:
                        break
                except OSError:
                    pass
                assert time.monotonic() < deadline and proc.poll() is None, "worker did not start"
                await asyncio.sleep(0.2)
            seen = await exercise(rest, unique_name("cli-secret"), config)
        assert SECRET not in repr(seen)
    finally:
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=60)
    assert stderr.strip(), "the worker logged nothing: the check below would prove nothing"
    assert SECRET not in stderr and SECRET not in stdout
