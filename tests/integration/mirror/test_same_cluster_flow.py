"""A flow whose two aliases name one physical cluster is refused, as connector and as mm2 flow.

Without the guard MirrorSource copies A's topics into A as ``X.t``, then ``X.X.t`` on the next
refresh, and so on until the disk is full.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from support.kafka import produce, read_all, topics_of
from support.worker import Rest, all_running, running_standalone

pytestmark = pytest.mark.integration

CONNECTORS = ("MirrorSourceConnector", "MirrorCheckpointConnector", "MirrorHeartbeatConnector")


async def cluster_id(bootstrap: str) -> str:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return (await admin.describe_cluster())["cluster_id"]
    finally:
        await admin.close()


def same_cluster_config(cluster, connector: str, source_alias: str, target_alias: str, **extra: str) -> dict:
    # the two aliases reach A by different addresses: only the cluster id tells they are one cluster
    port = cluster.bootstrap_servers.rsplit(":", 1)[1]
    return {"connector.class": f"org.apache.kafka.connect.mirror.{connector}",
            "source.cluster.alias": source_alias, "target.cluster.alias": target_alias,
            "source.cluster.bootstrap.servers": cluster.bootstrap_servers,
            "target.cluster.bootstrap.servers": f"localhost:{port}",
            "replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
            "checkpoints.topic.replication.factor": "1", "heartbeats.topic.replication.factor": "1",
            "refresh.topics.interval.seconds": "1", "refresh.groups.interval.seconds": "1", "tasks.max": "1", **extra}


async def test_mirror_source_refuses_a_flow_from_a_cluster_into_itself(cluster_a, make_topic, unique_name, tmp_path):
    """MirrorSource copies records, so a flow into itself would copy its copies without end: FAILED.
    Heartbeats and checkpoints copy none, so those connectors run on the same flow, as in MM2."""
    topic = await make_topic(cluster_a)
    await produce(cluster_a.bootstrap_servers, topic, [(0, b"k", b"v", [], None)])
    source_alias, target_alias = unique_name("X"), unique_name("Y")
    expected_id = await cluster_id(cluster_a.bootstrap_servers)
    worker = {"bootstrap.servers": cluster_a.bootstrap_servers,
              "offset.storage.file.filename": str(tmp_path / "offsets.json")}
    async with running_standalone(worker) as url, Rest(url) as rest:
        names = {}
        for connector in CONNECTORS:
            names[connector] = unique_name(connector)
            status, body = await rest.call("POST", "/connectors", {
                "name": names[connector],
                "config": same_cluster_config(cluster_a, connector, source_alias, target_alias, topics=topic)})
            assert status == 201, body
        body = await rest.wait_for(f"/connectors/{names['MirrorSourceConnector']}/status",
                                   lambda s: s["connector"]["state"] == "FAILED", timeout=60)
        trace = body["connector"]["trace"]
        assert f"cluster id {expected_id}" in trace, trace
        assert f"'{source_alias}'" in trace and f"'{target_alias}'" in trace
        assert "allow.same.cluster.flow" in trace
        await rest.wait_for(f"/connectors/{names['MirrorHeartbeatConnector']}/status", all_running(1), timeout=60)
        status = await rest.wait_for(f"/connectors/{names['MirrorCheckpointConnector']}/status",
                                     lambda s: s["connector"]["state"] == "RUNNING", timeout=60)
        assert all(task["state"] == "RUNNING" for task in status["tasks"]), status
        await asyncio.sleep(4)  # several refresh intervals
        created = {t for t in await topics_of(cluster_a.bootstrap_servers) if source_alias in t or target_alias in t}
        # no copy X.<topic> and no offset-syncs topic: only the checkpoint connector's own topic
        assert created == {f"{source_alias}.checkpoints.internal"}


async def test_allowed_flow_from_a_cluster_into_itself_runs(cluster_a, make_topic, unique_name, tmp_path):
    topic = await make_topic(cluster_a)
    await produce(cluster_a.bootstrap_servers, topic, [(0, b"k", f"v{i}".encode(), [], None) for i in range(5)])
    source_alias, target_alias = unique_name("X"), unique_name("Y")
    worker = {"bootstrap.servers": cluster_a.bootstrap_servers,
              "offset.storage.file.filename": str(tmp_path / "offsets.json")}
    name = unique_name("mirror")
    # topics names the one topic, so its copy X.<topic> is not copied again
    config = same_cluster_config(cluster_a, "MirrorSourceConnector", source_alias, target_alias, topics=topic,
                                 **{"allow.same.cluster.flow": "true"})
    async with running_standalone(worker, [{"name": name, **config}]) as url, Rest(url) as rest:
        await rest.wait_for(f"/connectors/{name}/status", all_running(1), timeout=60)
        copied = await read_all(cluster_a.bootstrap_servers, f"{source_alias}.{topic}", expect=5, timeout=60)
        assert [r.value for r in copied[0]] == [f"v{i}".encode() for i in range(5)]
        await asyncio.sleep(3)
        assert f"{source_alias}.{source_alias}.{topic}" not in await topics_of(cluster_a.bootstrap_servers)


def test_mm2_refuses_a_flow_from_a_cluster_into_itself(cluster_a, unique_name, tmp_path):
    source_alias, target_alias = unique_name("P"), unique_name("Q")
    port = cluster_a.bootstrap_servers.rsplit(":", 1)[1]
    path = tmp_path / "mm2.properties"
    path.write_text(f"clusters = {source_alias}, {target_alias}\n"
                    f"{source_alias}.bootstrap.servers = {cluster_a.bootstrap_servers}\n"
                    f"{target_alias}.bootstrap.servers = localhost:{port}\n"
                    f"{source_alias}->{target_alias}.enabled = true\nreplication.factor = 1\n")
    result = subprocess.run([sys.executable, "-m", "mirrorline.cli.main", "mm2", str(path)],
                            capture_output=True, text=True, timeout=120)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    expected_id = asyncio.run(cluster_id(cluster_a.bootstrap_servers))
    assert lines[0].startswith(f"mirrorline: error: {path}: {source_alias}->{target_alias}: ")
    assert f"cluster id {expected_id}" in lines[0] and "allow.same.cluster.flow=true" in lines[0]
    assert "Unclosed" not in result.stderr
    leftovers = {t for t in asyncio.run(topics_of(cluster_a.bootstrap_servers)) if source_alias in t}
    assert leftovers == set()  # refused before any worker wrote its internal topics
