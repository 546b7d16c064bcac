"""Forwarded record batches written by mirrorline's own produce loop (``mirrorline.clients.batch_sender``).

Against a real broker, each checked with a client that is not ours:

- forwarded batches never enter aiokafka's accumulator; every one lands once, in order, at
  consecutive offsets, as librdkafka reads it, and Kafka's own ``DumpLogSegments`` shows each batch
  under the producer's id with consecutive sequence numbers;
- records and forwarded batches sent to one partition without waiting land in the order sent;
- a batch the broker refuses for good (larger than the topic's ``max.message.bytes``) fails with
  the contract's error, the batch queued behind it fails with it (nothing is written after the
  gap), and the partition takes the next write: its sequence number went back;
- batches refused because the broker has not made a new partition yet are held by the readiness
  probe and all land once, in order.

Broker faults (a target broker killed or frozen under load) are proven by the fault scenarios in
``tests/faults``, whose mirror forwards batches through this loop.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import time

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from confluent_kafka import Consumer as RdConsumer
from confluent_kafka import TopicPartition as RdPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorline.api.errors import KafkaError
from mirrorline.clients.runtime_clients import KAFKA_CLIENTS
from mirrorline.localkafka.artifacts import java_executable, resolve_kafka_classpath

pytestmark = pytest.mark.integration

RECORDS_PER_BATCH = 25
IDEMPOTENT = {"acks": "all", "enable.idempotence": "true"}


def encoded_batch(tag: str, count: int = RECORDS_PER_BATCH, size: int = 100) -> bytes:
    """One magic-2 batch of ``count`` records whose values are ``tag.i`` padded to ``size`` bytes."""
    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 2 ** 30)
    for i in range(count):
        value = f"{tag}.{i}.".encode()
        builder.append(i, 1_700_000_000_000 + i, None, value + b"v" * max(size - len(value), 0), [])
    return bytes(builder.build())


def values_of(tag: str, count: int = RECORDS_PER_BATCH) -> list[bytes]:
    return [f"{tag}.{i}.".encode() for i in range(count)]


def rd_read(bootstrap: str, topic: str, partitions: int) -> dict[int, list[bytes]]:
    """Every record of ``topic`` (value up to its second dot), read with librdkafka from the start."""
    consumer = RdConsumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                           "enable.partition.eof": True})
    read: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    try:
        consumer.assign([RdPartition(topic, p, 0) for p in range(partitions)])
        at_end: set[int] = set()
        deadline = time.monotonic() + 60
        while len(at_end) < partitions and time.monotonic() < deadline:
            for message in consumer.consume(1000, timeout=1):
                if message.error() is not None:
                    assert message.error().code() == -191, message.error()  # _PARTITION_EOF
                    at_end.add(message.partition())
                    continue
                value = message.value()
                read[message.partition()].append(value[:value.index(b".", value.index(b".") + 1) + 1])
    finally:
        consumer.close()
    return read


def rd_create(bootstrap: str, names: list[str], partitions: int, config: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(n, partitions, 1, config=config or {}) for n in names],
                                      operation_timeout=60).values():
        future.result(timeout=60)


def dumped_batches(data_dir, topic: str, partition: int) -> list[dict[str, str]]:
    """Kafka's own ``DumpLogSegments`` view of each batch in a partition's log: its header fields."""
    segments = sorted((data_dir).glob(f"**/{topic}-{partition}/*.log"))
    assert segments, f"no log segment of {topic}-{partition} under {data_dir}"
    command = [java_executable(), "-Xmx256m", "-cp", f"{resolve_kafka_classpath()}/*", "org.apache.kafka.tools.DumpLogSegments",
               "--files", ",".join(str(s) for s in segments)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return [dict(re.findall(r"(\w+): (\S+)", line)) for line in result.stdout.splitlines()
            if line.startswith("baseOffset:")]


async def test_forwarded_batches_go_out_on_mirrorlines_loop_under_the_producers_id(cluster_a, make_topic):
    partitions, rounds = 3, 12
    bootstrap = cluster_a.bootstrap_servers
    topic = await make_topic(cluster_a, partitions, "sender")
    producer = KAFKA_CLIENTS.producer({"bootstrap.servers": bootstrap, **IDEMPOTENT})
    aio = producer._producer
    assert aio.batch_sender is not None
    queued_by_aiokafka = []
    add_batch = aio._message_accumulator.add_batch
    aio._message_accumulator.add_batch = lambda *a, **k: queued_by_aiokafka.append(a) or add_batch(*a, **k)
    async with producer:
        futures = [await producer.send_record_batch(topic, p, encoded_batch(f"{p}-{r}"), RECORDS_PER_BATCH)
                   for r in range(rounds) for p in range(partitions)]
        await producer.flush()
        assert aio.batch_sender.pending == 0
        offsets = [future.result().offset for future in futures]
        producer_id = aio._txn_manager.producer_id
    assert not queued_by_aiokafka
    assert producer_id >= 0  # InitProducerId was answered: the batches below carry a real id
    for p in range(partitions):
        assert offsets[p::partitions] == [r * RECORDS_PER_BATCH for r in range(rounds)]
    read = await asyncio.to_thread(rd_read, bootstrap, topic, partitions)
    assert read == {p: [v for r in range(rounds) for v in values_of(f"{p}-{r}")] for p in range(partitions)}
    batches = await asyncio.to_thread(dumped_batches, cluster_a.home / "data", topic, 1)
    assert [(b["baseOffset"], b["count"], b["baseSequence"], b["producerId"], b["isTransactional"])
            for b in batches] == [(str(r * RECORDS_PER_BATCH), str(RECORDS_PER_BATCH), str(r * RECORDS_PER_BATCH),
                                   str(producer_id), "false") for r in range(rounds)]


async def test_records_and_forwarded_batches_on_one_partition_land_in_the_order_sent(cluster_a, make_topic):
    bootstrap = cluster_a.bootstrap_servers
    topic = await make_topic(cluster_a, 1, "mixed")
    producer = KAFKA_CLIENTS.producer({"bootstrap.servers": bootstrap, **IDEMPOTENT})
    expected: list[bytes] = []
    async with producer:
        futures = []
        for i in range(10):  # nothing awaited in between: each path must wait for the other's writes
            futures.append(await producer.send_record_batch(topic, 0, encoded_batch(f"b{i}"), RECORDS_PER_BATCH))
            expected += values_of(f"b{i}")
            for j in range(3):
                futures.append(await producer.send(topic, f"r{i}.{j}.".encode(), partition=0))
                expected.append(f"r{i}.{j}.".encode())
        await asyncio.gather(*futures)
    read = await asyncio.to_thread(rd_read, bootstrap, topic, 1)
    assert read[0] == expected


async def test_a_refused_batch_fails_with_the_one_behind_it_and_the_partition_writes_on(cluster_a, unique_name):
    bootstrap = cluster_a.bootstrap_servers
    topic = unique_name("refused")
    # a topic limit below the big batch's size is the only way to have a real broker refuse one write for good
    await asyncio.to_thread(rd_create, bootstrap, [topic], 1, {"max.message.bytes": "20000"})
    producer = KAFKA_CLIENTS.producer({"bootstrap.servers": bootstrap, **IDEMPOTENT})
    async with producer:
        first = await producer.send_record_batch(topic, 0, encoded_batch("first"), RECORDS_PER_BATCH)
        big = await producer.send_record_batch(topic, 0, encoded_batch("big", size=2000), RECORDS_PER_BATCH)
        behind = await producer.send_record_batch(topic, 0, encoded_batch("behind"), RECORDS_PER_BATCH)
        assert (await first).offset == 0
        for refused in (big, behind):
            with pytest.raises(KafkaError) as caught:
                await refused
            assert "too large" in str(caught.value).lower() or "TooLarge" in type(caught.value).__name__, caught.value
        after = await (await producer.send_record_batch(topic, 0, encoded_batch("after"), RECORDS_PER_BATCH))
        assert after.offset == RECORDS_PER_BATCH
    read = await asyncio.to_thread(rd_read, bootstrap, topic, 1)
    assert read[0] == values_of("first") + values_of("after")


async def test_batches_refused_by_partitions_not_made_yet_wait_and_land_once_in_order(cluster_a, unique_name):
    topics, partitions, rounds = 60, 4, 4
    bootstrap = cluster_a.bootstrap_servers
    producer = KAFKA_CLIENTS.producer({"bootstrap.servers": bootstrap, **IDEMPOTENT})
    async with producer:
        probe = producer._producer.batch_sender.probe
        for round_ in range(rounds):
            names = [f"{unique_name(f'unmade{round_}')}-{i:03d}" for i in range(topics)]
            await asyncio.to_thread(rd_create, bootstrap, names, partitions)
            await producer.learn_topics(names)
            sent = [await producer.send_record_batch(n, p, encoded_batch(f"{p}-{i}", count=5), 5)
                    for i in range(3) for n in names for p in range(partitions)]
            await asyncio.wait_for(asyncio.gather(*sent), 120)
            for name in names[:: max(topics // 6, 1)]:
                read = await asyncio.to_thread(rd_read, bootstrap, name, partitions)
                assert read == {p: [v for i in range(3) for v in values_of(f"{p}-{i}", 5)] for p in range(partitions)}
            if probe.counters["held"]:
                break
            print(f"round {round_}: the broker refused no write; trying again with new topics")
        assert probe.counters["held"], f"the broker refused no write to {rounds} x {topics * partitions} new partitions"
        assert probe.held == 0 and producer._producer.batch_sender.pending == 0
        print(dict(probe.counters))
