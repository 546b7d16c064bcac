"""A transactional source topic, idle after its last commit: no false stall, lag 0 (issue 23).

A transaction's commit or abort marker takes an offset, and so do an aborted transaction's
records, which a read_committed consumer is never given. Counting offsets instead of records made
the final marker look like a record waiting forever: the stall watchdog flagged the task after
``task.stall.timeout.ms`` and ``replication_lag_records`` stayed at 1. The source is written by
librdkafka's transactional producer (confluent_kafka); what arrived on B is read with librdkafka
too. Both copy paths (whole batches, record by record).
"""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition as CTopicPartition

from support.kafka import create_topic
from support.worker import Rest, all_running, metric_value, running_standalone

pytestmark = pytest.mark.integration

PARTITIONS = 2
STALL_TIMEOUT_MS = 1500


def write_transactions(bootstrap: str, topic: str, transactional_id: str) -> list[bytes]:
    """Committed, aborted (flushed first, so its records are in the log), committed; returns the committed values."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions()
    committed = []
    for round_, commit in enumerate((True, False, True)):
        producer.begin_transaction()
        values = [f"{round_}-{p}-{i}".encode() for p in range(PARTITIONS) for i in range(20)]
        for value in values:
            producer.produce(topic, value=value, partition=int(value.split(b"-")[1]))
        producer.flush()
        if commit:
            producer.commit_transaction()
            committed += values
        else:
            producer.abort_transaction()
    return committed


def read_committed(bootstrap: str, topic: str, expect: int, timeout: float = 60.0) -> list[bytes]:
    """Every record of ``topic`` a read_committed librdkafka consumer gets (waits for ``expect``)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    consumer.assign([CTopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got: list[bytes] = []
    try:
        import time
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and len(got) < expect:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
        for _ in range(4):  # and nothing more arrives
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
    finally:
        consumer.close()
    return got


def _stalled(status: dict) -> bool:
    return any(any(w.startswith("stalled") for w in t.get("warnings", [])) for t in status["tasks"])


@pytest.mark.parametrize("forwarding", ["true", "false"], ids=["batches", "records"])
async def test_idle_transactional_source_is_neither_stalled_nor_lagging(cluster_a, cluster_b, unique_name, tmp_path,
                                                                        forwarding):
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    topic = unique_name("txn")
    await create_topic(a, topic, PARTITIONS)
    committed = await asyncio.to_thread(write_transactions, a, topic, topic)
    name = unique_name("mirror")
    config = {"name": name, "connector.class": "MirrorSource", "source.cluster.alias": "A",
              "target.cluster.alias": "B", "source.cluster.bootstrap.servers": a,
              "target.cluster.bootstrap.servers": b, "topics": topic, "replication.factor": "1",
              "emit.offset-syncs.enabled": "false", "tasks.max": "1", "batch.forwarding.enabled": forwarding}
    worker = {"bootstrap.servers": b, "task.stall.timeout.ms": str(STALL_TIMEOUT_MS),
              "offset.storage.file.filename": str(tmp_path / "offsets")}
    async with running_standalone(worker, [config]) as url, Rest(url) as rest:
        await rest.wait_for(f"/connectors/{name}/status", all_running(1))
        copied = await asyncio.to_thread(read_committed, b, f"A.{topic}", len(committed))
        assert sorted(copied) == sorted(committed)  # the aborted transaction is not mirrored
        # idle now, its logs ending with commit markers: watched for several stall timeouts
        deadline = asyncio.get_running_loop().time() + 4 * STALL_TIMEOUT_MS / 1000
        while asyncio.get_running_loop().time() < deadline:
            status, body = await rest.call("GET", f"/connectors/{name}/status")
            assert status == 200 and not _stalled(body), body
            await asyncio.sleep(0.25)
        _, text = await rest.call("GET", "/metrics")
        assert metric_value(text, "kafka_connect_task_stalled", connector=name) == 0.0
        lags = [metric_value(text, "kafka_connect_mirror_source_connector_replication_lag_records",
                             topic=f"A.{topic}", partition=str(p)) for p in range(PARTITIONS)]
        assert lags == [0.0] * PARTITIONS
        # the series exists (a missing one would read 0 too): the record count of the same labels is there
        assert all(metric_value(text, "kafka_connect_mirror_source_connector_record_count_total",
                                topic=f"A.{topic}", partition=str(p)) == 40 for p in range(PARTITIONS))
