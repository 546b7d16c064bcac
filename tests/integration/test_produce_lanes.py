"""Produce lanes and ListOffsets on a side connection, against a real broker, checked with librdkafka.

- A producer with ``produce.connections.per.broker=2`` writes forwarded record batches to 12
  partitions over two connections to the broker (both carry produce requests), and every record
  arrives exactly once, in order, in its partition, as librdkafka reads it. Idempotence holds
  across the lanes: the sequence numbers of a partition never go out of order.
- A consumer whose fetch waits long on an empty partition (``fetch.max.wait.ms`` 5 s) answers
  ``end_offsets`` at once: the ListOffsets does not queue behind the waiting fetch.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from confluent_kafka import Consumer as RdConsumer
from confluent_kafka import TopicPartition as RdPartition

from mirrorline.api import TopicPartition
from mirrorline.clients.runtime_clients import KAFKA_CLIENTS
from mirrorline.clients.side_connections import SIDE_GROUP

pytestmark = pytest.mark.integration

PARTITIONS = 12
ROUNDS = 20
RECORDS_PER_BATCH = 40


def encoded_batch(partition: int, round_: int) -> bytes:
    """One magic-2 batch of RECORDS_PER_BATCH records of ~2 KB, values naming partition, round and index."""
    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 2 ** 30)
    for i in range(RECORDS_PER_BATCH):
        value = b"%02d.%03d.%03d." % (partition, round_, i) + b"v" * 2000
        builder.append(i, 1_700_000_000_000 + i, b"k%d" % i, value, [])
    return bytes(builder.build())


def rd_values(bootstrap: str, topic: str, partition: int, count: int) -> list[bytes]:
    consumer = RdConsumer({"bootstrap.servers": bootstrap, "group.id": "rd-lanes", "enable.auto.commit": False})
    consumer.assign([RdPartition(topic, partition, 0)])
    out: list[bytes] = []
    try:
        deadline = time.monotonic() + 60
        while len(out) < count and time.monotonic() < deadline:
            out.extend(m.value()[:11] for m in consumer.consume(500, timeout=0.5) if m.error() is None)
    finally:
        consumer.close()
    return out


@pytest.mark.parametrize("lanes", [1, 2])
async def test_forwarded_batches_over_lanes_arrive_once_and_in_order(cluster_a, make_topic, lanes):
    bootstrap = cluster_a.bootstrap_servers
    topic = await make_topic(cluster_a, PARTITIONS, f"lanes{lanes}")
    producer = KAFKA_CLIENTS.producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": "true",
                                       "produce.connections.per.broker": str(lanes)})
    async with producer:
        futures = []
        for round_ in range(ROUNDS):
            for partition in range(PARTITIONS):
                futures.append(await producer.send_record_batch(topic, partition, encoded_batch(partition, round_),
                                                                RECORDS_PER_BATCH))
        await producer.flush()
        offsets = [future.result().offset for future in futures]
        groups = {group for _node, group in producer._producer.client._conns if _node != "bootstrap"}
    # per partition, batch after batch at consecutive offsets: nothing lost, repeated or reordered
    for partition in range(PARTITIONS):
        assert offsets[partition::PARTITIONS] == [r * RECORDS_PER_BATCH for r in range(ROUNDS)]
    lane_groups = {g for g in groups if isinstance(g, tuple) and g[0] == "produce-lane"}
    assert len(lane_groups) == lanes - 1, f"connection groups used: {groups}"
    for partition in (0, 7, 11):
        values = await asyncio.to_thread(rd_values, bootstrap, topic, partition, ROUNDS * RECORDS_PER_BATCH)
        assert values == [b"%02d.%03d.%03d." % (partition, r, i) for r in range(ROUNDS)
                          for i in range(RECORDS_PER_BATCH)]


async def test_a_bad_lane_count_is_refused_naming_the_setting(cluster_a):
    with pytest.raises(ValueError, match="produce.connections.per.broker"):
        KAFKA_CLIENTS.producer({"bootstrap.servers": cluster_a.bootstrap_servers, "produce.connections.per.broker": "0"})


async def test_end_offsets_and_topic_ids_do_not_wait_behind_a_long_polling_fetch(cluster_a, make_topic):
    bootstrap = cluster_a.bootstrap_servers
    topic = await make_topic(cluster_a, 1, "aside")
    tp = TopicPartition(topic, 0)
    consumer = KAFKA_CLIENTS.consumer({"bootstrap.servers": bootstrap, "fetch.max.wait.ms": "5000"})
    async with consumer:
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        polling = asyncio.create_task(consumer.getmany(timeout_ms=8000))
        await asyncio.sleep(1.0)  # the empty fetch now waits on the broker for up to 5 s
        started = time.monotonic()
        ends = await consumer.end_offsets([tp])
        waited = time.monotonic() - started
        started = time.monotonic()
        ids = await consumer.topic_ids([topic])
        waited_ids = time.monotonic() - started
        polling.cancel()
        await asyncio.gather(polling, return_exceptions=True)
        groups = {group for _node, group in consumer._consumer._client._conns}
    assert ends == {tp: 0}
    assert waited < 2.0, f"end_offsets took {waited:.2f} s: it queued behind the 5 s fetch"
    assert set(ids) == {topic} and len(ids[topic]) == 22  # Uuid.toString(): 16 bytes, base64, unpadded
    assert waited_ids < 2.0, f"topic_ids took {waited_ids:.2f} s: it queued behind the 5 s fetch"
    assert SIDE_GROUP in groups
