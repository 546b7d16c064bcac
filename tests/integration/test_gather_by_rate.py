"""The gather wait follows the flow's rate (``mirrorline.clients.fetch_sessions.FlowRate``).

Against a real broker, with records written by librdkafka (a client that is not ours), read by a
consumer made as a MirrorSource task makes one (mirrorline's own fetch loop, fetch sessions, the
default waits): while a trickle flows, the fetches that gather ask the broker to wait the trickle
wait (10 ms); while a fast flow (8 MB/s) runs, the whole gather wait (25 ms); and back to the
trickle wait once the flow slows again. Every record is read once and in order throughout. The
waits are read off each Fetch request as it goes to the broker.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka.client import AIOKafkaClient
from aiokafka.record.default_records import DefaultRecordBatch
from confluent_kafka import Producer as RdProducer

from mirrorline.api.clients import BatchFetch
from mirrorline.api.kafka import TopicPartition
from mirrorline.clients.batch_fetcher import BatchFetcher
from mirrorline.clients.fetch_sessions import (
    FAST_FLOW_BYTES_PER_S,
    FLOWING_MAX_WAIT_MS,
    FLOWING_MIN_BYTES,
    TRICKLE_MAX_WAIT_MS,
)
from mirrorline.clients.runtime_clients import KAFKA_CLIENTS

pytestmark = pytest.mark.integration

PARTITIONS = 4


def paced_write(bootstrap: str, topic: str, tag: str, seconds: float, bytes_per_s: int,
                size: int) -> dict[int, list[bytes]]:
    """Write ``size``-byte records at ``bytes_per_s`` for ``seconds`` with librdkafka, round-robin
    over the partitions, 100 rounds a second; returns what was written, by partition."""
    producer = RdProducer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    failed: list = []

    def delivered(error, _message) -> None:
        if error is not None:
            failed.append(error)

    written: dict[int, list[bytes]] = {}
    per_round = max(1, bytes_per_s // size // 100)
    start, sent = time.monotonic(), 0
    while time.monotonic() - start < seconds:
        for _ in range(per_round):
            partition = sent % PARTITIONS
            value = f"{tag}-{sent}-".encode().ljust(size, b".")
            producer.produce(topic, value=value, partition=partition, on_delivery=delivered)
            written.setdefault(partition, []).append(value)
            sent += 1
        producer.poll(0)
        time.sleep(max(0.0, start + sent / (per_round * 100) - time.monotonic()))
    assert producer.flush(30) == 0
    assert not failed, failed[:3]
    return written


async def test_a_trickle_gathers_for_the_trickle_wait_and_a_fast_flow_for_the_whole_gather_wait(
        cluster_a, make_topic, monkeypatch):
    bootstrap = cluster_a.bootstrap_servers
    topic = await make_topic(cluster_a, PARTITIONS, "rate")
    phase = ["idle"]
    asked: list[tuple[str, int]] = []  # (phase, max wait ms) of each fetch that asked the broker to gather
    send = AIOKafkaClient.send

    async def spy(client, node_id, request, **kwargs):
        if getattr(request, "API_KEY", None) == 1 and request._min_bytes == FLOWING_MIN_BYTES:
            asked.append((phase[0], request._max_wait_ms))
        return await send(client, node_id, request, **kwargs)

    monkeypatch.setattr(AIOKafkaClient, "send", spy)  # the fetch loop sends through the class's send
    consumer = KAFKA_CLIENTS.consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest",
                                       "isolation.level": "read_committed"},
                                      fetch_batches=BatchFetch(0), fetch_sessions=True)
    async with consumer:
        assert isinstance(consumer._consumer._fetcher, BatchFetcher)
        sessions = consumer.fetch_sessions
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        assert (await consumer.getmany(timeout_ms=500)) == {}  # the session is open before the flow starts
        got: dict[int, list[bytes]] = {}
        expected: dict[int, list[bytes]] = {}

        async def take(timeout_ms: int) -> None:
            for tp, batches in (await consumer.getmany(timeout_ms=timeout_ms)).items():
                got.setdefault(tp.partition, []).extend(
                    record.value for batch in batches for record in DefaultRecordBatch(batch.data))

        flows = [("trickle", 3.0, 50_000, 100), ("fast", 3.0, 8_000_000, 1000), ("slow again", 3.0, 50_000, 100)]
        for name, seconds, rate, size in flows:
            phase[0] = name
            writing = asyncio.create_task(asyncio.to_thread(paced_write, bootstrap, topic, name, seconds, rate, size))
            while not writing.done():
                await take(200)
            for partition, values in (await writing).items():
                expected.setdefault(partition, []).extend(values)
            deadline = time.monotonic() + 30
            while sum(map(len, got.values())) < sum(map(len, expected.values())) and time.monotonic() < deadline:
                await take(200)
        assert got == expected  # every record once, in order, per partition

    assert FAST_FLOW_BYTES_PER_S < 8_000_000
    waits = {name: [wait for phase_name, wait in asked if phase_name == name] for name, *_ in flows}
    assert waits["trickle"] and set(waits["trickle"]) == {TRICKLE_MAX_WAIT_MS}
    assert FLOWING_MAX_WAIT_MS in waits["fast"], f"the fast flow's fetches waited {sorted(set(waits['fast']))} ms"
    # the rate is judged every half second: the slow flow starts on the whole wait, then goes back
    assert waits["slow again"] and waits["slow again"][-1] == TRICKLE_MAX_WAIT_MS
    assert sessions.counters["flowing_fast"] > 0
