"""Many topics at once: CreateTopics split under the KRaft controller's per-request record limit.

A KRaft controller refuses a CreateTopics request that costs more than 10,000 metadata records
(one per topic, one per partition, one per config) with POLICY_VIOLATION, "Unable to perform
excessively large batch operation" (KAFKA-14996). MirrorSource creates every new remote topic of a
refresh at once: 2,000 topics of 4 partitions plus the heartbeats topic (10,002 records) was
enough to leave every one of them uncreated, refresh after refresh. (Java MM2 has the same bug past
10,000 records: KAFKA-19327.)

The test makes the controller's limit bite cheaply, with topic configs rather than thousands of
partitions: 420 one-partition topics with 22 configs each cost 10,080 records. Sent as one request
the real broker refuses them all; through the client layer every topic is created with its
configs, as librdkafka's AdminClient reads them back.
"""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from mirrorline.api import NewTopic
from mirrorline.clients import kafka_admin
from mirrorline.clients.runtime_clients import KAFKA_CLIENTS

pytestmark = pytest.mark.integration

TOPICS = 420
#: valid topic-level settings at values close to Kafka's defaults, 22 config records per topic
CONFIGS = {
    "cleanup.policy": "delete", "compression.type": "producer", "delete.retention.ms": "86400001",
    "file.delete.delay.ms": "60001", "flush.messages": "9223372036854775806", "flush.ms": "9223372036854775806",
    "index.interval.bytes": "4097", "max.compaction.lag.ms": "9223372036854775806", "max.message.bytes": "1048589",
    "message.timestamp.type": "CreateTime", "min.cleanable.dirty.ratio": "0.51", "min.compaction.lag.ms": "1",
    "min.insync.replicas": "1", "preallocate": "false", "retention.bytes": "-1", "retention.ms": "604800001",
    "segment.bytes": "1073741823", "segment.index.bytes": "10485759", "segment.jitter.ms": "1",
    "segment.ms": "604800001", "unclean.leader.election.enable": "false", "message.timestamp.after.max.ms": "3600001",
}


def rd_topic_state(bootstrap: str, names: list[str]) -> tuple[set[str], dict[str, str]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = set(admin.list_topics(timeout=30).topics) & set(names)
    [future] = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, names[-1])]).values()
    configs = {name: entry.value for name, entry in future.result(timeout=30).items()} if names[-1] in existing else {}
    return existing, configs


def rd_delete(bootstrap: str, names: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics(names, operation_timeout=60).values():
        try:
            future.result(timeout=60)
        except Exception:  # noqa: BLE001 - best effort: the names are unique to this test
            pass


async def test_topics_past_the_controller_limit_are_created_in_several_requests(cluster_a, unique_name, monkeypatch):
    bootstrap = cluster_a.bootstrap_servers
    prefix = unique_name("chunks")
    names = [f"{prefix}-{i:04d}" for i in range(TOPICS)]
    assert TOPICS * (2 + len(CONFIGS)) > 10_000  # one request would cross the controller's limit
    admin = KAFKA_CLIENTS.admin({"bootstrap.servers": bootstrap})
    async with admin:
        # as one request (the limit lifted on our side), the real controller refuses every topic
        monkeypatch.setattr(kafka_admin, "MAX_RECORDS_PER_CREATE_TOPICS", 10 ** 9)
        refused = await admin.create_topics([NewTopic(n, 1, 1, CONFIGS) for n in names])
        assert set(refused) == set(names)
        assert {error.code for error in refused.values()} == {44}, refused[names[0]]  # POLICY_VIOLATION
        assert "excessively large" in str(refused[names[0]])
        existing, _ = await asyncio.to_thread(rd_topic_state, bootstrap, names)
        assert existing == set()
        monkeypatch.undo()

        created = await admin.create_topics([NewTopic(n, 1, 1, CONFIGS) for n in names])
    try:
        assert created == {n: None for n in names}
        for _ in range(60):  # a broker's metadata shows new topics a moment after the controller made them
            existing, configs = await asyncio.to_thread(rd_topic_state, bootstrap, names)
            if existing == set(names) and configs:
                break
            await asyncio.sleep(0.5)
        assert existing == set(names)
        assert {k: configs[k] for k in CONFIGS} == CONFIGS
    finally:
        await asyncio.to_thread(rd_delete, bootstrap, names)

