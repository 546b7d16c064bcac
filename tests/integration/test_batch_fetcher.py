"""Record batches fetched by mirrorline's own fetch loop (``mirrorline.clients.batch_fetcher``).

Against a real broker, with records written by librdkafka (a client that is not ours):

- every committed record is handed over once, in order, per partition, and aborted transactions
  and their markers are not, while the loop fetches ahead of a reader that does not read;
- what waits for the reader stays within ``fetch.max.bytes`` (plus one answer's first batch);
- an out-of-range position is raised under ``auto.offset.reset=none`` and reset under ``earliest``;
- a paused partition is not fetched, and is from its position once resumed;
- a topic deleted while its records wait for the reader: the records go out first, the
  topic-change sign only with the next call;
- a loop that fails is raised by the next ``getmany``, not left to stall it.

Broker faults (a source broker killed or frozen under load) are proven by the fault scenarios in
``tests/faults``, whose mirror reads through this loop.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka.record.default_records import DefaultRecordBatch
from confluent_kafka import Producer as RdProducer
from confluent_kafka.admin import AdminClient

from mirrorline.api.clients import BatchFetch
from mirrorline.api.errors import KafkaError, OffsetOutOfRangeError
from mirrorline.api.kafka import TopicPartition
from mirrorline.clients.batch_fetcher import BatchFetcher
from mirrorline.clients.runtime_clients import KAFKA_CLIENTS

pytestmark = pytest.mark.integration


def consumer_of(bootstrap: str, **settings):
    """A consumer as a MirrorSource task makes one (batches, sessions, read_committed)."""
    props = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest", "isolation.level": "read_committed",
             **settings}
    return KAFKA_CLIENTS.consumer(props, fetch_batches=BatchFetch(0), fetch_sessions=True, gather_max_wait_ms=10)


def rd_write(bootstrap: str, topic: str, values: dict[int, list[bytes]], **settings) -> None:
    """Write ``values`` (partition -> values) with librdkafka, in order (idempotent: a retried first
    batch to a topic just made cannot land behind the second)."""
    producer = RdProducer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True, **settings})
    failed = []

    def delivered(error, message) -> None:
        if error is not None:
            failed.append(error)

    for partition, items in values.items():
        for value in items:
            producer.produce(topic, value=value, partition=partition, on_delivery=delivered)
    assert producer.flush(30) == 0
    assert not failed, failed[:3]


def rd_aborted(bootstrap: str, topic: str, partition: int, values: list[bytes]) -> None:
    """Write ``values`` in a transaction that is aborted."""
    producer = RdProducer({"bootstrap.servers": bootstrap, "transactional.id": f"aborter-{topic}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value=value, partition=partition)
    producer.flush(30)
    producer.abort_transaction(30)


def values_of(batches) -> list[bytes]:
    return [record.value for batch in batches for record in DefaultRecordBatch(batch.data)]


async def read_until(consumer, wanted: int, timeout: float = 30.0) -> dict[int, list[bytes]]:
    read: dict[int, list[bytes]] = {}
    deadline = time.monotonic() + timeout
    while sum(len(v) for v in read.values()) < wanted and time.monotonic() < deadline:
        for tp, batches in (await consumer.getmany(timeout_ms=500)).items():
            read.setdefault(tp.partition, []).extend(values_of(batches))
    return read


async def wait_for(condition, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_committed_records_arrive_once_in_order_while_the_loop_fetches_ahead(cluster_a, make_topic):
    bootstrap = cluster_a.bootstrap_servers
    topic = await make_topic(cluster_a, 3, "ahead")
    consumer = consumer_of(bootstrap)
    async with consumer:
        fetcher = consumer._consumer._fetcher
        assert isinstance(fetcher, BatchFetcher)
        consumer.assign([TopicPartition(topic, p) for p in range(3)])
        expected: dict[int, list[bytes]] = {p: [] for p in range(3)}
        for rnd in range(3):  # three writes, nothing read: each lands in a fetch of its own, ahead of the reader
            values = {p: [f"{rnd}-{p}-{i}".encode() for i in range(500)] for p in range(3)}
            answers = fetcher.counters["answers_with_records"]
            await asyncio.to_thread(rd_write, bootstrap, topic, values)
            await asyncio.to_thread(rd_aborted, bootstrap, topic, 1, [b"aborted"] * 20)
            for p in range(3):
                expected[p] += values[p]
            await wait_for(lambda answers=answers: fetcher.counters["answers_with_records"] > answers)
        assert fetcher.counters["answers_with_records"] >= 3
        assert fetcher._buffered > 0
        read = await read_until(consumer, 1500)
        assert read == expected
        # Kafka's transaction coordinator writes the abort markers after abort_transaction has returned,
        # so the last transaction may still be open when the committed records have all been read:
        # every aborted record (20 a round) and marker (1) is skipped once its marker is in
        await wait_for(lambda: fetcher.counters["skipped_records"] >= 3 * 21)
        for p in range(3):  # past the aborted records and their markers
            end = (await consumer.end_offsets([TopicPartition(topic, p)]))[TopicPartition(topic, p)]
            await wait_for(lambda p=p, end=end: consumer.fetch_position(TopicPartition(topic, p)) == end)
        assert (await consumer.getmany(timeout_ms=300)) == {}  # nothing of the aborted transactions handed out


async def test_what_waits_for_the_reader_stays_within_fetch_max_bytes(cluster_a, make_topic):
    bootstrap = cluster_a.bootstrap_servers
    topic = await make_topic(cluster_a, 4, "bound")
    values = {p: [f"{p}-{i}-".encode() + b"v" * 1000 for i in range(1000)] for p in range(4)}  # 4 MB
    await asyncio.to_thread(rd_write, bootstrap, topic, values, **{"batch.size": 16384})
    limit = 300_000
    consumer = consumer_of(bootstrap, **{"fetch.max.bytes": limit, "max.partition.fetch.bytes": 100_000})
    async with consumer:
        fetcher = consumer._consumer._fetcher
        consumer.assign([TopicPartition(topic, p) for p in range(4)])
        await wait_for(lambda: fetcher._buffered >= limit)
        fetches = fetcher.counters["fetches"]
        await asyncio.sleep(1.0)
        assert fetcher.counters["fetches"] == fetches  # at the bound nothing more is fetched
        assert fetcher._buffered < limit + 20_000  # at most one batch past it (the broker's first batch rule)
        read = await read_until(consumer, 4000)
    assert read == values


async def test_an_out_of_range_position_is_raised_under_none_and_reset_under_earliest(cluster_a, make_topic):
    bootstrap = cluster_a.bootstrap_servers
    topic = await make_topic(cluster_a, 1, "range")
    await asyncio.to_thread(rd_write, bootstrap, topic, {0: [f"r{i}".encode() for i in range(10)]})
    tp = TopicPartition(topic, 0)
    strict = consumer_of(bootstrap, **{"auto.offset.reset": "none"})
    async with strict:
        strict.assign([tp])
        strict.seek(tp, 1000)
        with pytest.raises(OffsetOutOfRangeError) as raised:
            for _ in range(20):
                await strict.getmany(timeout_ms=500)
        assert dict(raised.value.partitions) == {tp: 1000}
        strict.seek(tp, 4)
        assert (await read_until(strict, 6)) == {0: [f"r{i}".encode() for i in range(4, 10)]}
    lenient = consumer_of(bootstrap)
    async with lenient:
        lenient.assign([tp])
        lenient.seek(tp, 1000)
        assert (await read_until(lenient, 10)) == {0: [f"r{i}".encode() for i in range(10)]}


async def test_a_paused_partition_is_fetched_again_from_its_position_once_resumed(cluster_a, make_topic):
    bootstrap = cluster_a.bootstrap_servers
    topic = await make_topic(cluster_a, 2, "pause")
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    consumer = consumer_of(bootstrap)
    async with consumer:
        consumer.assign([p0, p1])
        await wait_for(lambda: consumer.fetch_position(p0) == 0 and consumer.fetch_position(p1) == 0)
        consumer.pause(p0)
        await asyncio.to_thread(rd_write, bootstrap, topic, {0: [b"a0", b"a1"], 1: [b"b0", b"b1"]})
        read = await read_until(consumer, 2, timeout=10)
        await asyncio.sleep(1.0)
        read.setdefault(1, []).extend(values_of((await consumer.getmany(timeout_ms=500)).get(p1, [])))
        assert read == {1: [b"b0", b"b1"]}
        assert consumer.fetch_position(p0) == 0
        consumer.resume(p0)
        assert (await read_until(consumer, 2, timeout=10)) == {0: [b"a0", b"a1"]}


async def test_a_deleted_topics_sign_comes_after_the_records_fetched_before_it(cluster_a, make_topic):
    bootstrap = cluster_a.bootstrap_servers
    topic = await make_topic(cluster_a, 1, "deleted")
    tp = TopicPartition(topic, 0)
    consumer = consumer_of(bootstrap)
    async with consumer:
        fetcher = consumer._consumer._fetcher
        consumer.assign([tp])
        await asyncio.to_thread(rd_write, bootstrap, topic, {0: [f"old{i}".encode() for i in range(10)]})
        await wait_for(lambda: fetcher._buffered > 0)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        await asyncio.to_thread(admin.delete_topics([topic])[topic].result, 30)
        await wait_for(lambda: topic in fetcher._signs.held)  # a fetch was answered with the topic gone
        first = await consumer.getmany(timeout_ms=500)
        assert values_of(first[tp]) == [f"old{i}".encode() for i in range(10)]
        assert consumer.topic_change_signs() == set()
        await consumer.getmany(timeout_ms=100)
        assert topic in consumer.topic_change_signs()


async def test_a_fetch_loop_that_fails_is_raised_by_getmany(cluster_a, make_topic, monkeypatch):
    bootstrap = cluster_a.bootstrap_servers
    topic = await make_topic(cluster_a, 1, "failing")

    def broken(self, node, response, wanted):
        raise RuntimeError("answer could not be read")

    monkeypatch.setattr(BatchFetcher, "_take_answer", broken)
    consumer = consumer_of(bootstrap)
    async with consumer:
        consumer.assign([TopicPartition(topic, 0)])
        await asyncio.to_thread(rd_write, bootstrap, topic, {0: [b"x"]})
        with pytest.raises(KafkaError, match="answer could not be read"):
            for _ in range(20):
                await consumer.getmany(timeout_ms=500)
