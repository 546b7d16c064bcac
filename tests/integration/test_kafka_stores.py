"""The Kafka topic-backed stores (distributed mode) against a real broker, in Connect's formats."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from mirrorline.storage import (
    KafkaBasedLog,
    KafkaConfigStore,
    KafkaOffsetStore,
    KafkaStatusStore,
    State,
    Status,
    TargetState,
    partition_key,
)
from mirrorline.storage.kafka_offsets import offset_key
from support.kafka import create_topic, partitions_of, read_all

pytestmark = pytest.mark.integration


@pytest.fixture
def props(cluster_a):
    return {"bootstrap.servers": cluster_a.bootstrap_servers}


@pytest.fixture
async def stores():
    """Collects started stores and stops them all at the end of the test."""
    started = []

    async def start(store):
        await store.start()
        started.append(store)
        return store

    yield start
    for store in reversed(started):
        await store.stop()


async def cleanup_policy(bootstrap: str, topic: str) -> str:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        [response] = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    finally:
        await admin.close()
    [resource] = response.resources
    assert resource[0] == 0, resource
    return {entry[0]: entry[1] for entry in resource[4]}["cleanup.policy"]


async def eventually(check, timeout: float = 15.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


# --- topics -----------------------------------------------------------------------------------


async def test_topics_are_created_compacted_with_requested_partitions(cluster_a, props, unique_name, stores):
    offsets = await stores(KafkaOffsetStore(unique_name("offsets"), props, partitions=7, replication_factor=1))
    configs = await stores(KafkaConfigStore(unique_name("configs"), props, replication_factor=1))
    statuses = await stores(KafkaStatusStore(unique_name("status"), props, partitions=3, replication_factor=1))
    for store, count in ((offsets, 7), (configs, 1), (statuses, 3)):
        assert await partitions_of(cluster_a.bootstrap_servers, store.topic) == list(range(count))
        assert await cleanup_policy(cluster_a.bootstrap_servers, store.topic) == "compact"


async def test_from_config_reads_worker_settings(unique_name):
    topic = unique_name("offsets")
    store = KafkaOffsetStore.from_config({"bootstrap.servers": "x:9092", "offset.storage.topic": topic,
                                          "offset.storage.partitions": "4",
                                          "offset.storage.replication.factor": "1"})
    assert (store.topic, store.log.partitions, store.log.replication_factor) == (topic, 4, 1)
    assert KafkaOffsetStore.from_config({"offset.storage.topic": topic}).log.partitions == 25
    status = KafkaStatusStore.from_config({"status.storage.topic": topic})
    assert (status.log.partitions, status.log.replication_factor) == (5, 3)
    assert KafkaConfigStore.from_config({"config.storage.topic": topic}).log.partitions == 1


async def test_existing_topic_that_is_not_compacted_is_refused(cluster_a, props, unique_name):
    topic = unique_name("offsets")
    await create_topic(cluster_a.bootstrap_servers, topic, 1, {"cleanup.policy": "delete"})
    store = KafkaOffsetStore(topic, props, partitions=1, replication_factor=1)
    with pytest.raises(ValueError, match="cleanup.policy=compact"):
        await store.start()


async def test_config_topic_with_several_partitions_is_refused(cluster_a, props, unique_name):
    topic = unique_name("configs")
    await create_topic(cluster_a.bootstrap_servers, topic, 2, {"cleanup.policy": "compact"})
    with pytest.raises(ValueError, match="exactly 1 partition"):
        await KafkaConfigStore(topic, props, replication_factor=1).start()


# --- offsets ----------------------------------------------------------------------------------


async def test_offsets_round_trip_across_a_restart(props, unique_name, stores):
    topic = unique_name("offsets")
    first = await stores(KafkaOffsetStore(topic, props, partitions=5, replication_factor=1))
    parts = [{"cluster": "A", "partition": p, "topic": "orders"} for p in range(4)]
    await first.put("src", [(p, {"offset": 10 + i}) for i, p in enumerate(parts)])
    await first.put("other", [(parts[0], {"offset": 99})])
    assert await first.get("src", parts + [{"cluster": "A", "partition": 9, "topic": "orders"}]) == [
        {"offset": 10}, {"offset": 11}, {"offset": 12}, {"offset": 13}, None]

    second = await stores(KafkaOffsetStore(topic, props, partitions=5, replication_factor=1))  # a worker restart
    assert await second.get("src", parts) == [{"offset": 10}, {"offset": 11}, {"offset": 12}, {"offset": 13}]
    assert await second.get("other", parts[:1]) == [{"offset": 99}]
    assert sorted((p["partition"], o["offset"]) for p, o in await second.all("src")) == [
        (0, 10), (1, 11), (2, 12), (3, 13)]

    # a later write by the first instance reaches the second through the topic
    await first.put("src", [(parts[0], {"offset": 50})])
    assert dict((p["partition"], o["offset"]) for p, o in await second.all("src"))[0] == 50


async def test_own_offset_writes_and_another_writers_interleave_correctly(props, unique_name, stores):
    """put applies its records itself and the tail passes over them (see
    tests/unit/test_offset_store_own_writes.py); another writer's record in between still wins,
    and nothing is left remembered once the tail has caught up."""
    topic = unique_name("offsets")
    mine = await stores(KafkaOffsetStore(topic, props, partitions=2, replication_factor=1))
    theirs = await stores(KafkaOffsetStore(topic, props, partitions=2, replication_factor=1))
    parts = [{"cluster": "A", "partition": p, "topic": "orders"} for p in range(6)]
    await mine.put("src", [(p, {"offset": 1}) for p in parts])
    await theirs.put("src", [(parts[0], {"offset": 7})])
    await mine.put("src", [(parts[1], {"offset": 2})])
    await mine.log.read_to_end()
    assert not mine._put_ahead  # each own write was passed over once (or read before put applied it)
    assert await mine.get("src", parts[:3]) == [{"offset": 7}, {"offset": 2}, {"offset": 1}]
    assert await theirs.get("src", parts[:3]) == [{"offset": 7}, {"offset": 2}, {"offset": 1}]


async def test_a_large_flush_is_not_decoded_by_its_own_tail(props, unique_name, stores, monkeypatch):
    """A flush of thousands of partitions meets its tail while put still waits for the broker's
    acknowledgements; the tail matches those records by their bytes instead of decoding them,
    and a second store (another worker) decodes and agrees with every one."""
    import mirrorline.storage.kafka_offsets as kafka_offsets

    topic = unique_name("offsets")
    mine = await stores(KafkaOffsetStore(topic, props, partitions=5, replication_factor=1))
    decoded = []
    real_loads = json.loads

    def counting_loads(raw, *args, **kwargs):
        decoded.append(raw)
        return real_loads(raw, *args, **kwargs)

    monkeypatch.setattr(kafka_offsets.json, "loads", counting_loads)
    parts = [{"cluster": "A", "partition": p % 8, "topic": f"t{p // 8}"} for p in range(4000)]
    for round_number in (1, 2):
        await mine.put("src", [(p, {"offset": round_number * 100 + i % 7}) for i, p in enumerate(parts)])
    await mine.log.read_to_end()
    assert decoded == []  # neither matched (tail during put) nor skipped (tail after put) records were decoded
    assert not mine._in_flight and not mine._put_ahead
    monkeypatch.setattr(kafka_offsets.json, "loads", real_loads)
    theirs = await stores(KafkaOffsetStore(topic, props, partitions=5, replication_factor=1))
    expected = [{"offset": 200 + i % 7} for i in range(len(parts))]
    assert await mine.get("src", parts) == expected
    assert await theirs.get("src", parts) == expected


async def test_a_flush_lands_where_javas_partitioner_puts_each_key_at_the_offsets_put_recorded(
        cluster_a, props, unique_name, stores):
    """A flush is written in batches per partition (``KafkaProducer.send_keyed``), not record by
    record: each record must still land in the partition a Java producer picks for its key (checked
    against librdkafka's ``murmur2_random``, the same partitioner), in the order given within that
    partition, at the offset ``put`` recorded for it (read back by librdkafka)."""
    from confluent_kafka import Producer

    from support.eos import read_committed_messages

    bootstrap = cluster_a.bootstrap_servers
    topic, probe = unique_name("offsets"), unique_name("probe")
    store = await stores(KafkaOffsetStore(topic, props, partitions=7, replication_factor=1))
    # 3,000 keys of ~70 bytes: several 16-KiB batches per partition
    parts = [{"cluster": "A", "partition": p % 3, "topic": f"orders-{p // 3}"} for p in range(3000)]
    await store.put("src", [(p, {"offset": i}) for i, p in enumerate(parts)])
    await store.put("src", [(parts[0], None), (parts[1], {"offset": -5}), (parts[2], {"offset": 2, "x": "y"})])
    keys = [offset_key("src", p) for p in parts]

    await create_topic(bootstrap, probe, 7, {})
    placed: dict[bytes, int] = {}

    def place_with_librdkafka() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
        for key in keys:
            producer.produce(probe, key=key, value=b"",
                             on_delivery=lambda err, msg: placed.__setitem__(msg.key(), msg.partition()))
        assert producer.flush(30) == 0

    await asyncio.to_thread(place_with_librdkafka)
    read = await asyncio.to_thread(read_committed_messages, bootstrap, topic)
    landed = {key: partition for partition, records in read.items() for _, key, _ in records}
    assert len(landed) == len(keys) and all(landed[key] == placed[key] for key in keys)
    for partition, records in read.items():  # the first flush in the order given, then the second
        first_flush = [key for key in keys if placed[key] == partition]
        assert [key for _, key, _ in records[:len(first_flush)]] == first_flush
    values = {(partition, offset): value for partition, records in read.items() for offset, _, value in records}
    for i, part in enumerate(parts[:6]):
        written_at = store._written_at[partition_key("src", part)]
        expected = {0: None, 1: b'{"offset":-5}', 2: b'{"offset":2,"x":"y"}'}.get(i, b'{"offset":%d}' % i)
        assert values[written_at] == expected, (i, written_at)
    assert await store.get("src", parts[:4]) == [None, {"offset": -5}, {"offset": 2, "x": "y"}, {"offset": 3}]


async def test_offset_tombstones_remove_partitions(props, unique_name, stores):
    topic = unique_name("offsets")
    store = await stores(KafkaOffsetStore(topic, props, partitions=3, replication_factor=1))
    a, b = {"topic": "t", "partition": 0}, {"topic": "t", "partition": 1}
    await store.put("c", [(a, {"offset": 1}), (b, {"offset": 2})])
    await store.put("c", [(a, None)])
    assert await store.get("c", [a, b]) == [None, {"offset": 2}]
    assert await store.all("c") == [(b, {"offset": 2})]
    again = await stores(KafkaOffsetStore(topic, props, partitions=3, replication_factor=1))
    assert await again.get("c", [a, b]) == [None, {"offset": 2}]
    assert await again.all("c") == [(b, {"offset": 2})]


async def test_offset_key_bytes_are_javas_and_lookup_is_order_insensitive(cluster_a, props, unique_name, stores):
    topic = unique_name("offsets")
    store = await stores(KafkaOffsetStore(topic, props, partitions=25, replication_factor=1))
    partition = {"cluster": "A", "partition": 0, "topic": "orders"}  # Java HashMap order
    await store.put("MirrorSourceConnector", [(partition, {"offset": 41})])

    records = [r for rs in (await read_all(cluster_a.bootstrap_servers, topic, expect=1)).values() for r in rs]
    assert [(r.key, r.value) for r in records] == [
        (b'["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"orders"}]', b'{"offset":41}')]
    # the default partitioner (murmur2 of the key bytes) placed it where a Java producer would
    from aiokafka.partitioner import murmur2
    assert records[0].partition == (murmur2(records[0].key) & 0x7FFFFFFF) % 25

    reordered = {"topic": "orders", "partition": 0, "cluster": "A"}
    assert await store.get("MirrorSourceConnector", [reordered]) == [{"offset": 41}]
    reader = await stores(KafkaOffsetStore(topic, props, partitions=25, replication_factor=1))
    assert await reader.get("MirrorSourceConnector", [reordered]) == [{"offset": 41}]
    [(stored_partition, _)] = await reader.all("MirrorSourceConnector")
    assert list(stored_partition) == ["cluster", "partition", "topic"]  # order as read from the topic
    assert partition_key("MirrorSourceConnector", reordered) == partition_key("MirrorSourceConnector", partition)


async def test_offsets_written_by_a_java_worker_are_read(cluster_a, props, unique_name, stores):
    topic = unique_name("offsets")
    store = await stores(KafkaOffsetStore(topic, props, partitions=2, replication_factor=1))
    # records as Java Connect writes them, plus junk a reader must survive
    await store.log.send_batch([
        (b'["MirrorCheckpointConnector",{"partition":3,"topic":"B.orders","group":"g1"}]', b'{"offset":0}'),
        (b'not json', b'{"offset":1}'),
        (b'["x"]', b'{"offset":1}'),
    ])
    await store.log.read_to_end()
    assert await store.get("MirrorCheckpointConnector", [{"group": "g1", "topic": "B.orders", "partition": 3}]) == [
        {"offset": 0}]


# --- configs ----------------------------------------------------------------------------------


async def test_connector_configs_put_remove_and_seen_by_a_second_instance(props, unique_name, stores):
    topic = unique_name("configs")
    events = []
    store = await stores(KafkaConfigStore(topic, props, replication_factor=1,
                                          listener=lambda kind, name: events.append((kind, name))))
    assert store.offset == -1 and store.connectors() == {}
    await store.put_connector("a", {"connector.class": "X", "tasks.max": "2"})
    await store.put_connector("b", {"connector.class": "Y"})
    assert store.connectors() == {"a": {"connector.class": "X", "tasks.max": "2"}, "b": {"connector.class": "Y"}}
    assert events == [("connector", "a"), ("connector", "b")]
    assert store.offset == 2

    await store.put_task_configs("a", [{"task": "0"}, {"task": "1"}])
    await store.put_target_state("a", TargetState.PAUSED)
    await store.remove_connector("b")
    assert store.connectors() == {"a": {"connector.class": "X", "tasks.max": "2"}}
    assert events[2:] == [("tasks", "a"), ("target_state", "a"), ("connector", "b"), ("target_state", "b")]

    second_events = []
    second = await stores(KafkaConfigStore(topic, props, replication_factor=1,
                                           listener=lambda kind, name: second_events.append((kind, name))))
    assert second.connectors() == store.connectors()
    assert second.task_configs("a") == [{"task": "0"}, {"task": "1"}]
    assert second.target_state("a") is TargetState.PAUSED
    assert second.task_configs("b") == [] and second.target_state("b") is TargetState.STARTED
    assert second.offset == store.offset
    assert second_events == []  # records loaded by start() are not reported

    await store.remove_connector("a")
    await eventually(lambda: "a" not in second.connectors())
    assert second.task_configs("a") == [] and second.target_state("a") is TargetState.STARTED
    assert ("connector", "a") in second_events


async def test_task_configs_are_visible_only_after_their_commit(props, unique_name, stores):
    topic = unique_name("configs")
    events = []
    store = await stores(KafkaConfigStore(topic, props, replication_factor=1,
                                          listener=lambda kind, name: events.append((kind, name))))
    await store.put_connector("c", {"connector.class": "X"})
    await store.put_task_configs("c", [{"v": "old"}])
    assert store.task_configs("c") == [{"v": "old"}]

    task = lambda n, v: (f"task-c-{n}".encode(), json.dumps({"properties": {"v": v}}).encode())  # noqa: E731
    await store.log.send_batch([task(0, "new0"), task(1, "new1")])
    await store.log.read_to_end()
    assert store.task_configs("c") == [{"v": "old"}]  # no commit yet
    assert events.count(("tasks", "c")) == 1

    await store.log.send(b"commit-c", b'{"tasks":2}')
    await store.log.read_to_end()
    assert store.task_configs("c") == [{"v": "new0"}, {"v": "new1"}]
    assert events.count(("tasks", "c")) == 2

    # a commit whose task records are missing leaves the connector inconsistent (no tasks)
    await store.log.send_batch([task(0, "x0"), (b"commit-c", b'{"tasks":2}')])
    await store.log.read_to_end()
    assert store.task_configs("c") == [] and store.inconsistent() == {"c"}

    # a complete commit repairs it; shrinking to fewer tasks works
    await store.put_task_configs("c", [{"v": "only"}])
    assert store.task_configs("c") == [{"v": "only"}] and store.inconsistent() == set()

    reader = await stores(KafkaConfigStore(topic, props, replication_factor=1))
    assert reader.task_configs("c") == [{"v": "only"}]

    await store.put_task_configs("c", [])
    assert store.task_configs("c") == []


async def test_target_states_are_written_as_connect_writes_them(cluster_a, props, unique_name, stores):
    topic = unique_name("configs")
    store = await stores(KafkaConfigStore(topic, props, replication_factor=1))
    assert store.target_state("c") is TargetState.STARTED
    for state in (TargetState.PAUSED, TargetState.STOPPED, TargetState.STARTED):
        await store.put_target_state("c", state)
        assert store.target_state("c") is state

    records = (await read_all(cluster_a.bootstrap_servers, topic, expect=3))[0]
    assert [(r.key, json.loads(r.value)) for r in records] == [
        (b"target-state-c", {"state": "PAUSED", "state.v2": "PAUSED"}),
        (b"target-state-c", {"state": "PAUSED", "state.v2": "STOPPED"}),
        (b"target-state-c", {"state": "STARTED", "state.v2": "STARTED"}),
    ]
    await store.put_target_state("c", TargetState.STOPPED)
    reader = await stores(KafkaConfigStore(topic, props, replication_factor=1))
    assert reader.target_state("c") is TargetState.STOPPED

    # a record from a worker that predates state.v2
    await store.log.send(b"target-state-old", b'{"state":"PAUSED"}')
    await store.log.read_to_end()
    assert store.target_state("old") is TargetState.PAUSED


async def test_config_records_as_java_connect_writes_them(cluster_a, props, unique_name, stores):
    topic = unique_name("configs")
    store = await stores(KafkaConfigStore(topic, props, replication_factor=1))
    await store.put_connector("mm", {"connector.class": "MirrorSourceConnector"})
    await store.put_task_configs("mm", [{"task.id": "0"}])
    records = (await read_all(cluster_a.bootstrap_servers, topic, expect=3))[0]
    assert [(r.key, r.value) for r in records] == [
        (b"connector-mm", b'{"properties":{"connector.class":"MirrorSourceConnector"}}'),
        (b"task-mm-0", b'{"properties":{"task.id":"0"}}'),
        (b"commit-mm", b'{"tasks":1}'),
    ]
    # unknown record types and junk are skipped
    await store.log.send_batch([(b"session-key", b'{"key":"abc","algorithm":"HmacSHA256","creation-timestamp":1}'),
                                (b"connector-bad", b"{not json"), (b"task-mm-x", b'{"properties":{}}')])
    await store.log.read_to_end()
    assert store.connectors() == {"mm": {"connector.class": "MirrorSourceConnector"}}
    assert store.offset == 6


# --- statuses ---------------------------------------------------------------------------------


async def test_statuses_put_get_remove_across_instances(cluster_a, props, unique_name, stores):
    topic = unique_name("status")
    store = await stores(KafkaStatusStore(topic, props, partitions=5, replication_factor=1))
    running = Status(State.RUNNING, "w1:8083", generation=3)
    failed = Status(State.FAILED, "w2:8083", trace="Traceback ...", generation=3)
    await store.put_connector("c-1", running)
    await store.put_task("c-1", 0, running)
    await store.put_task("c-1", 1, failed)
    assert store.connector("c-1") == running
    assert store.tasks("c-1") == {0: running, 1: failed}

    second = await stores(KafkaStatusStore(topic, props, partitions=5, replication_factor=1))
    assert second.connector("c-1") == running and second.tasks("c-1") == {0: running, 1: failed}

    records = {r.key: r.value for rs in (await read_all(cluster_a.bootstrap_servers, topic, expect=3)).values()
               for r in rs}
    assert records[b"status-connector-c-1"] == b'{"state":"RUNNING","trace":null,"worker_id":"w1:8083","generation":3}'
    assert json.loads(records[b"status-task-c-1-1"]) == {"state": "FAILED", "trace": "Traceback ...",
                                                          "worker_id": "w2:8083", "generation": 3}

    await store.remove("c-1", keep_connector=True)
    assert store.tasks("c-1") == {} and store.connector("c-1") == running
    await eventually(lambda: second.tasks("c-1") == {})
    await store.remove("c-1")
    assert store.connector("c-1") is None
    await eventually(lambda: second.connector("c-1") is None)

    third = await stores(KafkaStatusStore(topic, props, partitions=5, replication_factor=1))
    assert third.connector("c-1") is None and third.tasks("c-1") == {}


# --- the log itself ---------------------------------------------------------------------------


async def test_log_reads_its_own_writes_and_survives_a_failing_callback(props, unique_name):
    seen = []

    def on_record(record):
        if record.value == b"boom":
            raise RuntimeError("bad record")
        seen.append((record.partition, record.key, record.value))

    log = KafkaBasedLog(unique_name("log"), props, on_record, partitions=3, replication_factor=1, topic_config={})
    await log.start()
    try:
        await log.send(b"k", b"boom", partition=0)
        await log.send_batch([(b"k", b"1"), (b"k", b"2"), (b"j", None)], partition=1)
        await log.read_to_end()
        assert seen == [(1, b"k", b"1"), (1, b"k", b"2"), (1, b"j", None)]
    finally:
        await log.stop()
    await log.stop()  # idempotent


async def test_read_to_end_is_prompt_when_the_log_ends_with_an_aborted_transaction(props, unique_name):
    """The tail's getmany waits up to 10 s for records; records of an aborted transaction and its
    marker are never returned, only passed over. read_to_end watches the consumer's position itself,
    so it returns once the tail is past them, not when that wait ends. Written with librdkafka."""
    from confluent_kafka import Producer

    topic = unique_name("txlog")
    seen = []
    log = KafkaBasedLog(topic, props, seen.append, partitions=1, replication_factor=1, topic_config={},
                        read_committed=True)
    await log.start()
    try:
        await log.read_to_end()  # the tail is now waiting in its getmany

        def aborted() -> None:
            producer = Producer({"bootstrap.servers": props["bootstrap.servers"],
                                 "transactional.id": unique_name("tx")})
            producer.init_transactions(30)
            producer.begin_transaction()
            producer.produce(topic, key=b"k", value=b"never", partition=0)
            producer.flush(30)
            producer.abort_transaction(30)

        await asyncio.to_thread(aborted)
        started = asyncio.get_running_loop().time()
        await log.read_to_end()
        waited = asyncio.get_running_loop().time() - started
        assert seen == []
        assert waited < 7, f"read_to_end took {waited:.1f} s: it waited for the tail's getmany to time out"
    finally:
        await log.stop()
