"""An unchanged metadata refresh rebuilds nothing, and a changed cluster is still seen (real broker).

mirrorline.clients.metadata_reuse skips rebuilding a client's view of the cluster when a refresh's
answer is byte-for-byte the last one applied. Against a real broker: two refreshes of an unchanged
topic must give equal answers (else the skip would never happen) and keep the view; after
librdkafka (an independent client) adds partitions, the next refresh must show them.

It also makes mirrorline's own clients ask for no topic while they have none; a pattern
subscription must still see every topic.
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaClient
from confluent_kafka.admin import AdminClient, NewPartitions

from mirrorline.api.kafka import TopicPartition
from mirrorline.clients import metadata_reuse, process_patches
from mirrorline.clients.admin import KafkaAdmin
from mirrorline.clients.consumer import GroupConsumer, KafkaConsumer
from mirrorline.clients.producer import KafkaProducer
from support.kafka import AssignedPartitions

pytestmark = pytest.mark.integration


def add_partitions(bootstrap: str, topic: str, total: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the futures are done
    futures = admin.create_partitions([NewPartitions(topic, total)])
    for future in futures.values():
        future.result(30)


async def test_unchanged_refresh_keeps_the_view_and_new_partitions_are_seen(cluster_a, make_topic):
    process_patches.install()
    topic = await make_topic(cluster_a, 3)
    client = AIOKafkaClient(bootstrap_servers=cluster_a.bootstrap_servers)
    await client.bootstrap()
    try:
        client.add_topic(topic)
        assert await client.force_metadata_update()
        assert client.cluster.partitions_for_topic(topic) == {0, 1, 2}
        view = client.cluster._partitions
        refreshed_at = client.cluster._last_successful_refresh_ms
        await asyncio.sleep(0.01)
        assert await client.force_metadata_update()
        # the broker's answer did not change: the view is the same object, only the refresh time moved
        assert client.cluster._partitions is view
        assert client.cluster._last_successful_refresh_ms > refreshed_at

        await asyncio.to_thread(add_partitions, cluster_a.bootstrap_servers, topic, 5)
        deadline = asyncio.get_running_loop().time() + 30
        while client.cluster.partitions_for_topic(topic) != {0, 1, 2, 3, 4}:
            assert asyncio.get_running_loop().time() < deadline, client.cluster.partitions_for_topic(topic)
            await asyncio.sleep(0.2)
            assert await client.force_metadata_update()
        assert client.cluster._partitions is not view
        assert metadata_reuse.is_installed()
    finally:
        await client.close()


async def test_topicless_clients_refresh_for_no_topic_but_pattern_subscriptions_for_all(cluster_a, make_topic):
    """mirrorline's admin clients, producers and consumers ask for no topic while they have none
    (aiokafka would ask for the whole cluster); an unmarked aiokafka client and a consumer subscribed
    by pattern (which aiokafka implements as an empty topic list) still see every topic."""
    process_patches.install()
    topic = await make_topic(cluster_a, 2)
    props = {"bootstrap.servers": cluster_a.bootstrap_servers}
    plain = AIOKafkaClient(bootstrap_servers=cluster_a.bootstrap_servers)
    admin = KafkaAdmin.from_settings(props)
    producer = KafkaProducer.from_settings(props)
    consumer = KafkaConsumer.from_settings(props)
    by_pattern = GroupConsumer.from_settings({**props, "group.id": f"pattern-{topic}"})
    await plain.bootstrap()
    started = []
    try:
        for client in (admin, producer, consumer):
            await client.start()
            started.append(client)
        assert await plain.force_metadata_update()
        assert topic in plain.cluster.topics()  # aiokafka's own behaviour, which pattern subscriptions need
        for view in (admin._admin._client, producer._producer.client, consumer._consumer._client):
            assert await view.force_metadata_update()
            assert view.cluster.topics() == set() and view.cluster.brokers(), view.cluster.topics()
        everything = await admin._admin._client.fetch_all_metadata()
        assert topic in everything.topics()

        await producer.send(topic, b"v", partition=1)  # a producer with a topic asks for that topic
        assert producer._producer.client.cluster.partitions_for_topic(topic) == {0, 1}
        consumer.assign([TopicPartition(topic, 0)])
        assert await consumer._consumer._client.force_metadata_update()
        assert topic in consumer._consumer._client.cluster.topics()

        assigned = AssignedPartitions()
        by_pattern.subscribe(assigned, pattern=f"^{topic}$")
        await by_pattern.start()
        started.append(by_pattern)
        deadline = asyncio.get_running_loop().time() + 60
        while assigned.partitions != {TopicPartition(topic, 0), TopicPartition(topic, 1)}:
            assert asyncio.get_running_loop().time() < deadline, assigned.partitions
            await by_pattern.getmany(timeout_ms=200)
        assert await by_pattern._consumer._client.force_metadata_update()
        assert topic in by_pattern._consumer._client.cluster.topics()
    finally:
        for client in reversed(started):
            await client.stop()
        await plain.close()
