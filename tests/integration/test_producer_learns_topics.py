"""A producer writing to many new topics learns them in one metadata refresh, against a real broker.

aiokafka refreshes metadata for a send to a topic it does not know yet, and each refresh describes
every topic the producer writes to. A MirrorSource task whose first poll holds records for 2,000
new remote topics therefore waited for 2,000 refreshes, each larger than the last: minutes of
decoding metadata in the scale benchmark. ``learn_topics`` (called by the runtime with each poll's
topics) asks for all of them at once; the sends that follow need no refresh of their own.
"""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import Producer as RdProducer
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorline.clients.runtime_clients import KAFKA_CLIENTS

pytestmark = pytest.mark.integration

TOPICS = 60


def rd_create(bootstrap: str, names: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(n, 2, 1) for n in names], operation_timeout=60).values():
        future.result(timeout=60)


def rd_write_one_each(bootstrap: str, names: list[str]) -> None:
    """Write one record to every partition with librdkafka, so each new partition has a settled leader.

    A just-created partition may answer NOT_LEADER for a moment, and each such answer costs our
    producer a metadata refresh that has nothing to do with learning topics; under CI load that
    moment stretched past the bound below.
    """
    producer = RdProducer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 60000})
    failures: list[str] = []

    def delivered(err, msg):
        if err is not None:
            failures.append(f"{msg.topic()}[{msg.partition()}]: {err}")

    for name in names:
        for partition in (0, 1):
            producer.produce(name, b"warm", partition=partition, on_delivery=delivered)
    assert producer.flush(60) == 0, "librdkafka could not deliver to the new topics within 60 s"
    assert not failures, failures


def count_metadata_requests(producer) -> list[int]:
    """Count the producer's metadata refreshes (aiokafka's client sends them in ``_metadata_update``)."""
    client = producer._producer.client
    seen: list[int] = []
    original = client._metadata_update

    async def metadata_update(cluster_metadata, topics):
        seen.append(len(topics))
        return await original(cluster_metadata, topics)

    client._metadata_update = metadata_update
    return seen


@pytest.mark.parametrize("learn_first", [True, False])
async def test_sends_to_many_new_topics_need_one_refresh_when_learnt_first(cluster_a, unique_name, learn_first):
    bootstrap = cluster_a.bootstrap_servers
    prefix = unique_name("learn")
    names = [f"{prefix}-{i:03d}" for i in range(TOPICS)]
    producer = KAFKA_CLIENTS.producer({"bootstrap.servers": bootstrap, "acks": "all"})
    async with producer:
        # the topics appear after the producer started, as remote topics a connector creates do
        await asyncio.to_thread(rd_create, bootstrap, names)
        await asyncio.to_thread(rd_write_one_each, bootstrap, names)
        requests = count_metadata_requests(producer)
        for _ in range(50):  # the broker's metadata shows the new topics a moment after creation
            if learn_first:
                await producer.learn_topics(names)
            if all(producer._producer._metadata.partitions_for_topic(n) for n in names) or not learn_first:
                break
            await asyncio.sleep(0.2)
        learnt = len(requests)
        futures = [await producer.send(name, b"v", None, 1) for name in names]
        await producer.flush()
        assert [f.result().offset for f in futures] == [1] * TOPICS  # after librdkafka's record
        during_sends = len(requests) - learnt
    if learn_first:  # the leaders are settled: at most a stray refresh, not one per topic
        assert during_sends <= 2, f"{during_sends} metadata refreshes while sending to learnt topics"
    else:  # what the runtime avoids: a refresh (at least) per new topic
        assert during_sends >= TOPICS // 2
