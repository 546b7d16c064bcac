"""mirrorline.clients.kafka_admin against a real Kafka broker (the admin calls aiokafka lacks)."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import UnknownTopicOrPartitionError
from aiokafka.structs import OffsetAndMetadata

from mirrorline.clients.kafka_admin import (
    GroupNotEmptyError,
    alter_consumer_group_offsets,
    delete_consumer_group_offsets,
    describe_consumer_group_state,
    incremental_alter_configs,
)

pytestmark = pytest.mark.integration


@pytest.fixture
async def admin(cluster_a):
    client = AIOKafkaAdminClient(bootstrap_servers=cluster_a.bootstrap_servers)
    await client.start()
    yield client
    await client.close()


async def topic_configs(admin, topic) -> dict[str, tuple[str, bool]]:
    """``name -> (value, is_default)`` for every config of ``topic``."""
    [response] = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    [resource] = response.resources
    assert resource[0] == 0, resource
    out = {}
    for entry in resource[4]:
        name, value, source = entry[0], entry[1], entry[3]
        # v0 has is_default (bool); v1+ has config_source (5 = DEFAULT_CONFIG, 4 = static broker).
        is_default = source is True or (not isinstance(source, bool) and source in (4, 5))
        out[name] = (value, is_default)
    return out


async def configs_when(admin, topic, ready, timeout: float = 15.0) -> dict[str, tuple[str, bool]]:
    """Topic configs once ``ready(configs)`` holds: in KRaft the broker learns of an alteration a
    moment after the controller accepted it, so a describe right after an alter may be stale."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            configs = await topic_configs(admin, topic)
            if ready(configs):
                return configs
        except AssertionError:  # the broker does not know the new topic yet
            configs = None
        if asyncio.get_running_loop().time() > deadline:
            return configs
        await asyncio.sleep(0.2)


async def test_incremental_set_keeps_other_configs_and_delete_restores_default(admin, cluster_a, make_topic):
    topic = await make_topic(cluster_a, config={"cleanup.policy": "compact", "max.message.bytes": "123456"})
    before = await configs_when(admin, topic, lambda c: c["cleanup.policy"][0] == "compact")
    default_retention = before["retention.ms"][0]
    assert before["cleanup.policy"] == ("compact", False)

    await incremental_alter_configs(admin, topic, {"retention.ms": "3600000"})

    after = await configs_when(admin, topic, lambda c: c["retention.ms"][0] == "3600000")
    assert after["retention.ms"] == ("3600000", False)
    # Legacy AlterConfigs would have reset these two to their defaults.
    assert after["cleanup.policy"] == ("compact", False)
    assert after["max.message.bytes"] == ("123456", False)

    await incremental_alter_configs(admin, topic, {"segment.ms": "7200000"}, delete_configs=["max.message.bytes"])

    final = await configs_when(admin, topic, lambda c: c["segment.ms"][0] == "7200000")
    assert final["max.message.bytes"][1] is True
    assert final["max.message.bytes"][0] != "123456"
    assert final["segment.ms"] == ("7200000", False)
    assert final["retention.ms"] == ("3600000", False)
    assert final["cleanup.policy"] == ("compact", False)

    await incremental_alter_configs(admin, topic, {}, delete_configs=["retention.ms"])
    restored = await configs_when(admin, topic, lambda c: c["retention.ms"][1] is True)
    assert restored["retention.ms"] == (default_retention, True)


async def test_incremental_alter_configs_raises_broker_errors(admin, cluster_a, make_topic, unique_name):
    with pytest.raises(UnknownTopicOrPartitionError):
        await incremental_alter_configs(admin, unique_name("missing"), {"retention.ms": "1000"})
    topic = await make_topic(cluster_a)
    with pytest.raises(Exception) as info:
        await incremental_alter_configs(admin, topic, {"retention.ms": "not-a-number"})
    assert "retention.ms" in str(info.value)


async def test_alter_read_back_and_delete_group_offsets(admin, cluster_a, make_topic, unique_name):
    topic = await make_topic(cluster_a, partitions=3)
    group = unique_name("g")
    tp0, tp1, tp2 = (TopicPartition(topic, p) for p in range(3))

    await alter_consumer_group_offsets(admin, group, {tp0: 5, tp1: (17, "mm2 checkpoint"), tp2: 0})

    got = await admin.list_consumer_group_offsets(group)
    assert got == {tp0: OffsetAndMetadata(5, ""), tp1: OffsetAndMetadata(17, "mm2 checkpoint"),
                   tp2: OffsetAndMetadata(0, "")}
    assert await describe_consumer_group_state(admin, group) == "Empty"

    # Altering again overwrites only the named partitions.
    await alter_consumer_group_offsets(admin, group, {tp0: (9, "again")})
    got = await admin.list_consumer_group_offsets(group)
    assert got[tp0] == OffsetAndMetadata(9, "again")
    assert got[tp1] == OffsetAndMetadata(17, "mm2 checkpoint")

    await delete_consumer_group_offsets(admin, group, [tp0, tp2])
    got = await admin.list_consumer_group_offsets(group)
    assert got == {tp1: OffsetAndMetadata(17, "mm2 checkpoint")}


async def test_active_group_cannot_be_altered_and_state_is_stable(admin, cluster_a, make_topic, unique_name):
    topic = await make_topic(cluster_a, partitions=2)
    group = unique_name("g")
    tp0 = TopicPartition(topic, 0)
    await alter_consumer_group_offsets(admin, group, {tp0: 1})

    consumer = AIOKafkaConsumer(topic, bootstrap_servers=cluster_a.bootstrap_servers, group_id=group,
                                enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        await consumer.getmany(timeout_ms=2000)
        assert consumer.assignment(), "the consumer did not join its group"
        assert await describe_consumer_group_state(admin, group) == "Stable"

        with pytest.raises(GroupNotEmptyError) as info:
            await alter_consumer_group_offsets(admin, group, {tp0: 42})
        assert info.value.group == group
        assert info.value.error_code in (22, 25, 27)  # ILLEGAL_GENERATION/UNKNOWN_MEMBER_ID/REBALANCE_IN_PROGRESS
        with pytest.raises(GroupNotEmptyError) as info:
            await delete_consumer_group_offsets(admin, group, [tp0])
        assert info.value.error_code == 86  # GROUP_SUBSCRIBED_TO_TOPIC
        assert (await admin.list_consumer_group_offsets(group))[tp0].offset == 1
    finally:
        await consumer.stop()

    assert await describe_consumer_group_state(admin, group) == "Empty"
    await alter_consumer_group_offsets(admin, group, {tp0: 42})
    assert (await admin.list_consumer_group_offsets(group))[tp0] == OffsetAndMetadata(42, "")


async def test_state_of_unknown_group_is_dead(admin, unique_name):
    assert await describe_consumer_group_state(admin, unique_name("nobody")) == "Dead"


async def test_broker_negotiates_the_non_flexible_versions_we_define(admin):
    from aiokafka.protocol.commit import OffsetCommitRequest

    from mirrorline.clients.kafka_admin import IncrementalAlterConfigsRequest, OffsetDeleteRequest

    conn = await admin._client._get_conn(admin._client.get_random_node())
    versions = conn._versions
    chosen = {
        "IncrementalAlterConfigs": IncrementalAlterConfigsRequest([], False).prepare(versions).API_VERSION,
        "OffsetCommit": OffsetCommitRequest("g", -1, "", -1, []).prepare(versions).API_VERSION,
        "OffsetDelete": OffsetDeleteRequest("g", []).prepare(versions).API_VERSION,
    }
    print("broker ranges:", {k: versions[k] for k in (8, 44, 47)}, "chosen:", chosen)
    assert chosen == {"IncrementalAlterConfigs": 0, "OffsetCommit": 3, "OffsetDelete": 0}
