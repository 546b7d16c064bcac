"""A source topic deleted and re-created is recognised by its topic ID (KIP-516), on real clusters A and B.

The race made deterministic: the task's polls are held (a gate around MirrorSourceTask.poll) while
records it already fetched wait in its consumer, the topic is deleted, created again and filled
with more records than the old position, then the gate opens. The old offsets are valid in the
new topic and no fetch saw an error for the partition, so only the ID shows the change; without
it the new topic's first records are skipped. B's copy is read with librdkafka (confluent-kafka).
The same gate on a topic left alone must change nothing. The client layer's topic IDs are checked
against librdkafka's admin client.
"""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from confluent_kafka import Consumer as RdConsumer
from confluent_kafka import TopicCollection
from confluent_kafka import TopicPartition as RdPartition
from confluent_kafka.admin import AdminClient

from mirrorline.api import TopicPartition
from mirrorline.clients.consumer import KafkaConsumer
from mirrorline.clients.runtime_clients import KAFKA_CLIENTS
from mirrorline.connectors.source_mirror.task import MirrorSourceTask
from support.kafka import produce, read_all
from support.worker import Rest, all_running, metric_value, running_standalone

from test_source_anomalies import delete_topic, metrics_text, recreate_topic, values, warnings_of

pytestmark = pytest.mark.integration

_RESETS = "kafka_connect_mirror_source_connector_source_offset_resets_total"


def read_with_librdkafka(bootstrap: str, topic: str, expect: int, timeout: float = 30.0) -> list[bytes]:
    """Every value of partition 0 of ``topic`` from its start, waiting for ``expect`` of them, then a
    little more for any beyond (a duplicate or stray record would show)."""
    consumer = RdConsumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                           "log_level": 2})
    consumer.assign([RdPartition(topic, 0, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + timeout
    settle = None
    try:
        while time.monotonic() < deadline:
            for message in consumer.consume(500, timeout=0.5):
                if message.error() is None:
                    out.append(message.value())
            if len(out) >= expect:
                settle = settle or time.monotonic() + 1.5
                if time.monotonic() > settle:
                    break
    finally:
        consumer.close()
    return out


class PollGate:
    """Holds every MirrorSourceTask.poll while closed; ``held`` is set once a poll waits at it."""

    def __init__(self, monkeypatch):
        self.open = asyncio.Event()
        self.open.set()
        self.held = asyncio.Event()
        original = MirrorSourceTask.poll
        gate = self

        async def poll(task):
            if not gate.open.is_set():
                gate.held.set()
                await gate.open.wait()
            return await original(task)

        monkeypatch.setattr(MirrorSourceTask, "poll", poll)

    async def close(self) -> None:
        """Close the gate and wait until the task waits at it."""
        self.held.clear()
        self.open.clear()
        await asyncio.wait_for(self.held.wait(), 30)


async def _mirror_one_partition(cluster_a, cluster_b, make_topic, flow_config, tmp_path, unique_name, caplog,
                                monkeypatch, recreate: bool, shared: bool = False) -> None:
    caplog.set_level(logging.INFO)
    gate = PollGate(monkeypatch)
    topic = await make_topic(cluster_a, partitions=1)
    remote = f"A.{topic}"
    await produce(cluster_a.bootstrap_servers, topic, values(1, 0, 50, tag="old"))
    worker = {"bootstrap.servers": cluster_b.bootstrap_servers,
              "offset.storage.file.filename": str(tmp_path / "offsets.json")}
    name = unique_name("mirror")
    config = flow_config(topics=topic, tasks_max=1, refresh_topics_interval_seconds=3600,
                         **({"tasks.share.clients": "true"} if shared else {}))
    async with running_standalone(worker, [{"name": name, **config}]) as url, Rest(url) as rest:
        await rest.wait_for(f"/connectors/{name}/status", all_running(1))
        shares = [key for key in KAFKA_CLIENTS.shared_consumers._shares if str(key[1]).startswith(f"{name}|")]
        assert len(shares) == (1 if shared else 0)  # the task reads through a shared consumer, or its own
        await read_all(cluster_b.bootstrap_servers, remote, expect=50, timeout=60)

        await gate.close()
        # fetched by the task's consumer but not handed out: the partition is not fetched again meanwhile
        await produce(cluster_a.bootstrap_servers, topic, values(1, 50, 60, tag="old"))
        await asyncio.sleep(1.0)
        if recreate:
            await delete_topic(cluster_a.bootstrap_servers, topic)
            await recreate_topic(cluster_a.bootstrap_servers, topic, partitions=1)
            # more records than the old position (60): a fetch at 60 succeeds in the new topic
            await produce(cluster_a.bootstrap_servers, topic, values(1, 0, 200, tag="new"))
        else:
            await asyncio.sleep(0.5)
            await produce(cluster_a.bootstrap_servers, topic, values(1, 60, 100, tag="old"))
        gate.open.set()

        expected = [f"old-0-{i}".encode() for i in range(60)]
        expected += [f"new-0-{i}".encode() for i in range(200)] if recreate else \
            [f"old-0-{i}".encode() for i in range(60, 100)]
        mirrored = await asyncio.to_thread(read_with_librdkafka, cluster_b.bootstrap_servers, remote, len(expected))
        assert mirrored == expected, (f"{len(mirrored)} records; missing {len(set(expected) - set(mirrored))}, "
                                      f"duplicated {len(mirrored) - len(set(mirrored))}")

        text = await metrics_text(rest)
        resets = metric_value(text, _RESETS, source="A", target="B", topic=remote, partition="0",
                              reason="offsets-went-backwards")
        backwards = [w for w in warnings_of(caplog) if "went backwards" in w]
        if recreate:
            assert resets == 1
            assert len(backwards) == 1 and f"source topic {topic} partition 0 was deleted and re-created" in \
                backwards[0] and "Mirroring restarts from offset 0" in backwards[0], backwards
        else:
            assert resets == 0 and backwards == []
        _, status = await rest.call("GET", f"/connectors/{name}/status")
        assert status["tasks"][0]["state"] == "RUNNING", status


@pytest.mark.parametrize("shared", [False, True], ids=["own consumer", "shared consumer"])
async def test_recreated_topic_grown_past_the_old_position_is_mirrored_from_its_start(
        cluster_a, cluster_b, make_topic, flow_config, tmp_path, unique_name, caplog, monkeypatch, shared):
    """The task's consumer holds the old topic's last records when it is re-created; with
    ``tasks.share.clients`` the sign reaches the task through the shared consumer."""
    await _mirror_one_partition(cluster_a, cluster_b, make_topic, flow_config, tmp_path, unique_name, caplog,
                                monkeypatch, recreate=True, shared=shared)


async def test_held_polls_on_an_unchanged_topic_reset_nothing(cluster_a, cluster_b, make_topic, flow_config,
                                                              tmp_path, unique_name, caplog, monkeypatch):
    """The same pause (a topic-change sign: the partition fetched again after a gap) on a topic left alone:
    its ID is unchanged, so nothing is reset and nothing copied twice."""
    await _mirror_one_partition(cluster_a, cluster_b, make_topic, flow_config, tmp_path, unique_name, caplog,
                                monkeypatch, recreate=False)


async def test_client_layer_topic_ids_match_librdkafka_and_change_with_recreation(cluster_a, make_topic):
    topic = await make_topic(cluster_a, partitions=2)
    admin = AdminClient({"bootstrap.servers": cluster_a.bootstrap_servers})

    def described() -> str:
        """The topic's ID as librdkafka gives it (standard base64), in Kafka's spelling (URL-safe base64)."""
        rd = str(admin.describe_topics(TopicCollection([topic]))[topic].result(30).topic_id)
        return rd.replace("+", "-").replace("/", "_").rstrip("=")

    consumer = KafkaConsumer.from_settings({"bootstrap.servers": cluster_a.bootstrap_servers})
    await consumer.start()
    try:
        first = await consumer.topic_ids([topic, "no-such-topic-here"])
        assert first == {topic: await asyncio.to_thread(described)}
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek(TopicPartition(topic, 0), 0)
        await consumer.getmany(timeout_ms=200)
        await delete_topic(cluster_a.bootstrap_servers, topic)
        await consumer.getmany(timeout_ms=1500)  # fetches of the deleted topic: answered with an error
        assert topic in consumer.topic_change_signs()
        assert await consumer.topic_ids([topic]) == {}
        await recreate_topic(cluster_a.bootstrap_servers, topic, partitions=2)
        second = await consumer.topic_ids([topic])
        assert second == {topic: await asyncio.to_thread(described)} and second != first
    finally:
        await consumer.stop()


async def test_topic_ids_of_many_topics_are_asked_in_several_requests(cluster_a, make_topic, monkeypatch):
    import mirrorline.clients.topic_ids as topic_ids_module

    monkeypatch.setattr(topic_ids_module, "TOPICS_PER_REQUEST", 2)
    topics = [await make_topic(cluster_a, partitions=1) for _ in range(5)]
    admin = AdminClient({"bootstrap.servers": cluster_a.bootstrap_servers})
    futures = admin.describe_topics(TopicCollection(topics))
    expected = {name: str(future.result(30).topic_id).replace("+", "-").replace("/", "_").rstrip("=")
                for name, future in futures.items()}
    consumer = KafkaConsumer.from_settings({"bootstrap.servers": cluster_a.bootstrap_servers})
    await consumer.start()
    sent = []
    client = consumer._consumer._client
    original_send = client.send

    async def counting_send(node_id, request, **kwargs):
        if type(request).__name__ == "PartitionCountsRequest":  # topic IDs come with the counts
            sent.append(len(request._topics))
        return await original_send(node_id, request, **kwargs)

    client.send = counting_send
    try:
        found = await consumer.topic_ids(topics + ["no-such-topic-a", "no-such-topic-b"])
    finally:
        await consumer.stop()
    assert found == expected
    assert sorted(sent) == [1, 2, 2, 2], f"requests named {sent} topics"
