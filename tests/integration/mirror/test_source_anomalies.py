"""Source anomalies are reported, never silent: records lost to retention, a source topic
re-created, a remote topic deleted on the target (real clusters A and B, broker defaults)."""

from __future__ import annotations

import asyncio
import logging
import re

import pytest
from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.records_to_delete import RecordsToDelete
from aiokafka.errors import KafkaError

from mirrorline.api.context import SourceTaskContext
from mirrorline.runtime.context import WorkerSourceTaskContext
from support.kafka import create_topic, partitions_of, produce, read_all, topics_of
from support.worker import Rest, all_running, metric_value, running_standalone

pytestmark = pytest.mark.integration

_METRIC = "kafka_connect_mirror_source_connector_"
#: Status warnings exist once the runtime implements them; until then the API's methods are no-ops.
TASK_WARNINGS_IMPLEMENTED = WorkerSourceTaskContext.report_warning is not SourceTaskContext.report_warning


def values(partitions: int, start: int, end: int, tag: str = "v"):
    """Records ``tag-p-i`` for i in [start, end) on every partition, with current timestamps
    (historical ones would be deleted by the brokers' default 7-day retention)."""
    return [(p, f"k{i}".encode(), f"{tag}-{p}-{i}".encode(), [], None)
            for i in range(start, end) for p in range(partitions)]


def expected(partition: int, offsets, tag: str = "v") -> list[bytes]:
    """The values ``values`` wrote at ``offsets`` of ``partition``."""
    return [f"{tag}-{partition}-{i}".encode() for i in offsets]


def warnings_of(caplog, logger: str = "mirrorline.connectors.source_mirror.task") -> list[str]:
    """The WARNING messages ``logger`` logged during the test."""
    return [r.getMessage() for r in caplog.records if r.name == logger and r.levelno == logging.WARNING]


async def metrics_text(rest: Rest) -> str:
    """The worker's Prometheus exposition."""
    status, text = await rest.call("GET", "/metrics")
    assert status == 200
    return text


async def delete_records(bootstrap: str, before: dict[TopicPartition, int]) -> None:
    """DeleteRecords: move each partition's log start to the given offset, as retention would."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        low = await admin.delete_records({tp: RecordsToDelete(offset) for tp, offset in before.items()})
        assert low == before
    finally:
        await admin.close()


async def delete_topic(bootstrap: str, topic: str, timeout: float = 30.0) -> None:
    """Delete ``topic`` and wait until the cluster no longer lists it."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.delete_topics([topic])
    finally:
        await admin.close()
    deadline = asyncio.get_running_loop().time() + timeout
    while topic in await topics_of(bootstrap):
        assert asyncio.get_running_loop().time() < deadline, f"{topic} still listed after delete"
        await asyncio.sleep(0.2)


async def recreate_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0) -> None:
    """Create ``topic`` again, retrying while the broker still finishes the deletion."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            await create_topic(bootstrap, topic, partitions)
            return
        except (RuntimeError, KafkaError):
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.5)


async def task_status(rest: Rest, name: str) -> dict:
    """Task 0's status entry."""
    _, status = await rest.call("GET", f"/connectors/{name}/status")
    return status["tasks"][0]


async def test_records_deleted_before_mirroring_are_reported_exactly(cluster_a, cluster_b, make_topic, flow_config,
                                                                     tmp_path, unique_name, caplog):
    caplog.set_level(logging.INFO)
    topic = await make_topic(cluster_a, partitions=2)
    remote = f"A.{topic}"
    await produce(cluster_a.bootstrap_servers, topic, values(2, 0, 100))
    worker = {"bootstrap.servers": cluster_b.bootstrap_servers,
              "offset.storage.file.filename": str(tmp_path / "offsets.json")}
    name = unique_name("mirror")
    connector = {"name": name, **flow_config(topics=topic, tasks_max=1)}
    async with running_standalone(worker, [connector]) as url, Rest(url) as rest:
        await rest.wait_for(f"/connectors/{name}/status", all_running(1))
        first = await read_all(cluster_b.bootstrap_servers, remote, expect=200, timeout=60)
        assert {p: len(r) for p, r in first.items()} == {0: 100, 1: 100}
        await asyncio.sleep(1.5)  # > offset.flush.interval.ms: the stored offsets cover all 200 records

    # while the worker is down: 100 more records per partition, and partition 0 loses [100, 150)
    await produce(cluster_a.bootstrap_servers, topic, values(2, 100, 200))
    await delete_records(cluster_a.bootstrap_servers, {TopicPartition(topic, 0): 150})

    async with running_standalone(worker, [connector]) as url, Rest(url) as rest:
        await rest.wait_for(f"/connectors/{name}/status", all_running(1))
        mirrored = await read_all(cluster_b.bootstrap_servers, remote, expect=150 + 200, timeout=60)
        await asyncio.sleep(1.0)  # anything beyond the expected records would show up now
        mirrored = await read_all(cluster_b.bootstrap_servers, remote)
        assert [r.value for r in mirrored[0]] == expected(0, [*range(0, 100), *range(150, 200)])
        assert [r.value for r in mirrored[1]] == expected(1, range(0, 200))

        text = await metrics_text(rest)
        series = {"source": "A", "target": "B", "topic": remote}
        assert metric_value(text, _METRIC + "records_lost_to_retention_total", partition="0", **series) == 50
        assert metric_value(text, _METRIC + "records_lost_to_retention_total", partition="1", **series) == 0
        assert metric_value(text, _METRIC + "source_offset_resets_total", partition="0",
                            reason="lost-to-retention", **series) == 1
        assert metric_value(text, _METRIC + "source_offset_resets_total", partition="1",
                            reason="lost-to-retention", **series) == 0
        lost = [w for w in warnings_of(caplog) if "lost to retention" in w]
        assert len(lost) == 1, lost
        assert f"source topic {topic} partition 0, offsets [100, 150) (50 records)" in lost[0]
        assert "continues from offset 150" in lost[0]
        status = await task_status(rest, name)
        assert status["state"] == "RUNNING"
        if TASK_WARNINGS_IMPLEMENTED:
            assert any(topic in w and "[100, 150)" in w for w in status.get("warnings", [])), status


@pytest.mark.parametrize("refresh_s", [3600, 2], ids=["task-notices", "connector-reassigns"])
async def test_source_topic_recreated_while_mirroring_is_mirrored_from_its_start(cluster_a, cluster_b, make_topic,
                                                                                flow_config, tmp_path, unique_name,
                                                                                caplog, refresh_s):
    """With no refresh, the running task meets the re-created topic at its next fetch; with a short
    one, the connector drops the topic's partitions and assigns them again, and the restarted task
    finds its stored offsets beyond the new log's end at start."""
    caplog.set_level(logging.INFO)
    topic = await make_topic(cluster_a, partitions=2)
    remote = f"A.{topic}"
    await produce(cluster_a.bootstrap_servers, topic, values(2, 0, 50, tag="old"))
    worker = {"bootstrap.servers": cluster_b.bootstrap_servers,
              "offset.storage.file.filename": str(tmp_path / "offsets.json")}
    name = unique_name("mirror")
    config = flow_config(topics=topic, tasks_max=1, refresh_topics_interval_seconds=refresh_s)
    async with running_standalone(worker, [{"name": name, **config}]) as url, Rest(url) as rest:
        await rest.wait_for(f"/connectors/{name}/status", all_running(1))
        await read_all(cluster_b.bootstrap_servers, remote, expect=100, timeout=60)

        await delete_topic(cluster_a.bootstrap_servers, topic)
        await asyncio.sleep(2.0)  # the task fetches a missing topic for a while and must survive it
        if refresh_s > 2:
            assert (await task_status(rest, name))["state"] == "RUNNING"
        await recreate_topic(cluster_a.bootstrap_servers, topic, partitions=2)
        assert await partitions_of(cluster_a.bootstrap_servers, topic) == [0, 1]
        await produce(cluster_a.bootstrap_servers, topic, values(2, 0, 30, tag="new"))

        await read_all(cluster_b.bootstrap_servers, remote, expect=2 * (50 + 30), timeout=60)
        await asyncio.sleep(1.0)
        mirrored = await read_all(cluster_b.bootstrap_servers, remote)
        for p in (0, 1):
            assert [r.value for r in mirrored[p]] == expected(p, range(50), "old") + expected(p, range(30), "new")

        text = await metrics_text(rest)
        for p in ("0", "1"):
            assert metric_value(text, _METRIC + "source_offset_resets_total", source="A", target="B", topic=remote,
                                partition=p, reason="offsets-went-backwards") == 1
            assert metric_value(text, _METRIC + "records_lost_to_retention_total", topic=remote, partition=p) == 0
        backwards = sorted(w for w in warnings_of(caplog) if "went backwards" in w)
        # found by the offsets (the log end is 0 or 30, depending on whether the new records were there at
        # the first fetch) or, by a running task, by the topic ID
        assert [bool(re.search(f"source topic {topic} partition {p} (ends at offset (0|30) but the task's "
                               f"position is 50|was deleted and re-created \\(topic ID \\S+, was \\S+\\); the "
                               f"task's position 50 was in the old topic)", w))
                for p, w in enumerate(backwards)] == [True, True], backwards
        status = await task_status(rest, name)
        assert status["state"] == "RUNNING"
        if TASK_WARNINGS_IMPLEMENTED:
            assert any(topic in w and "went backwards" in w for w in status.get("warnings", [])), status


async def test_remote_topic_deleted_on_target_is_recreated_and_mirrored(cluster_a, cluster_b, make_topic,
                                                                        flow_config, tmp_path, unique_name, caplog):
    caplog.set_level(logging.INFO)
    topic = await make_topic(cluster_a, partitions=3)
    remote = f"A.{topic}"
    await produce(cluster_a.bootstrap_servers, topic, values(3, 0, 10, tag="old"))
    worker = {"bootstrap.servers": cluster_b.bootstrap_servers,
              "offset.storage.file.filename": str(tmp_path / "offsets.json")}
    name = unique_name("mirror")
    config = flow_config(topics=topic, tasks_max=1, refresh_topics_interval_seconds=2)
    async with running_standalone(worker, [{"name": name, **config}]) as url, Rest(url) as rest:
        await rest.wait_for(f"/connectors/{name}/status", all_running(1))
        await read_all(cluster_b.bootstrap_servers, remote, expect=30, timeout=60)

        await delete_topic(cluster_b.bootstrap_servers, remote)
        logged_before = len(caplog.records)
        await produce(cluster_a.bootstrap_servers, topic, values(3, 10, 30, tag="new"))

        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while await partitions_of(cluster_b.bootstrap_servers, remote) != [0, 1, 2]:
            assert loop.time() < deadline, f"{remote} not re-created with 3 partitions on B: " \
                                           f"{await partitions_of(cluster_b.bootstrap_servers, remote)}"
            await asyncio.sleep(0.5)
        mirrored = await read_all(cluster_b.bootstrap_servers, remote, expect=60, timeout=60)
        await asyncio.sleep(1.0)
        mirrored = await read_all(cluster_b.bootstrap_servers, remote)
        for p in range(3):
            assert [r.value for r in mirrored[p]] == expected(p, range(10, 30), "new"), f"partition {p}"
        assert any(r.name == "mirrorline.connectors.source_mirror.topics" and remote in r.getMessage()
                   for r in caplog.records[logged_before:]), "re-creation of the remote topic not logged"
        status = await task_status(rest, name)
        assert status["state"] == "RUNNING", status
