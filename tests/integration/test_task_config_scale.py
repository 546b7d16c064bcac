"""MirrorSource task configs for 50,000 partitions are accepted by a config topic on Kafka's defaults,
and a config topic whose ``max.message.bytes`` is too small gets an error naming that setting.

The task configs are those MirrorSourceConnector.task_configs returns for 50,000 partition names
(12,500 topics of ~40 characters x 4 partitions, tasks.max=1: the largest single record). They are
written with KafkaConfigStore.put_task_configs to a fresh config topic, read back by a second
store and, independently, by librdkafka (confluent-kafka), whose decoded assignment must name
every partition. MM2's plain list for the same partitions is 2.2 MB, over the broker's default
``max.message.bytes`` of 1048588 (tests/unit/test_task_config_size.py).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from mirrorline.connectors.source_mirror.config import TASK_ASSIGNED_PARTITIONS
from mirrorline.connectors.source_mirror.topics import parse_assigned, task_partitions
from mirrorline.storage.kafka_configs import KafkaConfigStore, TaskConfigsTooLargeError
from support.kafka import create_topic

pytestmark = pytest.mark.integration


def _unit_helpers():
    path = Path(__file__).resolve().parents[1] / "unit" / "test_task_config_size.py"
    spec = importlib.util.spec_from_file_location("mirrorline_task_config_size", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


helpers = _unit_helpers()


def read_task_records(bootstrap: str, topic: str, timeout: float = 30.0) -> dict[str, dict]:
    """Every ``task-*`` record of the config topic, read with librdkafka."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "enable.auto.commit": False,
                         "fetch.message.max.bytes": 2_000_000})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, 0)])
        found, position = {}, 0
        end = time.monotonic() + timeout
        while position < high and time.monotonic() < end:
            message = consumer.poll(1.0)
            if message is None or message.error() is not None:
                continue
            position = message.offset() + 1
            if message.key().startswith(b"task-"):
                found[message.key().decode()] = json.loads(message.value())
        return found
    finally:
        consumer.close()


async def test_task_configs_for_50000_partitions_are_accepted_and_read_back(cluster_a, unique_name):
    topics = helpers.realistic_topics(12_500, 4)
    configs = await helpers.connector_for(topics).task_configs(1)
    topic = unique_name("configs")
    store = KafkaConfigStore(topic, {"bootstrap.servers": cluster_a.bootstrap_servers}, replication_factor=1)
    await store.start()
    try:
        await store.put_task_configs("big", configs)
        assert store.task_configs("big") == configs
    finally:
        await store.stop()
    again = KafkaConfigStore(topic, {"bootstrap.servers": cluster_a.bootstrap_servers}, replication_factor=1)
    await again.start()
    try:
        assert again.task_configs("big") == configs
    finally:
        await again.stop()
    records = await asyncio.to_thread(read_task_records, cluster_a.bootstrap_servers, topic)
    assigned = parse_assigned(records["task-big-0"]["properties"][TASK_ASSIGNED_PARTITIONS])
    assert sorted(assigned) == sorted(task_partitions(topics)) and len(assigned) == 50_000


async def test_a_config_topic_with_a_small_max_message_bytes_names_the_setting(cluster_a, unique_name):
    topic = unique_name("small-configs")
    # the user's config topic (a topic config, not a broker setting): 20 kB per record batch
    await create_topic(cluster_a.bootstrap_servers, topic, 1,
                       {"cleanup.policy": "compact", "max.message.bytes": "20000"})
    configs = await helpers.connector_for(helpers.realistic_topics(12_500, 4)).task_configs(1)
    store = KafkaConfigStore(topic, {"bootstrap.servers": cluster_a.bootstrap_servers}, replication_factor=1)
    await store.start()
    try:
        await store.put_task_configs("small", [{"task.assigned.partitions": "t-0"}])  # a small one fits
        with pytest.raises(TaskConfigsTooLargeError) as raised:
            await store.put_task_configs("small", configs)
        message = str(raised.value)
        assert "max.message.bytes" in message and topic in message and "tasks.max" in message
        assert raised.value.largest > 20000
        # no commit was written: the connector keeps its previous task configs
        await store.read_to_end()
        assert store.task_configs("small") == [{"task.assigned.partitions": "t-0"}]
    finally:
        await store.stop()
