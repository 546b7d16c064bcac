"""Our clients never make a default broker (auto.create.topics.enable=true) create a topic.

Each test names a topic that does not exist, lets one kind of client look it up the way it
normally would, waits, and checks with ListTopics that the topic still does not exist. The
control test sends the same metadata request with auto-creation explicitly allowed and sees
the broker create it, which proves the brokers do run with auto-creation on.
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaClient, AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import UnknownTopicOrPartitionError
from aiokafka.protocol.metadata import MetadataRequest

from mirrorline.api import PartitionNotAvailableError
from mirrorline.clients.producer import RecordProducer
from support.kafka import topics_of

pytestmark = pytest.mark.integration

SETTLE_S = 2.0  # auto-creation is asynchronous on the broker: give it time to show up


async def assert_not_created(bootstrap: str, topic: str) -> None:
    await asyncio.sleep(SETTLE_S)
    assert topic not in await topics_of(bootstrap), f"{topic} was auto-created"


async def test_control_explicitly_allowed_metadata_request_does_create(cluster_b, unique_name):
    topic = unique_name("control")
    client = AIOKafkaClient(bootstrap_servers=cluster_b.bootstrap_servers)
    await client.bootstrap()
    try:
        node = client.get_random_node()
        await client.send(node, MetadataRequest([topic], allow_auto_topic_creation=True))
    finally:
        await client.close()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while topic not in await topics_of(cluster_b.bootstrap_servers) and loop.time() < deadline:
        await asyncio.sleep(0.2)
    assert topic in await topics_of(cluster_b.bootstrap_servers), "the broker does not auto-create topics"


async def test_default_metadata_request_does_not_create(cluster_b, unique_name):
    topic = unique_name("raw")
    client = AIOKafkaClient(bootstrap_servers=cluster_b.bootstrap_servers)
    await client.bootstrap()
    try:
        response = await client.send(client.get_random_node(), MetadataRequest([topic]))
    finally:
        await client.close()
    assert response.API_VERSION >= 4  # versions below 4 have no flag (the broker would always create)
    assert [(t[1], t[0]) for t in response.topics] == [(topic, UnknownTopicOrPartitionError.errno)]
    await assert_not_created(cluster_b.bootstrap_servers, topic)


async def test_producers_do_not_create(cluster_b, unique_name):
    bootstrap = cluster_b.bootstrap_servers
    looked_up, sent, sent_empty, plain = (unique_name(p) for p in ("lookup", "sent", "empty", "plain"))
    producer = RecordProducer(bootstrap_servers=bootstrap, request_timeout_ms=2000, max_block_ms=2000)
    await producer.start()
    try:
        with pytest.raises(UnknownTopicOrPartitionError):
            await producer.partitions_for(looked_up)
        with pytest.raises(PartitionNotAvailableError) as keyed:
            await producer.send(sent, key=b"k", value=b"v", partition=0)
        with pytest.raises(PartitionNotAvailableError) as empty:
            await producer.send(sent_empty, key=None, value=None)
    finally:
        await producer.stop()
    assert (keyed.value.topic, keyed.value.partition) == (sent, 0)
    assert (empty.value.topic, empty.value.partition) == (sent_empty, None)
    assert f"Topic {sent} is not in the cluster metadata" in str(keyed.value)
    plain_producer = AIOKafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=2000)
    await plain_producer.start()
    try:
        with pytest.raises(UnknownTopicOrPartitionError):
            await plain_producer.send(plain, value=b"v")
    finally:
        await plain_producer.stop()
    await asyncio.sleep(SETTLE_S)
    assert {looked_up, sent, sent_empty, plain}.isdisjoint(await topics_of(bootstrap))


async def test_consumers_do_not_create(cluster_b, unique_name):
    bootstrap = cluster_b.bootstrap_servers
    subscribed, assigned = unique_name("subscribed"), unique_name("assigned")
    # Topics are subscribed after start(): aiokafka's start() waits for (and so, on an unpatched
    # client, auto-creates) topics given to the constructor, and fails if they never appear.
    group_consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=unique_name("g"),
                                      auto_offset_reset="earliest", metadata_max_age_ms=500)
    lone_consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                     metadata_max_age_ms=500)
    await group_consumer.start()
    await lone_consumer.start()
    try:
        group_consumer.subscribe([subscribed])
        lone_consumer.assign([TopicPartition(assigned, 0)])
        for _ in range(3):  # several metadata refreshes (every 0.5 s) while fetching
            assert await group_consumer.getmany(timeout_ms=500) == {}
            assert await lone_consumer.getmany(timeout_ms=500) == {}
    finally:
        await group_consumer.stop()
        await lone_consumer.stop()
    await asyncio.sleep(SETTLE_S)
    assert {subscribed, assigned}.isdisjoint(await topics_of(bootstrap))


async def test_admin_describe_topics_does_not_create(cluster_b, unique_name):
    topic = unique_name("described")
    admin = AIOKafkaAdminClient(bootstrap_servers=cluster_b.bootstrap_servers)
    await admin.start()
    try:
        described = await admin.describe_topics([topic])
    finally:
        await admin.close()
    assert [(d["topic"], d["error_code"]) for d in described] == [(topic, UnknownTopicOrPartitionError.errno)]
    await assert_not_created(cluster_b.bootstrap_servers, topic)
