"""Small async Kafka helpers for tests and benchmarks (topic creation, produce, read back)."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from framework.api.producer import RecordProducer


async def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict | None = None) -> None:
    """Create a topic (replication factor 1) and raise if the broker reports an error."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        response = await admin.create_topics(
            [NewTopic(name, partitions, 1, topic_configs={k: str(v) for k, v in (config or {}).items()})])
        for topic_error in response.topic_errors:
            if topic_error[1] != 0:
                raise RuntimeError(f"creating topic {name} failed: {topic_error}")
    finally:
        await admin.close()


async def topics_of(bootstrap: str) -> set[str]:
    """Every topic name on the cluster."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return set(await admin.list_topics())
    finally:
        await admin.close()


async def partitions_of(bootstrap: str, topic: str) -> list[int]:
    """The partition ids of ``topic`` as the broker sees them now (empty if it does not exist)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        described = await admin.describe_topics([topic])
    finally:
        await admin.close()
    for entry in described:
        if entry["topic"] == topic and entry["error_code"] == 0:
            return sorted(p["partition"] for p in entry["partitions"])
    return []


async def read_all(bootstrap: str, topic: str, timeout: float = 30.0, expect: int | None = None):
    """Every record of ``topic`` from the beginning to its current end, by partition.

    With ``expect``, waits (up to ``timeout``) until that many records exist in total.
    """
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                auto_offset_reset="earliest")
    await consumer.start()
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            partitions = await partitions_of(bootstrap, topic)
            tps = [TopicPartition(topic, p) for p in sorted(partitions)]
            ends = await consumer.end_offsets(tps) if tps else {}
            done = tps and (expect is None or sum(ends.values()) >= expect)
            if done or loop.time() > deadline:
                break
            await asyncio.sleep(0.2)
        if not tps:
            raise AssertionError(f"topic {topic} does not exist on {bootstrap}")
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        out = {tp.partition: [] for tp in tps}
        remaining = {tp for tp in tps if ends[tp] > 0}
        while remaining and loop.time() <= deadline + timeout:
            batch = await consumer.getmany(*remaining, timeout_ms=1000)
            for tp, records in batch.items():
                out[tp.partition].extend(r for r in records if r.offset < ends[tp])
                if records and records[-1].offset >= ends[tp] - 1:
                    remaining.discard(tp)
        return out
    finally:
        await consumer.stop()


async def produce(bootstrap: str, topic: str, records, **client: object) -> None:
    """Send ``(partition, key, value, headers, timestamp_ms)`` tuples with acks=all and idempotence.

    ``client`` adds aiokafka producer arguments (e.g. SASL settings from ``client_kwargs``).
    """
    producer = RecordProducer(**{"acks": "all", "enable_idempotence": True, **client, "bootstrap_servers": bootstrap})
    await producer.start()
    try:
        futures = [await producer.send(topic, value=v, key=k, partition=p, headers=h, timestamp_ms=ts)
                   for p, k, v, h, ts in records]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


def record_tuples(records) -> list[tuple]:
    """``(key, value, headers, timestamp)`` of each consumed record, in order: what a mirror must keep."""
    return [(r.key, r.value, list(r.headers), r.timestamp) for r in records]


async def read_mirrored(source_bootstrap: str, topic: str, target_bootstrap: str, remote_topic: str,
                        timeout: float = 120.0):
    """``(source, target)`` records by partition, once every source record is on the target.

    Counting target records is not enough after a crash: duplicates can make up the count while
    a partition still lags. This waits until each target partition holds every (key, value)
    of its source partition, or until ``timeout``, and then returns what both hold.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        source = await read_all(source_bootstrap, topic)
        target = await read_all(target_bootstrap, remote_topic, expect=sum(len(r) for r in source.values()),
                                timeout=max(1.0, deadline - loop.time()))
        complete = all({(r.key, r.value) for r in records} <= {(r.key, r.value) for r in target.get(p, [])}
                       for p, records in source.items())
        if complete or loop.time() > deadline:
            return source, target
        await asyncio.sleep(1.0)
