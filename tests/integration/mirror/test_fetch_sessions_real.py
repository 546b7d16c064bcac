"""Incremental fetch sessions against a real broker: every record read once, in order, and idle fetches
name no partition.

A consumer made by ``KAFKA_CLIENTS.consumer(..., fetch_sessions=True)`` reads a 40-partition topic that librdkafka
(confluent-kafka, an independent client) filled, goes idle, reads a second round written while it
waited, and is seeked back: it must read exactly the records librdkafka wrote, partition by
partition in offset order, while its requests after the first name only partitions whose offset
moved. A mirror over the same topic (test_mirror_source.py and the rest of this directory) runs on
sessions too, since every MirrorSource task uses them.
"""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import Producer

from mirrorline.api import Consumer, TopicPartition
from mirrorline.clients.fetch_planner import plan_actions
from mirrorline.clients.runtime_clients import KAFKA_CLIENTS

pytestmark = pytest.mark.integration

PARTITIONS = 40


def produce(bootstrap: str, topic: str, per_partition: int, tag: str) -> dict[int, list[bytes]]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    written: dict[int, list[bytes]] = {}
    for p in range(PARTITIONS):
        for i in range(per_partition):
            value = f"{tag}-{p}-{i}".encode()
            producer.produce(topic, value, partition=p)
            written.setdefault(p, []).append(value)
    assert producer.flush(30) == 0
    return written


def produce_one(bootstrap: str, topic: str, partition: int, value: bytes) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, value, partition=partition)
    assert producer.flush(30) == 0


async def read(consumer: Consumer, expected: int, timeout: float = 30.0) -> dict[int, list[bytes]]:
    got: dict[int, list[bytes]] = {}
    deadline = asyncio.get_running_loop().time() + timeout
    while sum(map(len, got.values())) < expected:
        assert asyncio.get_running_loop().time() < deadline, f"read {sum(map(len, got.values()))} of {expected}"
        for tp, records in (await consumer.getmany(timeout_ms=500)).items():
            got.setdefault(tp.partition, []).extend(r.value for r in records)
    return got


async def test_a_consumer_on_fetch_sessions_reads_everything_once_and_idles_cheaply(cluster_a, make_topic):
    topic = await make_topic(cluster_a, PARTITIONS)
    first = await asyncio.to_thread(produce, cluster_a.bootstrap_servers, topic, 5, "first")
    consumer = KAFKA_CLIENTS.consumer({"bootstrap.servers": cluster_a.bootstrap_servers,
                                       "auto.offset.reset": "earliest", "fetch.max.wait.ms": 100}, fetch_sessions=True)
    await consumer.start()
    try:
        sessions = consumer.fetch_sessions
        assert sessions is not None
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        assert await read(consumer, 5 * PARTITIONS) == first

        # idle: the broker holds the session; once the new positions are sent, requests name no partition
        assert (await consumer.getmany(timeout_ms=1000)) == {}
        sent = sessions.counters["partitions_sent"]
        incremental = sessions.counters["incremental"]
        assert (await consumer.getmany(timeout_ms=1500)) == {}
        assert sessions.counters["incremental"] > incremental
        assert sessions.counters["partitions_sent"] == sent
        assert sessions.counters["full"] == 1
        consumer.fetch_state_changes()  # what the answers so far named
        assert (await consumer.getmany(timeout_ms=1000)) == {}
        assert consumer.fetch_state_changes() == set()  # idle answers name no partition: a lag sweep reads none

        # records written meanwhile: read once each, in order
        second = await asyncio.to_thread(produce, cluster_a.bootstrap_servers, topic, 3, "second")
        assert await read(consumer, 3 * PARTITIONS) == second
        assert sessions.counters["partitions_sent"] - sent <= 4 * PARTITIONS  # only partitions that moved
        assert consumer.fetch_state_changes() == set(tps)

        # one partition written: the answers name it and no other
        await asyncio.to_thread(produce_one, cluster_a.bootstrap_servers, topic, 3, b"one")
        assert await read(consumer, 1) == {3: [b"one"]}
        assert (await consumer.getmany(timeout_ms=500)) == {}
        assert consumer.fetch_state_changes() == {TopicPartition(topic, 3)}

        # a seek back on a few partitions is seen by the broker's session
        for p in range(0, PARTITIONS, 10):
            consumer.seek(TopicPartition(topic, p), 0)
        again = await read(consumer, 4 * 8)
        assert again == {p: first[p] + second[p] for p in range(0, PARTITIONS, 10)}

        # a paused partition is left out of fetches until resumed, then read from where it stopped
        # (the fast plan's resume futures wake the fetch loop: :mod:`mirrorline.clients.fetch_planner`)
        consumer.pause(TopicPartition(topic, 7))
        third = await asyncio.to_thread(produce, cluster_a.bootstrap_servers, topic, 2, "third")
        unpaused = await read(consumer, 2 * (PARTITIONS - 1))
        assert 7 not in unpaused and unpaused == {p: third[p] for p in range(PARTITIONS) if p != 7}
        consumer.resume(TopicPartition(topic, 7))
        assert await read(consumer, 2, timeout=10) == {7: third[7]}
        assert sessions.counters["resets"] == 0
        assert consumer._consumer._fetcher._get_actions_per_node.__func__ is plan_actions
    finally:
        await consumer.stop()


def trickle(bootstrap: str, topic: str, partitions: int, records: int) -> dict[int, list[bytes]]:
    """One 100 B record every 2 ms, round robin over the partitions, by librdkafka with linger.ms=0."""
    import time
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    written: dict[int, list[bytes]] = {}
    for i in range(records):
        value = f"{i:05d}".encode().ljust(100, b".")
        producer.produce(topic, value, partition=i % partitions)
        written.setdefault(i % partitions, []).append(value)
        producer.poll(0)
        time.sleep(0.002)
    assert producer.flush(30) == 0
    return written


async def test_while_records_trickle_in_fetches_gather_them_and_an_empty_answer_ends_that(cluster_a, make_topic):
    """A trickle (one 100 B record every 2 ms for 2 s, librdkafka with linger.ms=0: one batch per
    record) read through a session: each fetch gathers several records (at this rate the broker
    waits up to TRICKLE_MAX_WAIT_MS for FLOWING_MIN_BYTES), every record arrives once and in order,
    and once the trickle stops an empty answer puts the node back on the consumer's own fetch
    settings.

    Ungathered, each record would be its own answer (about one fetch per record). Gathered, a fetch
    lasts the trickle wait, so the fetches are bounded by the time the trickle took over that wait,
    however slowly the writer ran on a loaded machine."""
    from mirrorline.clients.fetch_sessions import FLOWING_MAX_WAIT_MS, FLOWING_MIN_BYTES, TRICKLE_MAX_WAIT_MS

    partitions, records = 4, 1000
    topic = await make_topic(cluster_a, partitions)
    consumer = KAFKA_CLIENTS.consumer({"bootstrap.servers": cluster_a.bootstrap_servers,
                                       "auto.offset.reset": "earliest", "fetch.max.wait.ms": 2000},
                                      fetch_sessions=True)

    await consumer.start()
    try:
        sessions = consumer.fetch_sessions
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        await consumer.getmany(timeout_ms=500)  # the session is open before the trickle starts
        before = sessions.counters["full"] + sessions.counters["incremental"]
        started = asyncio.get_running_loop().time()
        writing = asyncio.create_task(asyncio.to_thread(trickle, cluster_a.bootstrap_servers, topic,
                                                        partitions, records))
        got = await read(consumer, records, timeout=60)
        elapsed_ms = (asyncio.get_running_loop().time() - started) * 1000
        written = await writing
        fetches = sessions.counters["full"] + sessions.counters["incremental"] - before
        assert got == written
        assert sessions.counters["flowing"] > 0
        # a few fetches answer at once (the first record after the session's idle wait, or after a gap)
        bound = elapsed_ms / TRICKLE_MAX_WAIT_MS * 1.3 + 20
        assert fetches <= bound, (f"{fetches} fetches for {records} records in {elapsed_ms:.0f} ms "
                                  f"(bound {bound:.0f}): the trickle was not gathered")
        assert fetches < records / 2, f"{fetches} fetches for {records} records: the trickle was not gathered"
        assert TRICKLE_MAX_WAIT_MS <= FLOWING_MAX_WAIT_MS <= 50 and FLOWING_MIN_BYTES > 100
        # the trickle is over: an empty answer, then the consumer's own settings again
        assert (await consumer.getmany(timeout_ms=3000)) == {}
        assert not sessions._flowing
    finally:
        await consumer.stop()


async def test_records_a_few_hundred_ms_apart_are_not_gathered(cluster_a, make_topic):
    """A heartbeat-like trickle (a record every 300 ms): each fetch waited for its record far longer
    than FLOWING_ANSWER_S, so no fetch is sent in flowing mode (which would only add an empty 25 ms
    fetch per record) and each record is answered as it comes."""
    topic = await make_topic(cluster_a, 1)
    consumer = KAFKA_CLIENTS.consumer({"bootstrap.servers": cluster_a.bootstrap_servers,
                                       "auto.offset.reset": "earliest", "fetch.max.wait.ms": 2000},
                                      fetch_sessions=True)

    def slow_trickle() -> list[bytes]:
        import time
        producer = Producer({"bootstrap.servers": cluster_a.bootstrap_servers, "linger.ms": 0})
        values = []
        for i in range(6):
            time.sleep(0.3)
            values.append(b"beat-%d" % i)
            producer.produce(topic, values[-1], partition=0)
            assert producer.flush(10) == 0
        return values

    await consumer.start()
    try:
        sessions = consumer.fetch_sessions
        consumer.assign([TopicPartition(topic, 0)])
        assert (await consumer.getmany(timeout_ms=1000)) == {}  # the session is open and idle
        writing = asyncio.create_task(asyncio.to_thread(slow_trickle))
        got = await read(consumer, 6, timeout=30)
        assert got == {0: await writing}
        assert sessions.counters["flowing"] == 0
    finally:
        await consumer.stop()


@pytest.mark.parametrize("gather_ms", [7, 0])
async def test_the_gather_wait_is_the_consumers_and_zero_turns_gathering_off(cluster_a, make_topic, gather_ms):
    """The same trickle read by a consumer with its own gather wait: the fetches that go out while
    records flow ask the broker for FLOWING_MIN_BYTES within ``gather_ms`` (7), or, with 0, never
    for more than the consumer's fetch.min.bytes (1); either way every record arrives once and in
    order."""
    from mirrorline.clients.fetch_sessions import FLOWING_MIN_BYTES

    partitions, records = 4, 500
    topic = await make_topic(cluster_a, partitions)
    consumer = KAFKA_CLIENTS.consumer({"bootstrap.servers": cluster_a.bootstrap_servers,
                                       "auto.offset.reset": "earliest", "fetch.max.wait.ms": 2000},
                                      fetch_sessions=True, gather_max_wait_ms=gather_ms)
    asked: list[tuple[int, int]] = []  # (max wait ms, min bytes) of each fetch as it went out
    client = consumer._consumer._client
    sent = client.send

    async def spy(node_id, request, **kwargs):
        if getattr(request, "API_KEY", None) == 1:
            asked.append((request._max_wait_ms, request._min_bytes))
        return await sent(node_id, request, **kwargs)

    client.send = spy  # below the sessions, which wrap the client's send when the consumer starts
    await consumer.start()
    try:
        sessions = consumer.fetch_sessions
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        await consumer.getmany(timeout_ms=500)
        writing = asyncio.create_task(asyncio.to_thread(trickle, cluster_a.bootstrap_servers, topic,
                                                        partitions, records))
        got = await read(consumer, records, timeout=60)
        assert got == await writing
        if gather_ms:
            assert sessions.counters["flowing"] > 0
            assert (gather_ms, FLOWING_MIN_BYTES) in asked
            assert {wait for wait, min_bytes in asked if min_bytes == FLOWING_MIN_BYTES} == {gather_ms}
        else:
            assert sessions.counters["flowing"] == 0
            assert {min_bytes for _wait, min_bytes in asked} == {1}
            assert {wait for wait, _min_bytes in asked} == {2000}
    finally:
        await consumer.stop()
