"""MirrorHeartbeatConnector against real clusters A and B (reference mm2.md §1.4, §5.1-5.2).

The ``heartbeats`` topic name is shared by every test of the session, so records are picked by
their key (a source alias unique to the test).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from mirrorline.connectors.mirror_client.formats import Heartbeat, decode_heartbeat_key
from support.kafka import read_all
from support.worker import Rest, all_running, running_standalone

pytestmark = pytest.mark.integration


def heartbeat_config(source, target, source_alias, target_alias, **overrides) -> dict[str, str]:
    config = {
        "connector.class": "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector",
        "source.cluster.alias": source_alias, "target.cluster.alias": target_alias,
        "source.cluster.bootstrap.servers": source.bootstrap_servers,
        "target.cluster.bootstrap.servers": target.bootstrap_servers,
        "heartbeats.topic.replication.factor": "1", "emit.heartbeats.interval.seconds": "1",
    }
    config.update({k.replace("_", "."): str(v) for k, v in overrides.items()})
    return config


async def ours(bootstrap: str, topic: str, key: tuple[str, str], expect: int, timeout: float = 60.0) -> list:
    """The records of ``topic`` partition 0 whose heartbeat key is ``key``, waiting for ``expect`` of them."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            records = (await read_all(bootstrap, topic, timeout=5)).get(0, [])
        except AssertionError:  # topic not there yet
            records = []
        mine = [r for r in records if decode_heartbeat_key(r.key) == key]
        if len(mine) >= expect or time.monotonic() > deadline:
            return mine
        await asyncio.sleep(0.5)


async def test_heartbeats_are_emitted_and_replicated_whatever_the_topic_filter(
        cluster_a, cluster_b, flow_config, unique_name, tmp_path):
    alias = unique_name("X")
    hb_name, mirror_name = unique_name("heartbeat"), unique_name("mirror")
    hb = heartbeat_config(cluster_b, cluster_a, alias, "A")  # writes (alias, A) into A's heartbeats
    mirror = flow_config(topics="nothing-matches-this", tasks_max=1)
    worker_a = {"bootstrap.servers": cluster_a.bootstrap_servers,
                "offset.storage.file.filename": str(tmp_path / "offsets-a.json")}
    worker_b = {"bootstrap.servers": cluster_b.bootstrap_servers,
                "offset.storage.file.filename": str(tmp_path / "offsets-b.json")}
    async with running_standalone(worker_a, [{"name": hb_name, **hb}]) as url_a, Rest(url_a) as rest_a, \
            running_standalone(worker_b, [{"name": mirror_name, **mirror}]) as url_b, Rest(url_b) as rest_b:
        await rest_a.wait_for(f"/connectors/{hb_name}/status", all_running(1))
        await rest_b.wait_for(f"/connectors/{mirror_name}/status", all_running(1), timeout=60)

        on_a = await ours(cluster_a.bootstrap_servers, "heartbeats", (alias, "A"), expect=4)
        assert len(on_a) >= 4
        now = time.time() * 1000
        beats = [Heartbeat.decode(r.key, r.value) for r in on_a]
        for record, beat in zip(on_a, beats):
            assert record.partition == 0 and record.timestamp == beat.timestamp
            assert record.key == beat.encode_key() and record.value == beat.encode_value()
        assert abs(now - beats[-1].timestamp) < 5000
        gaps = [b.timestamp - a.timestamp for a, b in zip(beats, beats[1:])]
        assert all(800 <= g <= 3000 for g in gaps), gaps

        on_b = await ours(cluster_b.bootstrap_servers, "A.heartbeats", (alias, "A"), expect=3)
        read_at = time.time() * 1000
        assert len(on_b) >= 3
        source_copies = {(r.key, r.value, r.timestamp) for r in
                         await ours(cluster_a.bootstrap_servers, "heartbeats", (alias, "A"), expect=0)}
        for r in on_b:
            assert (r.key, r.value, r.timestamp) in source_copies
            assert not r.headers
        latency_ms = read_at - Heartbeat.decode(on_b[-1].key, on_b[-1].value).timestamp
        print(f"\nheartbeat end-to-end latency (emit on A -> read on B as A.heartbeats): {latency_ms:.0f} ms")
        assert latency_ms < 10_000

        # the heartbeat connector's only source partition, stored with offset 0
        offsets = await rest_a.wait_for(f"/connectors/{hb_name}/offsets", lambda b: len(b["offsets"]) == 1)
        assert offsets["offsets"] == [{"partition": {"sourceClusterAlias": alias, "targetClusterAlias": "A"},
                                       "offset": {"offset": 0}}]


async def test_disabled_heartbeats_run_no_task_and_offsets_are_validated(cluster_a, cluster_b, unique_name,
                                                                          tmp_path):
    name = unique_name("heartbeat")
    config = heartbeat_config(cluster_b, cluster_a, unique_name("Y"), "A", emit_heartbeats_enabled="false",
                              enabled="false")
    worker = {"bootstrap.servers": cluster_a.bootstrap_servers,
              "offset.storage.file.filename": str(tmp_path / "offsets.json")}
    async with running_standalone(worker, [{"name": name, **config}]) as url, Rest(url) as rest:
        status = await rest.wait_for(f"/connectors/{name}/status", all_running(0))
        await asyncio.sleep(1.5)
        status, body = await rest.call("GET", f"/connectors/{name}/status")
        assert status == 200 and body["connector"]["state"] == "RUNNING" and body["tasks"] == []

        assert (await rest.call("PUT", f"/connectors/{name}/stop"))[0] == 204
        good = {"sourceClusterAlias": "Y", "targetClusterAlias": "A"}
        status, _ = await rest.call("PATCH", f"/connectors/{name}/offsets",
                                    {"offsets": [{"partition": good, "offset": {"offset": 0}}]})
        assert status == 200
        for partition, offset in [(good, {"offset": 5}), ({"sourceClusterAlias": 1, "targetClusterAlias": "A"},
                                                          {"offset": 0}), ({"targetClusterAlias": "A"}, {"offset": 0})]:
            status, body = await rest.call("PATCH", f"/connectors/{name}/offsets",
                                           {"offsets": [{"partition": partition, "offset": offset}]})
            assert status == 400, (partition, offset, body)
