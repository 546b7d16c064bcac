"""``mirrorline mm2 mm2.properties``: MM2's dedicated mode, run as an operator runs it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys

import pytest

from mirrorline.connectors.mirror_client.client import MirrorClient
from mirrorline.connectors.mirror_client.formats import Heartbeat
from mirrorline.clients.runtime_clients import KAFKA_CLIENTS
from mirrorline.localkafka.cluster import SINGLE_BROKER_MM2_PROPERTIES
from support.mm2 import isolated_state, start_mm2, stop_mm2
from support.distributed import overlaps, status_history, task_owners
from support.kafka import (
    KEEP_OLD_RECORDS,
    create_topic,
    produce,
    read_all,
    read_mirrored,
    record_tuples,
    topics_of,
)

pytestmark = pytest.mark.integration


def write_mm2_properties(path, cluster_a, cluster_b, topics: str, state: str | None = None,
                         extra: str = "") -> None:
    """An mm2.properties for flow A->B; ``state`` names this test's worker groups and internal topics."""
    state = state or topics.rstrip(".*-")
    path.write_text(f"""# MirrorMaker 2 config, in MM2's own format
clusters = A, B
A.bootstrap.servers = {cluster_a.bootstrap_servers}
B.bootstrap.servers = {cluster_b.bootstrap_servers}
A->B.enabled = true
A->B.topics = {topics}
A->B.tasks.max = 2
{SINGLE_BROKER_MM2_PROPERTIES}offset.storage.partitions = 5
refresh.topics.interval.seconds = 2
B.offset.flush.interval.ms = 500
{extra}{isolated_state(state)}""")


stop = stop_mm2


async def test_mm2_properties_flow_mirrors_and_stops_cleanly(cluster_a, cluster_b, unique_name, tmp_path):
    prefix = unique_name("mm2")
    topic = f"{prefix}-orders"
    await create_topic(cluster_a.bootstrap_servers, topic, 3, KEEP_OLD_RECORDS)  # records timestamped 2023
    sent = [(i % 3, f"k{i}".encode(), f"v{i}".encode(), [("n", str(i).encode())], 1_700_000_000_000 + i)
            for i in range(300)]
    await produce(cluster_a.bootstrap_servers, topic, sent)
    write_mm2_properties(tmp_path / "mm2.properties", cluster_a, cluster_b, f"{prefix}-.*")
    proc = start_mm2(tmp_path / "mm2.properties", tmp_path / "mm2.log")
    try:
        got = await read_all(cluster_b.bootstrap_servers, f"A.{topic}", expect=300, timeout=60)
        for partition in range(3):
            assert record_tuples(got[partition]) == [(k, v, h, ts) for p, k, v, h, ts in sent if p == partition]
        # all three connectors run, as in MM2: the B->A flow's heartbeats reach B as A.heartbeats
        # (other tests' heartbeats share the topic: wait for this flow's own)
        deadline = asyncio.get_running_loop().time() + 60
        while True:
            heartbeats = await read_all(cluster_b.bootstrap_servers, "A.heartbeats", expect=1, timeout=60)
            decoded = [Heartbeat.decode(r.key, r.value) for r in heartbeats[0]]
            if any((h.source_cluster_alias, h.target_cluster_alias) == ("B", "A") for h in decoded):
                break
            assert asyncio.get_running_loop().time() < deadline, "no B->A heartbeat reached B as A.heartbeats"
            await asyncio.sleep(1)
        assert "A.checkpoints.internal" in await topics_of(cluster_b.bootstrap_servers)
        # applications on B can see where their data comes from, through the MirrorClient
        async with MirrorClient({"bootstrap.servers": cluster_b.bootstrap_servers}, KAFKA_CLIENTS) as client:
            assert "A" in await client.upstream_clusters()
            assert await client.replication_hops("A") == 1
            assert f"A.{topic}" in await client.remote_topics("A")
            assert "A.checkpoints.internal" in await client.checkpoint_topics()
        # source offsets are in the flow's offsets topic on B, keyed as MM2 keys them
        offsets = await read_all(cluster_b.bootstrap_servers, f"mm2-offsets.{prefix}.internal", expect=1)
        keys = [json.loads(r.key) for records in offsets.values() for r in records]
        assert any(k[0] == "MirrorSourceConnector" and k[1]["topic"] == topic for k in keys), keys
    finally:
        code = stop(proc)
    assert code == 0, (tmp_path / "mm2.log").read_text()[-3000:]


def test_mm2_config_errors_are_one_line(tmp_path, cluster_a):
    (tmp_path / "bad.properties").write_text("A.bootstrap.servers = x:1\n")
    result = subprocess.run([sys.executable, "-m", "mirrorline.cli.main", "mm2", str(tmp_path / "bad.properties")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "'clusters' is required" in result.stderr.strip().splitlines()[-1]
    (tmp_path / "off.properties").write_text(
        f"clusters = A, B\nA.bootstrap.servers = {cluster_a.bootstrap_servers}\nB.bootstrap.servers = x:1\n")
    result = subprocess.run([sys.executable, "-m", "mirrorline.cli.main", "mm2", str(tmp_path / "off.properties")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "No source->target replication flows" in result.stderr


@pytest.mark.parametrize("forwarding", ["true", "false"], ids=["batches", "records"])
async def test_sigkill_mid_stream_loses_nothing(cluster_a, cluster_b, unique_name, tmp_path, forwarding):
    """On both copy paths: a worker SIGKILLed under load loses no record and keeps per-partition order."""
    prefix = unique_name("kill")
    topic = f"{prefix}-stream"
    partitions, total = 6, 30_000
    await create_topic(cluster_a.bootstrap_servers, topic, partitions)
    write_mm2_properties(tmp_path / "mm2.properties", cluster_a, cluster_b, f"{prefix}-.*",
                         extra=f"A->B.batch.forwarding.enabled = {forwarding}\n")

    async def stream() -> None:
        batch = 500
        for start in range(0, total, batch):
            await produce(cluster_a.bootstrap_servers, topic,
                          [(i % partitions, f"k{i}".encode(), f"v{i}".encode(), [("n", str(i).encode())], None)
                           for i in range(start, start + batch)])
            await asyncio.sleep(0.05)

    producer = asyncio.create_task(stream())
    proc = start_mm2(tmp_path / "mm2.properties", tmp_path / "mm2.log")
    try:
        # let it copy part of the stream, then kill it without warning
        await read_all(cluster_b.bootstrap_servers, f"A.{topic}", expect=total // 3, timeout=90)
        assert stop(proc, signal.SIGKILL) == -signal.SIGKILL
        proc = start_mm2(tmp_path / "mm2.properties", tmp_path / "mm2.log")
        await producer
        source, target = await read_mirrored(cluster_a.bootstrap_servers, topic, cluster_b.bootstrap_servers,
                                              f"A.{topic}", timeout=120)
    finally:
        stop(proc)
    duplicates = 0
    for partition in range(partitions):
        expected = [(r.key, r.value) for r in source[partition]]
        copied = [(r.key, r.value) for r in target[partition]]
        deduplicated = list(dict.fromkeys(copied))
        assert deduplicated == expected, f"partition {partition}: a record is missing or out of order"
        duplicates += len(copied) - len(deduplicated)
    log_text = (tmp_path / "mm2.log").read_text()
    path = "forwarding record batches whole" if forwarding == "true" else "record by record"
    assert path in log_text, "the tasks did not log the copy path the test asked for"
    print(f"\nSIGKILL mid-stream ({path}): {total} source records, all on B in order, {duplicates} duplicates")
    report = os.environ.get("MIRRORLINE_REPORT")
    if report:
        with open(report, "a") as handle:
            handle.write(f"sigkill_duplicates={duplicates} of {total}\n")



async def test_two_mm2_nodes_share_a_flow_and_take_over(cluster_a, cluster_b, unique_name, tmp_path):
    """Two `mirrorline mm2` processes with one file share the flow's tasks; stopping one moves them all."""
    prefix = unique_name("nodes")
    topic = f"{prefix}-orders"
    partitions, total = 4, 8_000
    await create_topic(cluster_a.bootstrap_servers, topic, partitions)
    write_mm2_properties(tmp_path / "mm2.properties", cluster_a, cluster_b, f"{prefix}-.*")
    text = (tmp_path / "mm2.properties").read_text().replace("A->B.tasks.max = 2", "A->B.tasks.max = 4")
    (tmp_path / "mm2.properties").write_text(text)
    status_topic = f"mm2-status.{prefix}.internal"

    async def stream() -> None:
        for start in range(0, total, 200):
            await produce(cluster_a.bootstrap_servers, topic, [(i % partitions, f"k{i}".encode(), f"v{i}".encode(),
                                                                [], None) for i in range(start, start + 200)])
            await asyncio.sleep(0.1)

    first = start_mm2(tmp_path / "mm2.properties", tmp_path / "node-1.log")
    second = start_mm2(tmp_path / "mm2.properties", tmp_path / "node-2.log")
    producer = asyncio.create_task(stream())
    try:
        deadline = asyncio.get_running_loop().time() + 90
        while True:
            owners = await task_owners(cluster_b.bootstrap_servers, status_topic, "MirrorSourceConnector")
            if len(owners) == 4 and len(set(owners.values())) == 2:
                break
            assert asyncio.get_running_loop().time() < deadline, f"tasks never spread over both nodes: {owners}"
            await asyncio.sleep(0.5)
        assert sorted(list(owners.values()).count(node) for node in set(owners.values())) == [2, 2]
        await read_all(cluster_b.bootstrap_servers, f"A.{topic}", expect=total // 4, timeout=60)
        assert stop(first) == 0
        stopped = {w for w in owners.values() if w.endswith(f":{first.pid}")}
        assert len(stopped) == 1, owners
        deadline = asyncio.get_running_loop().time() + 60
        while True:
            owners = await task_owners(cluster_b.bootstrap_servers, status_topic, "MirrorSourceConnector")
            if len(owners) == 4 and {w.rsplit(":", 1)[1] for w in owners.values()} == {str(second.pid)}:
                break
            assert asyncio.get_running_loop().time() < deadline, f"tasks did not move to the other node: {owners}"
            await asyncio.sleep(0.5)
        await producer
        source, target = await read_mirrored(cluster_a.bootstrap_servers, topic, cluster_b.bootstrap_servers,
                                              f"A.{topic}", timeout=90)
    finally:
        if not producer.done():
            producer.cancel()
        stop(first)
        stop(second)
    for partition in range(partitions):
        expected = [(r.key, r.value) for r in source[partition]]
        assert list(dict.fromkeys((r.key, r.value) for r in target[partition])) == expected, partition
    events = await status_history(cluster_b.bootstrap_servers, status_topic, "MirrorSourceConnector")
    assert not overlaps(events)
