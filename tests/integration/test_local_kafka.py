"""The local Apache Kafka harness gives two real, independent, fully working clusters."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.structs import OffsetAndMetadata

from mirrorline.localkafka import LocalKafka, LocalKafkaError
from mirrorline.localkafka.cluster import port_is_free
from support.kafka import KEEP_OLD_RECORDS, partitions_of, produce, read_all, topics_of

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("cluster_name", ["A", "B"])
async def test_keyed_records_with_headers_round_trip_in_order(kafka_clusters, make_topic, cluster_name):
    cluster = kafka_clusters[cluster_name]
    topic = await make_topic(cluster, partitions=4, config=KEEP_OLD_RECORDS)  # records timestamped 2023
    sent = [(i % 4, f"key-{i}".encode(), f"value-{i}".encode(), [("seq", str(i).encode()), ("c", b"x")],
             1_700_000_000_000 + i) for i in range(200)]
    await produce(cluster.bootstrap_servers, topic, sent)

    got = await read_all(cluster.bootstrap_servers, topic, expect=200)

    for partition in range(4):
        expected = [(k, v, h, ts) for p, k, v, h, ts in sent if p == partition]
        actual = [(r.key, r.value, list(r.headers), r.timestamp) for r in got[partition]]
        assert actual == expected
        assert [r.offset for r in got[partition]] == list(range(len(expected)))


async def test_group_offsets_commit_and_read_back_through_admin(cluster_a, make_topic, unique_name):
    topic = await make_topic(cluster_a, partitions=3)
    group = unique_name("group")
    consumer = AIOKafkaConsumer(bootstrap_servers=cluster_a.bootstrap_servers, group_id=group,
                                enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.subscribe([topic])
        await consumer.getmany(timeout_ms=3000)  # join the group so commits carry a generation
        offsets = {TopicPartition(topic, p): OffsetAndMetadata(10 * (p + 1), f"meta-{p}") for p in range(3)}
        await consumer.commit(offsets)
    finally:
        await consumer.stop()

    admin = AIOKafkaAdminClient(bootstrap_servers=cluster_a.bootstrap_servers)
    await admin.start()
    try:
        committed = await admin.list_consumer_group_offsets(group)
        groups = {g[0] for g in await admin.list_consumer_groups()}
    finally:
        await admin.close()
    assert {tp.partition: (om.offset, om.metadata) for tp, om in committed.items()} == {
        0: (10, "meta-0"), 1: (20, "meta-1"), 2: (30, "meta-2")}
    assert group in groups


async def test_clusters_are_independent(cluster_a, cluster_b, make_topic):
    topic = await make_topic(cluster_a, partitions=2)

    async def describe(bootstrap):
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            return (await admin.describe_cluster())["cluster_id"], set(await admin.list_topics())
        finally:
            await admin.close()

    (id_a, topics_a), (id_b, topics_b) = await asyncio.gather(
        describe(cluster_a.bootstrap_servers), describe(cluster_b.bootstrap_servers))
    assert id_a != id_b
    assert topic in topics_a
    assert topic not in topics_b


async def test_brokers_run_on_kafka_defaults(cluster_a):
    """Tests must hold on the settings users run: auto-creation on, 7-day time retention."""
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    admin = AIOKafkaAdminClient(bootstrap_servers=cluster_a.bootstrap_servers)
    await admin.start()
    try:
        [response] = await admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")])
    finally:
        await admin.close()
    configs = {entry[0]: entry[1] for entry in response.resources[0][4]}
    assert configs["auto.create.topics.enable"] == "true"
    assert configs["log.retention.hours"] == "168" and configs["log.retention.ms"] is None


async def test_helpers_never_auto_create_and_refuse_records_retention_would_delete(cluster_a, make_topic,
                                                                                  unique_name):
    missing = unique_name("missing")
    assert await partitions_of(cluster_a.bootstrap_servers, missing) == []
    with pytest.raises(AssertionError, match="does not exist"):
        await read_all(cluster_a.bootstrap_servers, missing, timeout=1)
    with pytest.raises(AssertionError, match="does not exist"):
        await produce(cluster_a.bootstrap_servers, missing, [(0, b"k", b"v", [], 1_700_000_000_000)])
    assert missing not in await topics_of(cluster_a.bootstrap_servers)

    topic = await make_topic(cluster_a)
    with pytest.raises(AssertionError, match="KEEP_OLD_RECORDS"):
        await produce(cluster_a.bootstrap_servers, topic, [(0, b"k", b"v", [], 1_700_000_000_000)])
    await produce(cluster_a.bootstrap_servers, topic, [(0, b"k", b"v", [], None)])
    assert sum(len(r) for r in (await read_all(cluster_a.bootstrap_servers, topic, expect=1)).values()) == 1


def test_any_kafka_client_can_use_the_clusters(cluster_b, unique_name):
    """librdkafka (confluent-kafka), not our client, creates a topic, produces and consumes."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = unique_name("rdkafka")
    admin = AdminClient({"bootstrap.servers": cluster_b.bootstrap_servers})
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": cluster_b.bootstrap_servers, "enable.idempotence": True})
    for i in range(20):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % 2, headers=[("h", b"%d" % i)])
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": cluster_b.bootstrap_servers, "group.id": unique_name("g"),
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    seen = []
    try:
        for _ in range(60):
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                seen.append((msg.partition(), msg.key(), msg.value(), msg.headers()))
            if len(seen) == 20:
                break
    finally:
        consumer.close()
    assert sorted(seen) == sorted((i % 2, b"k%d" % i, b"v%d" % i, [("h", b"%d" % i)]) for i in range(20))


def test_start_is_harmless_when_running_and_a_taken_port_is_a_clear_error(local_kafka, kafka_clusters, tmp_path):
    # Re-running start: same clusters, same ids, same PIDs.
    before = {name: (c.pid(), c.cluster_id()) for name, c in local_kafka.known().items()}
    local_kafka.start(["A", "B"])
    assert {name: (c.pid(), c.cluster_id()) for name, c in local_kafka.known().items()} == before

    # A second manager whose ports collide with cluster A's broker port refuses with a specific message.
    taken = kafka_clusters["A"].port
    assert not port_is_free(taken)
    other = LocalKafka(tmp_path / "other", base_port=taken)
    with pytest.raises(LocalKafkaError, match=f"port {taken} on 127.0.0.1 is taken"):
        other.start(["X"])
