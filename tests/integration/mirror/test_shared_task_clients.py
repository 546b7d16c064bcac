"""MirrorSource tasks of one connector in one worker share their consumer and producer
(``tasks.share.clients=true``; false by default), against real clusters A and B.

librdkafka (confluent-kafka, an independent client) writes the source records and reads the
mirrored ones: every partition must arrive exactly as written, in order, once, including while one
of the two tasks is restarted under a steady stream (its partitions leave and rejoin the shared
consumer; the other task's must not notice). By default each task has its own.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Consumer as RdConsumer
from confluent_kafka import Producer as RdProducer
from confluent_kafka import TopicPartition as RdPartition

from mirrorline.clients.batch_fetcher import BatchFetcher
from mirrorline.clients.runtime_clients import KAFKA_CLIENTS
from mirrorline.runtime.producer_share import PRODUCER_SHARES
from support.worker import Rest, all_running, running_standalone

pytestmark = pytest.mark.integration

PARTITIONS = 6


def write(bootstrap: str, topic: str, start: int, count: int, pause_s: float = 0.0) -> None:
    """Records ``p-i`` round robin over the partitions, numbered from ``start``; ``pause_s`` between tens."""
    producer = RdProducer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    for i in range(start, start + count):
        producer.produce(topic, f"{i % PARTITIONS}-{i}".encode(), partition=i % PARTITIONS)
        if pause_s and i % 10 == 9:
            producer.poll(0)
            time.sleep(pause_s)
    assert producer.flush(30) == 0


def read_mirrored(bootstrap: str, topic: str, expected: int, timeout: float = 90.0) -> dict[int, list[str]]:
    """Every record of ``topic`` by partition, once ``expected`` were read (librdkafka)."""
    consumer = RdConsumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}-{time.time()}",
                           "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        deadline = time.monotonic() + timeout
        while True:
            metadata = consumer.list_topics(topic, timeout=10).topics.get(topic)
            if metadata is not None and not metadata.error and len(metadata.partitions) == PARTITIONS:
                break
            assert time.monotonic() < deadline, f"{topic} never appeared on the target"
            time.sleep(0.5)
        consumer.assign([RdPartition(topic, p, 0) for p in range(PARTITIONS)])
        got: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
        count = 0
        while count < expected and time.monotonic() < deadline:
            for message in consumer.consume(500, timeout=1.0):
                if message.error() is None:
                    got[message.partition()].append(message.value().decode())
                    count += 1
        # anything beyond the expected (a duplicate) would show up within a second or two
        for message in consumer.consume(500, timeout=2.0):
            if message.error() is None:
                got[message.partition()].append(message.value().decode())
        return got
    finally:
        consumer.close()


def written(start: int, count: int) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    for i in range(start, start + count):
        out[i % PARTITIONS].append(f"{i % PARTITIONS}-{i}")
    return out


def shares_of(connector: str) -> tuple[list[int], list[int]]:
    """How many readers share each consumer, and how many tasks each producer, of ``connector``."""
    readers = [len(share.members) for key, share in KAFKA_CLIENTS.shared_consumers._shares.items()
               if str(key[1]).startswith(f"{connector}|")]
    holders = [share.holders for key, share in PRODUCER_SHARES._shares.items() if str(key[1]).startswith(f"{connector}|")]
    return readers, holders


async def test_two_tasks_share_their_clients_and_a_restart_of_one_leaves_every_partition_exact(
        cluster_a, cluster_b, make_topic, flow_config, tmp_path, unique_name):
    topic = await make_topic(cluster_a, PARTITIONS)
    await asyncio.to_thread(write, cluster_a.bootstrap_servers, topic, 0, 3000)
    alias = unique_name("A")
    name = unique_name("mirror")
    config = flow_config(topics=topic, tasks_max=2, source_alias=alias, **{"heartbeats.replication.enabled": "false",
                                                                          "tasks.share.clients": "true"})
    worker = {"bootstrap.servers": cluster_b.bootstrap_servers,
              "offset.storage.file.filename": str(tmp_path / "offsets.json")}
    remote = f"{alias}.{topic}"
    async with running_standalone(worker, [{"name": name, **config}]) as url, Rest(url) as rest:
        await rest.wait_for(f"/connectors/{name}/status", all_running(2))
        assert shares_of(name) == ([2], [2])  # one consumer read by both tasks, one producer written by both
        shared = [share.consumer for key, share in KAFKA_CLIENTS.shared_consumers._shares.items()
                  if str(key[1]).startswith(f"{name}|")]
        assert [type(consumer.fetcher) for consumer in shared] == [BatchFetcher]  # mirrorline's own fetch loop
        assert await asyncio.to_thread(read_mirrored, cluster_b.bootstrap_servers, remote, 3000) == written(0, 3000)

        # a steady stream while task 1 is restarted: its partitions leave the shared consumer and come back
        stream = asyncio.ensure_future(asyncio.to_thread(write, cluster_a.bootstrap_servers, topic, 3000, 3000, 0.02))
        await asyncio.sleep(2)
        assert (await rest.call("POST", f"/connectors/{name}/tasks/1/restart"))[0] == 204
        await rest.wait_for(f"/connectors/{name}/status", all_running(2))
        await stream
        assert shares_of(name) == ([2], [2])
        got = await asyncio.to_thread(read_mirrored, cluster_b.bootstrap_servers, remote, 6000)
        expected = written(0, 6000)
        for partition in range(PARTITIONS):
            assert got[partition] == expected[partition], f"partition {partition}"
    assert shares_of(name) == ([], [])  # the last task to stop closed them


async def test_by_default_every_task_has_its_own_clients(cluster_a, cluster_b, make_topic, flow_config,
                                                                  tmp_path, unique_name):
    topic = await make_topic(cluster_a, PARTITIONS)
    await asyncio.to_thread(write, cluster_a.bootstrap_servers, topic, 0, 600)
    alias = unique_name("A")
    name = unique_name("mirror")
    config = flow_config(topics=topic, tasks_max=2, source_alias=alias, **{"heartbeats.replication.enabled": "false"})
    worker = {"bootstrap.servers": cluster_b.bootstrap_servers,
              "offset.storage.file.filename": str(tmp_path / "offsets.json")}
    async with running_standalone(worker, [{"name": name, **config}]) as url, Rest(url) as rest:
        await rest.wait_for(f"/connectors/{name}/status", all_running(2))
        assert shares_of(name) == ([], [])
        got = await asyncio.to_thread(read_mirrored, cluster_b.bootstrap_servers, f"{alias}.{topic}", 600)
        assert got == written(0, 600)
