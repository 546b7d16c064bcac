"""Small async Kafka helpers for tests and benchmarks (topic creation, produce, read back).

The local clusters run on Kafka's broker defaults: topics are auto-created by any client's
metadata request for a missing topic, and records older than ``log.retention.ms`` (7 days)
are deleted at the next retention check (30 s after start, then every 5 minutes). These
helpers never auto-create a topic, and :func:`produce` refuses records the broker would
delete while a test still needs them.
"""

from __future__ import annotations

import asyncio
import inspect
import time

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from confluent_kafka import Consumer as LibrdkafkaConsumer, TopicPartition as CTopicPartition

from mirrorline.clients.consumer import RebalanceListener
from mirrorline.clients.kafka_admin import create_topic
from mirrorline.clients.producer import RecordProducer

#: Topic config for records with fixed historical timestamps (e.g. 2023): no time-based
#: retention, so the broker's retention check does not delete them mid-test. Remote topics
#: created by the mirror copy it from their source topic.
KEEP_OLD_RECORDS = {"retention.ms": "-1"}

#: How long a test may still need a record after producing it (see :func:`produce`).
_RETENTION_MARGIN_MS = 10 * 60 * 1000


async def topics_of(bootstrap: str) -> set[str]:
    """Every topic name on the cluster."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return set(await admin.list_topics())
    finally:
        await admin.close()


async def partitions_of(bootstrap: str, topic: str) -> list[int]:
    """The partition ids of ``topic`` as the broker sees them now (empty if it does not exist).

    Never creates the topic: a metadata request naming a missing topic would make a broker
    with ``auto.create.topics.enable=true`` create it, so this asks for every topic instead.
    """
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        described = await admin.describe_topics()
    finally:
        await admin.close()
    for entry in described:
        if entry["topic"] == topic and entry["error_code"] == 0:
            return sorted(p["partition"] for p in entry["partitions"])
    return []


async def topic_config(bootstrap: str, topic: str, name: str, **client: object) -> str | None:
    """The current value of topic config ``name`` (None if the topic does not exist).

    ``client`` adds aiokafka admin arguments (e.g. SASL settings from ``client_kwargs``).
    """
    admin = AIOKafkaAdminClient(**{**client, "bootstrap_servers": bootstrap})
    await admin.start()
    try:
        [response] = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    finally:
        await admin.close()
    [(error_code, _message, _type, _name, entries)] = response.resources
    if error_code != 0:
        return None
    return next((entry[1] for entry in entries if entry[0] == name), None)


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
    With explicit timestamps, the topic must exist and keep records that old for a while
    longer: otherwise this raises, naming :data:`KEEP_OLD_RECORDS`, instead of letting the
    broker's retention check delete them at some point of the test run.
    """
    records = list(records)
    timestamps = [r[4] for r in records if r[4] is not None]
    if timestamps:
        await _check_retention(bootstrap, topic, min(timestamps), client)
    producer = RecordProducer(**{"acks": "all", "enable_idempotence": True, **client, "bootstrap_servers": bootstrap})
    await producer.start()
    try:
        futures = [await producer.send(topic, value=v, key=k, partition=p, headers=h, timestamp_ms=ts)
                   for p, k, v, h, ts in records]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def _check_retention(bootstrap: str, topic: str, oldest_ms: int, client: dict) -> None:
    admin_parameters = inspect.signature(AIOKafkaAdminClient).parameters
    admin_client = {k: v for k, v in client.items() if k in admin_parameters}
    deadline = asyncio.get_running_loop().time() + 5
    while (retention := await topic_config(bootstrap, topic, "retention.ms", **admin_client)) is None \
            and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.2)  # a topic just created elsewhere may not be known to the broker yet
    if retention is None:
        raise AssertionError(f"produce: topic {topic} does not exist on {bootstrap}; create it first "
                             f"(the broker would auto-create it with default settings)")
    age_ms = int(time.time() * 1000) - oldest_ms
    if int(retention) >= 0 and age_ms > int(retention) - _RETENTION_MARGIN_MS:
        raise AssertionError(
            f"produce: a record timestamped {oldest_ms} is {age_ms / 3_600_000:.1f} h old, but topic {topic} "
            f"has retention.ms={retention}: the broker's retention check would delete it during the test. "
            f"Create the topic with config=KEEP_OLD_RECORDS (support.kafka) or use recent timestamps.")


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


async def commit_on(bootstrap: str, group: str, offsets: dict[TopicPartition, int], **client: object) -> None:
    """Commit ``offsets`` for consumer group ``group`` as a consumer does (assigned partitions,
    explicit offsets). ``client`` adds aiokafka consumer arguments (e.g. TLS/SASL from ``client_kwargs``)."""
    consumer = AIOKafkaConsumer(**{**client, "bootstrap_servers": bootstrap}, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign(list(offsets))
        await consumer.commit(offsets)
    finally:
        await consumer.stop()


async def group_offsets(bootstrap: str, group: str, **client: object) -> dict[TopicPartition, int]:
    """The committed offsets of consumer group ``group`` (partitions without one left out).

    ``client`` adds aiokafka admin arguments (e.g. TLS/SASL settings from ``client_kwargs``).
    """
    admin = AIOKafkaAdminClient(**{**client, "bootstrap_servers": bootstrap})
    await admin.start()
    try:
        return {tp: om.offset for tp, om in (await admin.list_consumer_group_offsets(group)).items()
                if om.offset >= 0}
    finally:
        await admin.close()


class AssignedPartitions(RebalanceListener):
    """A group consumer's listener that keeps what the group has handed out (``partitions``)."""

    def __init__(self) -> None:
        self.partitions: set = set()

    async def on_partitions_revoked(self, revoked) -> None:
        self.partitions -= revoked

    async def on_partitions_assigned(self, assigned) -> None:
        self.partitions |= assigned


def librdkafka_read(bootstrap: str, topic: str, partitions: int) -> dict[int, list[tuple]]:
    """Every record of ``topic`` per partition as (offset, key, value, headers, timestamp), with confluent-kafka."""
    consumer = LibrdkafkaConsumer({"bootstrap.servers": bootstrap, "group.id": "librdkafka-check",
                         "enable.auto.commit": False})
    out: dict[int, list[tuple]] = {}
    try:
        for p in range(partitions):
            low, high = consumer.get_watermark_offsets(CTopicPartition(topic, p), timeout=10)
            consumer.assign([CTopicPartition(topic, p, low)])
            rows = []
            while len(rows) < high - low:
                message = consumer.poll(10)
                assert message is not None, f"{topic}-{p}: timed out after {len(rows)} of {high - low}"
                assert message.error() is None, message.error()
                rows.append((message.offset(), message.key(), message.value(),
                             tuple(message.headers() or ()), message.timestamp()[1]))
            out[p] = rows
    finally:
        consumer.close()
    return out
