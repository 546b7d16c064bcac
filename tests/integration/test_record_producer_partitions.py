"""RecordProducer and partitions its metadata does not know yet (real broker).

A record names partition 3 of a topic that has 1: the producer waits up to ``max_block_ms`` for
the partition (it must never send the record elsewhere, nor fail with aiokafka's assertion), then
raises the retriable PartitionNotAvailableError; if the topic is grown while it waits, the record
lands in partition 3. Both send paths are covered: records with a key or value (aiokafka's send)
and records with neither (RecordProducer's own path).
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions

from mirrorline.api import PartitionNotAvailableError, RetriableError
from mirrorline.clients.producer import RecordProducer
from support.kafka import partitions_of, read_all

pytestmark = pytest.mark.integration

KEYED = {"key": b"k", "value": b"v"}
EMPTY = {"key": None, "value": None}


@pytest.mark.parametrize("record", [KEYED, EMPTY], ids=["keyed", "null-key-and-value"])
async def test_unknown_partition_raises_retriable_error_after_max_block_ms(cluster_b, make_topic, record):
    topic = await make_topic(cluster_b, partitions=1)
    producer = RecordProducer(bootstrap_servers=cluster_b.bootstrap_servers, max_block_ms=1500)
    await producer.start()
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(PartitionNotAvailableError) as caught:
            await producer.send(topic, partition=3, **record)
        waited = loop.time() - started
        # the producer still works for partitions that exist
        await (await producer.send(topic, partition=0, **record))
    finally:
        await producer.stop()
    assert 1.4 <= waited < 10, waited
    error = caught.value
    assert isinstance(error, RetriableError) and error.retriable
    assert (error.topic, error.partition) == (topic, 3)
    assert f"Partition 3 of topic {topic}" in str(error) and "grown to at least 4 partitions" in str(error)
    assert await partitions_of(cluster_b.bootstrap_servers, topic) == [0]
    records = await read_all(cluster_b.bootstrap_servers, topic, expect=1)
    assert [(r.key, r.value) for r in records[0]] == [(record["key"], record["value"])]


@pytest.mark.parametrize("record", [KEYED, EMPTY], ids=["keyed", "null-key-and-value"])
async def test_send_waits_for_a_partition_added_meanwhile(cluster_b, make_topic, record):
    topic = await make_topic(cluster_b, partitions=1)
    bootstrap = cluster_b.bootstrap_servers
    producer = RecordProducer(bootstrap_servers=bootstrap, max_block_ms=30_000)
    await producer.start()
    try:
        assert await producer.partitions_for(topic) == {0}  # metadata now says 1 partition
        sending = asyncio.create_task(producer.send(topic, partition=3, headers=[("n", b"1")], **record))
        await asyncio.sleep(1.5)
        assert not sending.done()  # waiting, not failed nor sent elsewhere
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            await admin.create_partitions({topic: NewPartitions(total_count=4)})
        finally:
            await admin.close()
        metadata = await (await asyncio.wait_for(sending, 30))
    finally:
        await producer.stop()
    assert (metadata.topic, metadata.partition, metadata.offset) == (topic, 3, 0)
    records = await read_all(bootstrap, topic, expect=1)
    assert {p: [(r.key, r.value, list(r.headers)) for r in rs] for p, rs in records.items()} == {
        0: [], 1: [], 2: [], 3: [(record["key"], record["value"], [("n", b"1")])]}


async def test_missing_topic_raises_retriable_error_and_is_not_created(cluster_b, unique_name):
    topic = unique_name("missing")
    producer = RecordProducer(bootstrap_servers=cluster_b.bootstrap_servers, max_block_ms=1000)
    await producer.start()
    try:
        with pytest.raises(PartitionNotAvailableError) as caught:
            await producer.send(topic, value=b"v", partition=2)
    finally:
        await producer.stop()
    assert (caught.value.topic, caught.value.partition) == (topic, 2)
    assert f"Topic {topic} is not in the cluster metadata" in str(caught.value)
    assert await partitions_of(cluster_b.bootstrap_servers, topic) == []
