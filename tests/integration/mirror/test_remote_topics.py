"""Remote topics get the source's partition count before any record is mirrored into them.

Brokers here run on Kafka's defaults (auto-creation on). The cases: a remote topic that already
exists with fewer partitions; a DR consumer on the target subscribed to the remote name before
the mirror starts (it must not auto-create a 1-partition topic); and CreateTopics answered
TOPIC_ALREADY_EXISTS because someone else created the topic between our describe and our create.
Each record must arrive in the partition with its source partition's number, in order.
"""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from aiokafka import AIOKafkaConsumer

from mirrorline.connectors.mirror_client.policies import DefaultReplicationPolicy
from mirrorline.api import NewTopic as ContractNewTopic
from mirrorline.clients.admin import KafkaAdmin
from mirrorline.clients.runtime_clients import KAFKA_CLIENTS
from mirrorline.connectors.source_mirror.topics import ConfigFilter, create_remote_topics
from support.kafka import create_topic, partitions_of, produce, read_all, record_tuples, topics_of
from support.worker import Rest, all_running, running_standalone

pytestmark = pytest.mark.integration

PARTITIONS = 4
COUNT = 400


def records(count: int = COUNT, partitions: int = PARTITIONS):
    """``(partition, key, value, headers, timestamp)``; recent timestamps, as retention is 7 days."""
    base = int(time.time() * 1000) - 60_000
    return [(i % partitions, None if i % 37 == 0 else f"k{i}".encode(), None if i % 41 == 0 else f"v{i}".encode(),
             [("i", str(i).encode())], base + i) for i in range(count)]


def by_partition(sent) -> dict[int, list[tuple]]:
    out: dict[int, list[tuple]] = {p: [] for p in range(PARTITIONS)}
    for p, k, v, h, ts in sent:
        out[p].append((k, v, h, ts))
    return out


async def test_existing_remote_topic_with_fewer_partitions_is_grown_first(cluster_a, cluster_b, make_topic,
                                                                          flow_config, unique_name, tmp_path):
    topic = await make_topic(cluster_a, partitions=PARTITIONS, prefix="short")
    remote = f"A.{topic}"
    await create_topic(cluster_b.bootstrap_servers, remote, 1)
    sent = records()
    await produce(cluster_a.bootstrap_servers, topic, sent)
    name = unique_name("mirror")
    worker = {"bootstrap.servers": cluster_b.bootstrap_servers,
              "offset.storage.file.filename": str(tmp_path / "offsets.json")}
    async with running_standalone(worker, [{"name": name, **flow_config(topics=topic)}]) as url, Rest(url) as rest:
        await rest.wait_for(f"/connectors/{name}/status", all_running(2))
        mirrored = await read_all(cluster_b.bootstrap_servers, remote, expect=COUNT, timeout=90)
        status = await rest.wait_for(f"/connectors/{name}/status", all_running(2))
    assert await partitions_of(cluster_b.bootstrap_servers, remote) == list(range(PARTITIONS))
    assert {p: record_tuples(rs) for p, rs in mirrored.items()} == by_partition(sent)
    assert all(not t.get("trace") for t in status["tasks"]), status


async def test_consumer_waiting_on_target_does_not_create_the_remote_topic(cluster_a, cluster_b, make_topic,
                                                                           flow_config, unique_name, tmp_path):
    topic = await make_topic(cluster_a, partitions=PARTITIONS, prefix="dr")
    remote = f"A.{topic}"
    sent = records()
    await produce(cluster_a.bootstrap_servers, topic, sent)
    # A DR application already consuming the remote topic's name on the target, before the mirror runs.
    # aiokafka only looks for a subscribed topic that did not exist at the next metadata refresh
    # (metadata.max.age.ms, 5 minutes by default), so the test shortens it.
    consumer = AIOKafkaConsumer(bootstrap_servers=cluster_b.bootstrap_servers, group_id=unique_name("dr-app"),
                                auto_offset_reset="earliest", metadata_max_age_ms=1000)
    await consumer.start()
    try:
        consumer.subscribe([remote])
        assert await consumer.getmany(timeout_ms=2000) == {}
        await asyncio.sleep(1)
        assert remote not in await topics_of(cluster_b.bootstrap_servers)
        name = unique_name("mirror")
        worker = {"bootstrap.servers": cluster_b.bootstrap_servers,
                  "offset.storage.file.filename": str(tmp_path / "offsets.json")}
        received: dict[int, list] = {p: [] for p in range(PARTITIONS)}
        async with running_standalone(worker, [{"name": name, **flow_config(topics=topic)}]) as url, \
                Rest(url) as rest:
            await rest.wait_for(f"/connectors/{name}/status", all_running(2))
            deadline = asyncio.get_running_loop().time() + 90
            while sum(map(len, received.values())) < COUNT and asyncio.get_running_loop().time() < deadline:
                for tp, batch in (await consumer.getmany(timeout_ms=1000)).items():
                    received[tp.partition].extend(batch)
            status = await rest.wait_for(f"/connectors/{name}/status", all_running(2))
    finally:
        await consumer.stop()
    assert await partitions_of(cluster_b.bootstrap_servers, remote) == list(range(PARTITIONS))
    assert {p: record_tuples(rs) for p, rs in received.items()} == by_partition(sent)
    assert all(not t.get("trace") for t in status["tasks"]), status


class RacedAdmin(KafkaAdmin):
    """A real admin client whose CreateTopics loses a race: just before it, the topic appears with 1 partition
    (as if another worker, or an auto-creating client elsewhere, created it after we described the target)."""

    async def create_topics(self, new_topics, timeout_ms=30_000):
        """Create each topic with one partition first, then send the real request."""
        new_topics = list(new_topics)
        response = await super().create_topics([ContractNewTopic(t.name, 1, 1) for t in new_topics])
        assert all(error is None for error in response.values()), response
        return await super().create_topics(new_topics, timeout_ms)


async def test_topic_already_exists_answer_is_read_again_and_grown(cluster_a, cluster_b, make_topic, caplog):
    topic = await make_topic(cluster_a, partitions=PARTITIONS, prefix="raced")
    remote = f"A.{topic}"
    source = KAFKA_CLIENTS.admin({"bootstrap.servers": cluster_a.bootstrap_servers})
    target = RacedAdmin.from_settings({"bootstrap.servers": cluster_b.bootstrap_servers})
    await source.start()
    await target.start()
    try:
        with caplog.at_level(logging.INFO, logger="mirrorline.connectors.source_mirror.topics"):
            counts = await create_remote_topics(source, target, "A", DefaultReplicationPolicy(), {topic: PARTITIONS},
                                                1, ConfigFilter([], "target"))
    finally:
        await source.close()
        await target.close()
    assert counts == {remote: PARTITIONS}
    assert await partitions_of(cluster_b.bootstrap_servers, remote) == list(range(PARTITIONS))
    messages = [r.getMessage() for r in caplog.records]
    assert f"Remote topic {remote} already exists with 1 partition(s); it is grown now if its source has more" \
        in messages
    assert f"Increased partitions of remote topic {remote} from 1 to {PARTITIONS} to follow its source topic" \
        in messages
