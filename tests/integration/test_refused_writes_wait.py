"""Writes refused while a real broker makes new partitions wait for a probe, and all land once, in order.

A broker that has just been told to lead a new partition answers writes to it with
NOT_LEADER_OR_FOLLOWER until it has made the partition's log; a mirror starting on many remote
topics it has just created writes to them in that window. The producer then holds each refused
batch and asks the broker with a ListOffsets probe when the partition is writable
(``mirrorline.clients.partition_readiness``) instead of sending the batch again at every back-off.

The topics are created with librdkafka's admin client and written to at once by our producer;
what landed is read back with librdkafka's consumer. The window is the broker's own: a round
that met no refusal says so and the next round uses new topics, so the probe's path is proven
against the broker, not assumed.
"""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import Consumer as RdConsumer
from confluent_kafka import TopicPartition as RdPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorline.clients.runtime_clients import KAFKA_CLIENTS

pytestmark = pytest.mark.integration

TOPICS, PARTITIONS, RECORDS = 100, 4, 5
ROUNDS = 4


def rd_create(bootstrap: str, names: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(n, PARTITIONS, 1) for n in names], operation_timeout=60).values():
        future.result(timeout=60)


def rd_read(bootstrap: str, names: list[str]) -> dict[tuple[str, int], list[bytes]]:
    """Every record of every partition of ``names``, read with librdkafka from the beginning."""
    consumer = RdConsumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                           "enable.partition.eof": True})
    try:
        consumer.assign([RdPartition(n, p, 0) for n in names for p in range(PARTITIONS)])
        read: dict[tuple[str, int], list[bytes]] = {(n, p): [] for n in names for p in range(PARTITIONS)}
        at_end: set[tuple[str, int]] = set()
        while len(at_end) < len(read):
            for message in consumer.consume(1000, timeout=5):
                key = (message.topic(), message.partition())
                if message.error() is not None:
                    assert message.error().code() == -191, message.error()  # _PARTITION_EOF
                    at_end.add(key)
                else:
                    read[key].append(message.value())
        return read
    finally:
        consumer.close()


async def test_writes_refused_while_new_partitions_are_made_wait_and_all_land_once_in_order(cluster_a, unique_name):
    bootstrap = cluster_a.bootstrap_servers
    producer = KAFKA_CLIENTS.producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": "true"})
    async with producer:
        probe = producer._producer.readiness_probe
        for round_ in range(ROUNDS):
            names = [f"{unique_name(f'refused{round_}')}-{i:03d}" for i in range(TOPICS)]
            await asyncio.to_thread(rd_create, bootstrap, names)
            await producer.learn_topics(names)
            sent = [await producer.send(n, f"{n}/{p}/{i}".encode(), partition=p)
                    for i in range(RECORDS) for n in names for p in range(PARTITIONS)]
            await asyncio.wait_for(asyncio.gather(*sent), 120)
            read = await asyncio.to_thread(rd_read, bootstrap, names)
            assert read == {(n, p): [f"{n}/{p}/{i}".encode() for i in range(RECORDS)]
                            for n in names for p in range(PARTITIONS)}
            if probe.counters["held"]:
                break
            print(f"round {round_}: the broker refused no write; trying again with new topics")
        assert probe.counters["held"], f"the broker refused no write to {ROUNDS} x {TOPICS * PARTITIONS} new partitions"
        assert probe.counters["probes"] >= 1 and probe.held == 0
        assert probe.counters["answered_writable"] + probe.counters["fell_back"] == probe.counters["held"]
        print(dict(probe.counters))
