"""A source task's writes are bounded by ``delivery.timeout.ms``, and its producer's auto-creation is the worker's choice.

Without a broker: :class:`WorkerSourceTask` with producers that refuse every record, or never
acknowledge one; the real broker cases are in tests/faults/test_stall_watchdog.py (a frozen target)
and tests/integration/test_topic_creation*.py. Also: which producers may have a broker auto-create
a topic (``mirrorline.clients.no_auto_create``, per client), and the CreateTopics v4 request.
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.protocol.metadata import MetadataRequest, MetadataRequest_v5

from mirrorline.api import ConnectorTaskId, PartitionNotAvailableError, SourceConnector, SourceRecord, SourceTask
from mirrorline.clients import no_auto_create
from mirrorline.clients.kafka_admin import CreateTopicsRequest_v4, CreateTopicsV4Request
from mirrorline.clients.producer import RecordProducer
from mirrorline.runtime.topic_creation import TopicCreationError
from mirrorline.runtime.worker_task import WorkerSourceTask
from mirrorline.storage.offsets import MemoryOffsetStore
from mirrorline.runtime.context import StoreOffsetReader
from mirrorline.storage.status import State
from support.herder_fakes import eventually, patch_record_producer, registry_of, start_distributed_herder

TASK = ConnectorTaskId("bounded", 0)


class OneRecordTask(SourceTask):
    """Returns one record, then nothing."""

    async def start(self, config):
        self.done = False

    async def poll(self):
        await asyncio.sleep(0.01)
        if self.done:
            return []
        self.done = True
        return [SourceRecord({"p": 0}, {"o": 0}, "orders", 0, b"k", b"v")]

    async def stop(self):
        pass


class RefusingProducer:
    """Every send is refused with a retriable error, as when a topic never appears in the metadata."""

    def __init__(self, kwargs, ignored=None):
        self.kwargs = kwargs
        self.attempts = 0

    async def start(self):
        pass

    async def stop(self):
        pass

    async def flush(self):
        pass

    async def learn_topics(self, topics):
        pass

    async def send(self, topic, **kwargs):
        self.attempts += 1
        raise PartitionNotAvailableError(topic, 0, f"Topic {topic} is not in the cluster metadata")


class SilentProducer(RefusingProducer):
    """Takes every record and never acknowledges it, as a target that stops answering."""

    async def send(self, topic, **kwargs):
        self.attempts += 1
        return asyncio.get_running_loop().create_future()


async def run_until_failed(monkeypatch, producer_class, timeout_s: float, creator=None):
    monkeypatch.setattr("mirrorline.runtime.worker_task.KafkaProducer", producer_class)
    failures: list[BaseException] = []
    states: list[State] = []
    warnings_seen: list[list[str]] = []

    async def on_status(task_id, state, trace):
        states.append(state)

    async def on_failure(task_id, exc):
        failures.append(exc)

    store = MemoryOffsetStore()
    runner = WorkerSourceTask(TASK, OneRecordTask(), {}, producer_kwargs={}, offset_store=store,
                              offset_reader=StoreOffsetReader(store, "bounded"), on_status=on_status,
                              on_failure=on_failure, flush_interval_s=60, delivery_timeout_s=timeout_s,
                              topic_creator=creator)
    await runner.start()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while not failures and loop.time() < deadline:
        warnings_seen.append(list(runner.warnings.values()))
        await asyncio.sleep(0.05)
    await runner.stop(1.0)
    assert failures, "the task never failed"
    return failures[0], states, [w for ws in warnings_seen for w in ws]


async def test_a_record_refused_longer_than_delivery_timeout_fails_the_task(monkeypatch):
    started = asyncio.get_running_loop().time()
    failure, states, warnings = await run_until_failed(monkeypatch, RefusingProducer, 0.5)
    assert 0.5 <= asyncio.get_running_loop().time() - started < 5
    assert states[0] == State.RUNNING
    assert any(w.startswith("writing to orders is retrying") for w in warnings), warnings  # said so meanwhile
    message = str(failure)
    assert "kept failing with retriable errors" in message and "delivery.timeout.ms=500" in message, message
    assert "Topic orders is not in the cluster metadata" in message  # the last error, as it was
    assert "topic orders partition 0" in message and "source offset {'o': 0}" in message


async def test_writes_never_acknowledged_fail_the_task_after_delivery_timeout(monkeypatch):
    failure, _, warnings = await run_until_failed(monkeypatch, SilentProducer, 0.6)
    assert "none was acknowledged" in str(failure) and "delivery.timeout.ms=600" in str(failure)
    assert any(w.startswith("unacknowledged: 1 writes in flight") for w in warnings), warnings


class DeniedCreator:
    """A topic creator whose creation the cluster refuses."""

    def __init__(self):
        self.known: set[str] = set()
        self.closed = False

    async def ensure(self, topic):
        raise TopicCreationError(f"failed to create topic '{topic}': not authorized (TOPIC_AUTHORIZATION_FAILED)")

    async def close(self):
        self.closed = True


async def test_a_topic_creation_refused_fails_the_task_with_its_own_message(monkeypatch):
    creator = DeniedCreator()
    failure, _, _ = await run_until_failed(monkeypatch, SilentProducer, 60, creator=creator)
    assert isinstance(failure, TopicCreationError) and "TOPIC_AUTHORIZATION_FAILED" in str(failure)
    assert creator.closed


class FakeClient:
    """Stands in for an AIOKafkaClient: builds its metadata request as aiokafka's does."""

    async def _metadata_update(self, cluster_metadata, topics):
        return MetadataRequest(list(topics)).build(MetadataRequest_v5).allow_auto_topic_creation


async def test_one_client_may_allow_auto_creation_and_the_others_keep_the_default():
    allowed, other = FakeClient(), FakeClient()
    no_auto_create.allow_auto_create(allowed)
    no_auto_create.allow_auto_create(allowed)  # twice is harmless
    assert await allowed._metadata_update(None, ["t"]) is True
    assert await other._metadata_update(None, ["t"]) is False
    assert MetadataRequest(["t"]).build(MetadataRequest_v5).allow_auto_topic_creation is False
    assert no_auto_create.allows_auto_create(allowed) and not no_auto_create.allows_auto_create(other)


async def test_record_producer_auto_creation_is_opt_in():
    default, allowing = RecordProducer(bootstrap_servers="a:9092"), RecordProducer(
        bootstrap_servers="a:9092", allow_auto_create_topics=True)
    try:
        assert not no_auto_create.allows_auto_create(default.client)
        assert no_auto_create.allows_auto_create(allowing.client)
        message = str(allowing._not_available("t", None, 1.0))
        assert "auto.create.topics.enable" in message
        assert "never has a broker auto-create" in str(default._not_available("t", None, 1.0))
    finally:
        await default.stop()
        await allowing.stop()


def test_create_topics_v4_carries_minus_one_for_the_broker_defaults():
    request = CreateTopicsV4Request([("t", -1, -1, [], [("cleanup.policy", "compact")])], 30_000)
    struct = request.prepare({19: (2, 7)})
    assert isinstance(struct, CreateTopicsRequest_v4) and struct.API_VERSION == 4
    encoded = struct.encode()
    assert b"cleanup.policy" in encoded and b"\xff\xff\xff\xff\xff\xff" in encoded  # int32 -1 then int16 -1
    with pytest.raises(Exception):
        request.prepare({19: (5, 7)})  # only v4 is defined here


class PlainSource(SourceConnector):
    """A source connector that leaves its topics to others (the default)."""

    async def start(self, config):
        self.topic = config.originals.get("topic", "t")

    def task_class(self):
        return OneRecordTask

    async def task_configs(self, max_tasks):
        return [{"topic": self.topic}]

    async def stop(self):
        pass


class OwnTopicsSource(PlainSource):
    """A source connector that creates its topics itself, as MirrorSource does."""

    creates_own_topics = True


@pytest.mark.parametrize(("connector", "settings", "allowed"), [
    (PlainSource, {}, True),  # as Connect: the broker's auto.create.topics.enable decides
    (PlainSource, {"topic.creation.default.partitions": "3", "topic.creation.default.replication.factor": "1"},
     False),  # the worker creates the topic before the first record
    (OwnTopicsSource, {}, False),  # never a broker's default topic for a connector that creates its own
])
async def test_the_worker_decides_whether_a_tasks_producer_may_have_topics_auto_created(monkeypatch, connector,
                                                                                        settings, allowed):
    producer = patch_record_producer(monkeypatch)
    rig = await start_distributed_herder(registry_of(connector), {"restart.on.failure.enable": "false"})
    try:
        await rig.rebalance()
        await rig.herder.put_connector_config("c", {"connector.class": connector.__name__, **settings},
                                              allow_replace=False)
        await rig.rebalance_until_stable()
        (instance,) = await eventually(lambda: producer.instances, what="a task producer")
        assert instance.kwargs["allow_auto_create_topics"] is allowed
    finally:
        await rig.stop()


async def test_a_bad_delivery_timeout_fails_the_task_naming_the_setting(monkeypatch):
    patch_record_producer(monkeypatch)
    rig = await start_distributed_herder(registry_of(PlainSource), {"restart.on.failure.enable": "false"})
    try:
        await rig.rebalance()
        await rig.herder.put_connector_config("c", {"connector.class": "PlainSource",
                                                    "producer.override.delivery.timeout.ms": "soon"},
                                              allow_replace=False)
        await rig.rebalance_until_stable()
        status = await eventually(lambda: rig.status_store.tasks("c").get(0), what="a task status")
        assert status.state == State.FAILED and "producer.override.delivery.timeout.ms" in status.trace
    finally:
        await rig.stop()


def test_the_mirrormaker_connectors_create_their_own_topics():
    """So their tasks' producers never let a broker auto-create a remote topic with its default partition count."""
    from mirrorline.connectors.checkpoint.connector import MirrorCheckpointConnector
    from mirrorline.connectors.file.source import FileStreamSourceConnector
    from mirrorline.connectors.heartbeat.connector import MirrorHeartbeatConnector
    from mirrorline.connectors.source_mirror.connector import MirrorSourceConnector

    assert MirrorSourceConnector.creates_own_topics and MirrorHeartbeatConnector.creates_own_topics
    assert MirrorCheckpointConnector.creates_own_topics
    assert not FileStreamSourceConnector.creates_own_topics  # as in Connect: topic creation or the broker's


class ManyRecordsTask(SourceTask):
    """Returns 10 records of 10 bytes each on every poll."""

    async def start(self, config):
        self.next = 0

    async def poll(self):
        await asyncio.sleep(0.01)
        records = [SourceRecord({"p": 0}, {"o": self.next + i}, "orders", 0, None, bytes(10)) for i in range(10)]
        self.next += 10
        return records

    async def stop(self):
        pass


class HoldingProducer(RefusingProducer):
    """Takes every record and acknowledges one only when the test says so; ``buffer.memory`` 25 bytes."""

    buffer_memory = 25

    def __init__(self, kwargs, ignored=None):
        super().__init__(kwargs, ignored)
        self.held: list[asyncio.Future] = []
        HoldingProducer.last = self

    async def send(self, topic, **kwargs):
        self.attempts += 1
        future = asyncio.get_running_loop().create_future()
        self.held.append(future)
        return future


async def test_sends_wait_while_unacknowledged_bytes_would_pass_buffer_memory(monkeypatch):
    """As Java's producer blocks send() at buffer.memory, the task stops handing records over
    while what is unacknowledged would pass it, and goes on as acknowledgements come."""
    monkeypatch.setattr("mirrorline.runtime.worker_task.KafkaProducer", HoldingProducer)

    async def ignore(*_args):
        pass

    store = MemoryOffsetStore()
    runner = WorkerSourceTask(TASK, ManyRecordsTask(), {}, producer_kwargs={}, offset_store=store,
                              offset_reader=StoreOffsetReader(store, "bounded"), on_status=ignore,
                              on_failure=ignore, flush_interval_s=60, delivery_timeout_s=60)
    await runner.start()
    try:
        producer = HoldingProducer.last
        await asyncio.sleep(0.3)
        assert producer.attempts == 2  # 10 + 10 bytes; a third would make 30 > 25
        assert runner._unacked_bytes == 20
        producer.held[0].set_result(None)
        await asyncio.sleep(0.1)
        assert producer.attempts == 3 and runner._unacked_bytes == 20
        for future in producer.held[1:]:
            future.set_result(None)
        await asyncio.sleep(0.1)
        assert producer.attempts == 5 and runner._unacked_bytes == 20
    finally:
        for future in producer.held:
            if not future.done():
                future.cancel()
        await runner.stop(1.0)
