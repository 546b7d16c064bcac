"""Consumers shared under one name against a real broker: one consumer underneath, each member reads
exactly its own partitions, and a member coming or going costs the others nothing. Each test runs
on both fetch loops: aiokafka's (records) and mirrorline's own (whole batches, :mod:`batch_fetcher`).

librdkafka (confluent-kafka, an independent client) writes the records; the members are made by
``KAFKA_CLIENTS.consumer(..., share=...)`` as a MirrorSource task makes its consumer.
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.record.default_records import DefaultRecordBatch
from confluent_kafka import Producer

from mirrorline.api import Consumer, TopicPartition
from mirrorline.api.clients import BatchFetch
from mirrorline.api.kafka import FetchedBatch
from mirrorline.clients.batch_fetcher import BatchFetcher
from mirrorline.clients.runtime_clients import KAFKA_CLIENTS

pytestmark = pytest.mark.integration

PARTITIONS = 12


def produce(bootstrap: str, topic: str, per_partition: int, tag: str) -> dict[int, list[bytes]]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    written: dict[int, list[bytes]] = {}
    for i in range(per_partition):
        for p in range(PARTITIONS):
            value = f"{tag}-{p}-{i}".encode()
            producer.produce(topic, value, partition=p)
            written.setdefault(p, []).append(value)
    assert producer.flush(30) == 0
    return written


def values_of(items) -> list[bytes]:
    """The record values of what getmany returned (records, or whole batches on the batch path)."""
    if items and type(items[0]) is FetchedBatch:
        return [record.value for batch in items for record in DefaultRecordBatch(batch.data)]
    return [item.value for item in items]


async def read(consumer: Consumer, expected: int, timeout: float = 30.0) -> dict[int, list[bytes]]:
    got: dict[int, list[bytes]] = {}
    deadline = asyncio.get_running_loop().time() + timeout
    while sum(map(len, got.values())) < expected:
        assert asyncio.get_running_loop().time() < deadline, f"read {sum(map(len, got.values()))} of {expected}"
        for tp, items in (await consumer.getmany(timeout_ms=300)).items():
            got.setdefault(tp.partition, []).extend(values_of(items))
    return got


def member(bootstrap: str, share: str, batches: bool = False) -> Consumer:
    """A member of ``share``; ``batches``: on the batch-forwarding path (mirrorline's own fetch loop)."""
    return KAFKA_CLIENTS.consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "none",
                                   "fetch.max.wait.ms": "500", "isolation.level": "read_committed"},
                                  fetch_sessions=True, share=share,
                                  fetch_batches=BatchFetch(0) if batches else None)


@pytest.mark.parametrize("batches", [False, True], ids=["records, aiokafka's fetch loop", "batches, own fetch loop"])
async def test_members_of_a_share_read_their_own_partitions_through_one_consumer(cluster_a, make_topic, unique_name,
                                                                                 batches):
    topic = await make_topic(cluster_a, PARTITIONS)
    first = await asyncio.to_thread(produce, cluster_a.bootstrap_servers, topic, 20, "first")
    share = unique_name("share")
    evens = [TopicPartition(topic, p) for p in range(0, PARTITIONS, 2)]
    odds = [TopicPartition(topic, p) for p in range(1, PARTITIONS, 2)]
    a = member(cluster_a.bootstrap_servers, share, batches)
    b = member(cluster_a.bootstrap_servers, share, batches)
    other = member(cluster_a.bootstrap_servers, unique_name("another-share"), batches)
    # both start at once, each positioning its partitions while the other assigns (a seek_to_beginning
    # still under way when the union is assigned again must not be lost)
    await asyncio.gather(a.start(), b.start())
    await other.start()
    try:
        assert a.consumer is b.consumer and a.members == 2
        assert isinstance(a.consumer.fetcher, BatchFetcher) is batches
        assert other.consumer is not a.consumer
        a.assign(evens)
        seek_a = asyncio.ensure_future(a.seek_to_beginning(*evens))
        b.assign(odds)
        await asyncio.gather(seek_a, b.seek_to_beginning(*odds))
        assert a.assignment() == set(evens) and b.assignment() == set(odds)
        assert a.consumer.assignment() == set(evens + odds)

        got_a, got_b = await asyncio.gather(read(a, 20 * len(evens)), read(b, 20 * len(odds)))
        assert got_a == {tp.partition: first[tp.partition] for tp in evens}
        assert got_b == {tp.partition: first[tp.partition] for tp in odds}
        # what the answers named is each member's own
        assert a.fetch_state_changes() in (None, set(evens)) or a.fetch_state_changes() <= set(evens)
        changes_b = b.fetch_state_changes()
        assert changes_b is None or changes_b <= set(odds)

        # one fetch session on the broker serves both: requests go out for the union, not per member
        sessions = a.consumer.fetch_sessions
        assert sessions is not None and sessions.counters["resets"] == 0

        # a paused partition of b stays paused when a assigns again; a keeps its positions
        b.pause(odds[0])
        a.assign(evens)  # the same partitions again: the union is assigned afresh underneath
        second = await asyncio.to_thread(produce, cluster_a.bootstrap_servers, topic, 5, "second")
        got_a = await read(a, 5 * len(evens))
        assert got_a == {tp.partition: second[tp.partition] for tp in evens}  # nothing again, nothing skipped
        got_b = await read(b, 5 * (len(odds) - 1))
        assert got_b == {tp.partition: second[tp.partition] for tp in odds[1:]}
        b.resume(odds[0])
        assert await read(b, 5) == {odds[0].partition: second[odds[0].partition]}

        # b leaves: a reads on from where it was, exactly once
        await b.stop()
        assert a.members == 1 and a.consumer.assignment() == set(evens)
        third = await asyncio.to_thread(produce, cluster_a.bootstrap_servers, topic, 5, "third")
        got_a = await read(a, 5 * len(evens))
        assert got_a == {tp.partition: third[tp.partition] for tp in evens}
        assert (await a.getmany(timeout_ms=500)) == {}

        # a newcomer that assigns one of a's partitions takes it over; a gets no more of it
        c = member(cluster_a.bootstrap_servers, share, batches)
        await c.start()
        try:
            assert c.consumer is a.consumer and a.members == 2
            c.assign([evens[0]])
            c.seek(evens[0], 30)  # after first (20), second (5) and third (5)
            assert a.assignment() == set(evens[1:])
            fourth = await asyncio.to_thread(produce, cluster_a.bootstrap_servers, topic, 3, "fourth")
            got_c, got_a = await asyncio.gather(read(c, 3), read(a, 3 * (len(evens) - 1)))
            assert got_c == {evens[0].partition: fourth[evens[0].partition]}
            assert got_a == {tp.partition: fourth[tp.partition] for tp in evens[1:]}
            with pytest.raises(Exception, match="not assigned"):
                a.seek(evens[0], 0)
        finally:
            await c.stop()
        # the partitions of another share are no business of this one
        other.assign(odds)
        await other.seek_to_beginning(*odds)
        assert sum(map(len, (await read(other, 33 * len(odds))).values())) == 33 * len(odds)  # 20 + 5 + 5 + 3 each
    finally:
        await a.stop()
        await b.stop()
        await other.stop()
    assert a.consumer._consumer._closed  # the last member closed it
    assert len(KAFKA_CLIENTS.shared_consumers) == 0


@pytest.mark.parametrize("batches", [False, True], ids=["records, aiokafka's fetch loop", "batches, own fetch loop"])
async def test_the_last_members_leaving_one_right_after_the_other_stops_the_consumer(cluster_a, make_topic,
                                                                                      unique_name, batches):
    """One member leaving changes the assignment underneath; the last leaving right after must still
    stop the consumer (aiokafka's fetch loop swallowed the cancel of a stop that came that soon)."""
    topic = await make_topic(cluster_a, PARTITIONS)
    await asyncio.to_thread(produce, cluster_a.bootstrap_servers, topic, 20, "first")
    share = unique_name("share")
    a = member(cluster_a.bootstrap_servers, share, batches)
    b = member(cluster_a.bootstrap_servers, share, batches)
    await asyncio.gather(a.start(), b.start())
    a.assign([TopicPartition(topic, p) for p in range(0, PARTITIONS, 2)])
    b.assign([TopicPartition(topic, p) for p in range(1, PARTITIONS, 2)])
    await a.seek_to_beginning(*a.assignment())
    await b.seek_to_beginning(*b.assignment())
    reading = asyncio.ensure_future(read(b, 10_000, timeout=20))  # still waiting for records when b stops
    await read(a, 10)
    await asyncio.wait_for(a.stop(), 10)
    await asyncio.wait_for(b.stop(), 10)
    assert a.consumer._consumer._closed
    with pytest.raises(Exception, match="stopped|Stopped"):
        await asyncio.wait_for(reading, 10)
