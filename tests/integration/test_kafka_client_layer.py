"""The contract's Kafka clients (``context.clients``: mirrorline.clients' Admin, Consumer, Producer) against real brokers.

Everything a plugin gets is mirrorline's (partitions, topic descriptions, offsets, errors, fetched
batches), and each capability is checked with librdkafka (confluent-kafka), an independent client:

- Admin: topics created with the broker's defaults (-1) and configs, grown, described (a missing
  topic is reported, typed, and not auto-created), its configs read and altered incrementally;
  group offsets listed, altered and deleted, refused with GroupNotEmptyError while a member is active;
  the cluster described; CreateTopics refusals come back typed;
- Producer: records with neither key nor value, futures resolving to RecordMetadata, and a
  broker's refusal arriving in the future as the contract's RecordTooLargeError;
- Consumer: assign/seek/getmany with mirrorline partitions as keys, end/beginning offsets,
  offsets_for_times, OffsetOutOfRangeError naming the partition and position under
  ``auto.offset.reset=none``; with ``fetch_batches``, FetchedBatch items whose records decode to
  exactly what librdkafka reads.
"""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import Consumer as RdConsumer
from confluent_kafka import Producer as RdProducer
from confluent_kafka import TopicPartition as RdPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from mirrorline.api import (BatchFetch, FetchedBatch, GroupNotEmptyError, NewTopic, OffsetAndMetadata,
                            OffsetOutOfRangeError, RecordMetadata, RecordTooLargeError, TopicAlreadyExistsError,
                            TopicPartition, UnknownTopicOrPartitionError)
from mirrorline.clients.runtime_clients import KAFKA_CLIENTS

pytestmark = pytest.mark.integration


def rd_topics(bootstrap: str) -> dict:
    return AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics


def rd_config(bootstrap: str, topic: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    [future] = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)]).values()
    return {name: entry.value for name, entry in future.result(timeout=10).items()}


def rd_read(bootstrap: str, topic: str, partition: int, count: int) -> list:
    consumer = RdConsumer({"bootstrap.servers": bootstrap, "group.id": "rd-reader", "enable.auto.commit": False})
    consumer.assign([RdPartition(topic, partition, 0)])
    out = []
    try:
        for _ in range(100):
            for message in consumer.consume(count - len(out), timeout=0.5):
                if message.error() is None:
                    out.append(message)
            if len(out) >= count:
                break
    finally:
        consumer.close()
    return out


def rd_produce(bootstrap: str, topic: str, values: list[bytes], **settings) -> None:
    producer = RdProducer({"bootstrap.servers": bootstrap, **settings})
    for value in values:
        producer.produce(topic, value=value, key=b"k" + value[:4], partition=0)
        producer.poll(0)
    assert producer.flush(15) == 0


async def until(check, timeout: float = 15.0):
    """``await check()`` until it returns something true (KRaft brokers learn of changes a moment late)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        result = await check()
        if result or asyncio.get_running_loop().time() > deadline:
            return result
        await asyncio.sleep(0.2)


async def test_admin_topics_configs_and_cluster(cluster_a, unique_name):
    bootstrap = cluster_a.bootstrap_servers
    topic, missing = unique_name("wall-admin"), unique_name("wall-missing")
    async with KAFKA_CLIENTS.admin({"bootstrap.servers": bootstrap, "client.id": "wall-test"}) as admin:
        created = await admin.create_topics([NewTopic(topic, 2, -1, {"cleanup.policy": "compact",
                                                                       "retention.ms": "3600000"})])
        assert created == {topic: None}
        again = await admin.create_topics([NewTopic(topic, 2, 1)])
        assert isinstance(again[topic], TopicAlreadyExistsError) and again[topic].code == 36

        [described] = await until(lambda: admin.describe_topics([topic]))
        assert described.error is None and [p.partition for p in described.partitions] == [0, 1]
        [absent] = await admin.describe_topics([missing])
        assert isinstance(absent.error, UnknownTopicOrPartitionError) and absent.partitions == ()
        assert missing not in await admin.list_topics()

        await admin.create_partitions({topic: 3})
        grown = await until(lambda: admin.describe_topics([topic]))
        assert len(grown[0].partitions) in (2, 3)  # the broker may still be learning of the third

        await admin.incremental_alter_configs(topic, {"retention.ms": "7200000"}, ["cleanup.policy"])
        configs = await until(lambda: _configs_when(admin, topic, lambda c: c["retention.ms"].value == "7200000"))
        assert configs["cleanup.policy"].value == "delete" and configs["cleanup.policy"].source == 5  # default

        cluster = await admin.describe_cluster()
        assert cluster.cluster_id and cluster.brokers and cluster.brokers[0].port > 0

    assert missing not in await asyncio.to_thread(rd_topics, bootstrap)  # describing created nothing
    rd = await asyncio.to_thread(rd_config, bootstrap, topic)
    assert (rd["retention.ms"], rd["cleanup.policy"]) == ("7200000", "delete")
    assert len((await asyncio.to_thread(rd_topics, bootstrap))[topic].partitions) == 3


def _commit_one_offset(bootstrap: str, topic: str) -> None:
    consumer = RdConsumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-group"})
    try:
        consumer.commit(offsets=[RdPartition(topic, 0, 0)], asynchronous=False)
    finally:
        consumer.close()


async def test_describe_topics_matches_librdkafka(cluster_a, make_topic):
    """Every topic of the cluster, described with Metadata v12 and the hand decoder
    (:mod:`mirrorline.clients.metadata_v12`), and counted by its counting mode, as librdkafka's
    own Metadata request sees it."""
    bootstrap = cluster_a.bootstrap_servers
    topics = [await make_topic(cluster_a, n, "wall-describe") for n in (1, 3, 5)]
    await asyncio.to_thread(_commit_one_offset, bootstrap, topics[0])  # so __consumer_offsets exists
    async with KAFKA_CLIENTS.admin({"bootstrap.servers": bootstrap}) as admin:
        described = {d.name: d for d in await until(lambda: admin.describe_topics())}
        named = await admin.describe_topics(topics)
        counts = await admin.partition_counts()
        named_counts = await admin.partition_counts([*topics, f"{topics[0]}-missing"])
        assert admin._metadata_v12  # the broker answered v12: no fallback to aiokafka's request
    rd = await asyncio.to_thread(rd_topics, bootstrap)
    assert set(described) == set(rd)
    for name, theirs in rd.items():
        ours = described[name]
        assert ours.error is None
        assert [(p.partition, p.leader, list(p.replicas), list(p.isr)) for p in ours.partitions] == sorted(
            (p.id, p.leader, list(p.replicas), list(p.isrs)) for p in theirs.partitions.values())
    assert [len(d.partitions) for d in named] == [1, 3, 5]
    assert counts == {name: len(theirs.partitions) for name, theirs in rd.items()}
    assert named_counts == dict(zip(topics, (1, 3, 5)))  # a missing topic is left out
    assert described["__consumer_offsets"].internal and not described[topics[0]].internal


async def _configs_when(admin, topic, ready):
    configs = {e.name: e for e in (await admin.describe_topic_configs([topic])).get(topic, [])}
    return configs if configs and ready(configs) else None


async def test_admin_group_offsets(cluster_a, make_topic, unique_name):
    bootstrap = cluster_a.bootstrap_servers
    topic, group = await make_topic(cluster_a, 2, "wall-groups"), unique_name("wall-group")
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    async with KAFKA_CLIENTS.admin({"bootstrap.servers": bootstrap}) as admin:
        await admin.alter_consumer_group_offsets(group, {tp0: 5, tp1: (7, "meta")})
        listed = await admin.list_consumer_group_offsets(group)
        assert listed == {tp0: OffsetAndMetadata(5, ""), tp1: OffsetAndMetadata(7, "meta")}
        assert all(type(tp) is TopicPartition for tp in listed)
        # the coordinator is looked up once per group, not on every call (a checkpoint cycle asks
        # hundreds of groups every minute), and found again when the remembered one is gone
        lookups = []
        find_coordinator = admin._admin.find_coordinator
        admin._admin.find_coordinator = lambda *a, **k: lookups.append(a) or find_coordinator(*a, **k)
        assert await admin.list_consumer_group_offsets(group, [tp1]) == {tp1: OffsetAndMetadata(7, "meta")}
        assert lookups == []
        admin._coordinators[group] = 9999  # no such broker: as after the coordinator's broker left
        assert await admin.list_consumer_group_offsets(group) == listed
        assert lookups == [(group,)] and admin._coordinators[group] != 9999
        assert group in [g.group_id for g in await admin.list_consumer_groups()]
        assert await admin.describe_consumer_group_state(group) == "Empty"

        member = RdConsumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                             "session.timeout.ms": 6000})
        member.subscribe([topic])
        try:
            await asyncio.to_thread(_poll_until_assigned, member)
            with pytest.raises(GroupNotEmptyError) as refused:
                await admin.alter_consumer_group_offsets(group, {tp0: 1})
            assert refused.value.group == group
        finally:
            await asyncio.to_thread(member.close)

        await admin.delete_consumer_group_offsets(group, [tp1])
        assert await admin.list_consumer_group_offsets(group) == {tp0: OffsetAndMetadata(5, "")}

    reader = RdConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        committed = await asyncio.to_thread(reader.committed, [RdPartition(topic, 0), RdPartition(topic, 1)], 10)
    finally:
        reader.close()
    assert [c.offset for c in committed] == [5, -1001]  # -1001: librdkafka's "no committed offset"


async def test_admin_offsets_of_many_groups_in_one_request(cluster_a, make_topic, unique_name):
    """Kafka 3.0+ answers many groups per FindCoordinator (v4) and OffsetFetch (v8): a checkpoint
    cycle over hundreds of groups is a couple of requests, not two per group. The answers equal
    the one-group-per-request ones and what librdkafka reads."""
    bootstrap = cluster_a.bootstrap_servers
    topic = await make_topic(cluster_a, 3, "wall-many-groups")
    groups = [unique_name(f"wall-many-{i}") for i in range(5)]
    never_committed = unique_name("wall-many-none")
    async with KAFKA_CLIENTS.admin({"bootstrap.servers": bootstrap}) as admin:
        for i, group in enumerate(groups):
            await admin.alter_consumer_group_offsets(
                group, {TopicPartition(topic, p): (10 * i + p, f"m{i}") for p in range(3) if (i + p) % 2 == 0})
        sent = []
        send = admin._admin._send_request
        admin._admin._send_request = lambda request, *a: sent.append(type(request).__name__) or send(request, *a)
        batched = await admin.list_consumer_groups_offsets([*groups, never_committed])
        assert sorted(sent) == ["FetchGroupsOffsets", "FindGroupCoordinators"]
        assert batched[never_committed] == {}
        for i, group in enumerate(groups):
            assert batched[group] == {TopicPartition(topic, p): OffsetAndMetadata(10 * i + p, f"m{i}")
                                      for p in range(3) if (i + p) % 2 == 0}
        sent.clear()
        assert await admin.list_consumer_groups_offsets(groups) == {g: batched[g] for g in groups}
        assert sent == ["FetchGroupsOffsets"]  # the coordinators are remembered
        admin._batched_group_offsets = False  # as before Kafka 3.0: one request per group
        assert await admin.list_consumer_groups_offsets(groups) == {g: batched[g] for g in groups}

    reader = RdConsumer({"bootstrap.servers": bootstrap, "group.id": groups[3]})
    try:
        committed = await asyncio.to_thread(reader.committed, [RdPartition(topic, p) for p in range(3)], 10)
    finally:
        reader.close()
    assert [c.offset for c in committed] == [-1001, 31, -1001]


def _poll_until_assigned(consumer) -> None:
    for _ in range(60):
        consumer.poll(0.5)
        if consumer.assignment():
            return
    raise AssertionError("the librdkafka member never got its partitions")


async def test_producer_and_consumer(cluster_a, make_topic):
    bootstrap = cluster_a.bootstrap_servers
    topic = await make_topic(cluster_a, 1, "wall-produce", {"max.message.bytes": "2000"})
    tp = TopicPartition(topic, 0)
    async with KAFKA_CLIENTS.producer({"bootstrap.servers": bootstrap, "acks": "all",
                                       "max.request.size": "100000"}) as producer:
        assert await producer.partitions_for(topic) == {0}
        first = await producer.send_and_wait(topic, None, None, 0, 1_700_000_000_000, [("h", b"1")])
        assert type(first) is RecordMetadata and (first.topic, first.partition, first.offset) == (topic, 0, 0)
        futures = [await producer.send(topic, b"v%d" % i, b"k%d" % i, 0) for i in range(1, 5)]
        await producer.flush()
        assert [f.result().offset for f in futures] == [1, 2, 3, 4]
        too_large = await producer.send(topic, b"x" * 5000, None, 0)
        with pytest.raises(RecordTooLargeError):  # the broker's MESSAGE_TOO_LARGE, in the future
            await too_large

    rd = await asyncio.to_thread(rd_read, bootstrap, topic, 0, 5)
    assert [(m.key(), m.value()) for m in rd] == [(None, None)] + [(b"k%d" % i, b"v%d" % i) for i in range(1, 5)]
    assert rd[0].headers() == [("h", b"1")]

    consumer = KAFKA_CLIENTS.consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "none",
                                       "group.id": "ignored"})
    async with consumer:
        assert await consumer.end_offsets([tp]) == {tp: 5} and await consumer.beginning_offsets([tp]) == {tp: 0}
        found = await consumer.offsets_for_times({tp: 1_700_000_000_000})
        assert found[tp].offset == 0
        consumer.assign([tp])
        consumer.seek(tp, 2)
        records = await _read(consumer, tp, 3)
        assert [(r.offset, r.key, r.value) for r in records] == [(i, b"k%d" % i, b"v%d" % i) for i in (2, 3, 4)]
        assert consumer.fetch_position(tp) == 5 and consumer.highwater(tp) == 5
        unassigned = TopicPartition(topic, 9)
        assert consumer.fetch_states([tp, unassigned]) == [(tp, 5, 5, consumer.last_stable_offset(tp)),
                                                           (unassigned, None, None, None)]
        consumer.seek(tp, 50)
        with pytest.raises(OffsetOutOfRangeError) as out_of_range:
            await _read(consumer, tp, 1)
        assert out_of_range.value.partitions == {tp: 50}


async def _read(consumer, tp, count: int) -> list:
    out = []
    for _ in range(30):
        fetched = await consumer.getmany(timeout_ms=500)
        assert set(fetched) <= {tp} and all(type(key) is TopicPartition for key in fetched)
        out.extend(fetched.get(tp, []))
        if len(out) >= count:
            return out
    raise AssertionError(f"read {len(out)} of {count} records")


async def test_consumer_fetching_batches(cluster_a, make_topic):
    bootstrap = cluster_a.bootstrap_servers
    topic = await make_topic(cluster_a, 1, "wall-batches")
    tp = TopicPartition(topic, 0)
    values = [b"%04d" % i + b"." * 100 for i in range(300)]
    # small batches (librdkafka flushes at once with linger.ms=0), merged by coalesce_bytes
    await asyncio.to_thread(rd_produce, bootstrap, topic, values, **{"linger.ms": 0, "compression.type": "lz4"})
    consumer = KAFKA_CLIENTS.consumer({"bootstrap.servers": bootstrap, "isolation.level": "read_committed"},
                                      fetch_batches=BatchFetch(coalesce_bytes=16 * 1024))
    async with consumer:
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        batches = []
        for _ in range(40):
            batches.extend((await consumer.getmany(timeout_ms=500)).get(tp, []))
            if sum(b.record_count for b in batches) >= len(values):
                break
    assert batches and all(type(b) is FetchedBatch for b in batches)
    offsets = [o for b in batches for o in b.source_offsets]
    assert offsets == list(range(len(values)))
    assert all(len(b.data) <= 16 * 1024 + 2048 for b in batches)
    rd = await asyncio.to_thread(rd_read, bootstrap, topic, 0, len(values))
    decoded = [record for b in batches for record in _decode(b.data)]
    assert decoded == [(m.key(), m.value()) for m in rd]


async def test_fetched_bytes_are_freed_without_the_cyclic_collector(cluster_a, make_topic):
    """Each answer's aiokafka record iterator, swapped for a batch iterator, is freed at once: left in
    its reference cycle it kept the partition's fetched bytes until the cyclic collector ran, which a
    mirror process runs rarely (one task copying 1 GB held 1 GB)."""
    import gc

    from aiokafka.consumer.fetcher import PartitionRecords

    bootstrap = cluster_a.bootstrap_servers
    topic = await make_topic(cluster_a, 1, "wall-batch-cycles")
    tp = TopicPartition(topic, 0)
    values = [b"%05d" % i + b"." * 4000 for i in range(2000)]  # 8 MiB, fetched 256 KiB per answer
    await asyncio.to_thread(rd_produce, bootstrap, topic, values, **{"linger.ms": 5})
    consumer = KAFKA_CLIENTS.consumer({"bootstrap.servers": bootstrap, "isolation.level": "read_committed",
                                       "max.partition.fetch.bytes": str(256 * 1024)},
                                      fetch_batches=BatchFetch(coalesce_bytes=0))
    gc.collect()
    gc.disable()
    try:
        async with consumer:
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            copied = 0
            for _ in range(400):
                copied += sum(b.record_count for b in (await consumer.getmany(timeout_ms=500)).get(tp, []))
                if copied >= len(values):
                    break
            alive = [o for o in gc.get_objects() if type(o) is PartitionRecords]
    finally:
        gc.enable()
    assert copied == len(values)
    # about 32 answers were fetched; at most the latest is still referenced by the fetcher
    assert len(alive) <= 2, f"{len(alive)} fetched partitions' records wait for the cyclic collector"


def _decode(data: bytes) -> list[tuple]:
    from aiokafka.record.default_records import DefaultRecordBatch  # the test's own decoder of the wire format
    return [(r.key, r.value) for r in DefaultRecordBatch(data)]
