"""A source topic the mirror's principal may see but not read fails the task visibly, then recovers.

Cluster ``S`` is started by this module with SASL/PLAIN users and Kafka's ACL authorizer
(StandardAuthorizer): ``admin`` is the super user, ``mirror`` may do only what the test grants.
The session's cluster B (plain, no authorizer) is the target. ``mirror`` may describe the topic,
so the connector finds it and assigns its partitions, but without READ every fetch is refused:
the task must go FAILED with a message naming the topic, the partitions, the offsets and the
cause, copy nothing, and mirror everything once READ is granted and the task is restarted.
"""

from __future__ import annotations

import asyncio
import re

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from mirrorline.clients.kafka_clients import client_kwargs
from mirrorline.localkafka.manager import LocalKafka
from support.acls import Acl, grant, revoke, topic_acls
from mirrorline.testing.fixtures import _free_base_port
from support.kafka import KEEP_OLD_RECORDS, partitions_of, produce, read_all, record_tuples
from support.worker import Rest, all_running, running_standalone

pytestmark = pytest.mark.integration

MIRROR_USER = "mirror"
MIRROR_PASSWORD = "mirror-secret"
MIRROR = f"User:{MIRROR_USER}"


@pytest.fixture(scope="module")
def acl_cluster(kafka_clusters, tmp_path_factory):
    """A single-node cluster ``S``: SASL_PLAINTEXT/PLAIN listener and Kafka's ACL authorizer."""
    manager = LocalKafka(tmp_path_factory.mktemp("acl-kafka"), _free_base_port(1))
    try:
        (cluster,) = manager.start(["S"], sasl_users={MIRROR_USER: MIRROR_PASSWORD}, authorizer=True)
        yield cluster.spec
    finally:
        manager.stop()


async def _create_topic(spec, topic: str, partitions: int) -> None:
    kwargs, _ = client_kwargs(spec.client_properties(), "admin")
    admin = AIOKafkaAdminClient(**kwargs)
    await admin.start()
    try:
        response = await admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=KEEP_OLD_RECORDS)])
        assert all(err[1] == 0 for err in response.topic_errors), response.topic_errors
    finally:
        await admin.close()


async def _produce(spec, topic: str, records) -> None:
    kwargs, _ = client_kwargs(spec.client_properties(), "producer")
    await produce(kwargs.pop("bootstrap_servers"), topic, records, **kwargs)


async def _record_count(bootstrap: str, topic: str) -> int:
    """Records in ``topic`` (sum of its end offsets; 0 when it does not exist)."""
    partitions = await partitions_of(bootstrap, topic)
    if not partitions:
        return 0
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        ends = await consumer.end_offsets([TopicPartition(topic, p) for p in partitions])
        return sum(ends.values())
    finally:
        await consumer.stop()


def _records(partitions: int, count: int, start: int = 0):
    base = 1_700_000_000_000
    return [(i % partitions, f"key-{i}".encode(), f"value-{i}".encode(), [("seq", str(i).encode())], base + i)
            for i in range(start, start + count)]


def _mirror_config(source, target, topic: str) -> dict[str, str]:
    return {
        "connector.class": "MirrorSourceConnector",
        "source.cluster.alias": "S", "target.cluster.alias": "B",
        "source.cluster.bootstrap.servers": source.bootstrap_servers,
        "source.cluster.security.protocol": "SASL_PLAINTEXT",
        "source.cluster.sasl.mechanism": "PLAIN",
        "source.cluster.sasl.jaas.config": source.client_properties(MIRROR_USER)["sasl.jaas.config"],
        "target.cluster.bootstrap.servers": target.bootstrap_servers,
        # offset syncs on the target, so that the mirror needs no write access to the source cluster
        "offset-syncs.topic.location": "target",
        "replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
        "topics": topic, "tasks.max": "1",
        "refresh.topics.interval.seconds": "2", "sync.topic.configs.interval.seconds": "2",
    }


def _describe_only(topic: str) -> list[Acl]:
    """What the mirror needs to find the topic and its partitions, but not to read its records."""
    return [*topic_acls(MIRROR, topic, "describe", "describe_configs"), Acl(MIRROR, "describe", "cluster")]


def _task_failed(status: dict) -> bool:
    return bool(status["tasks"]) and status["tasks"][0]["state"] == "FAILED"


def _assert_names_position(trace: str, topic: str, offsets: dict[int, int]) -> None:
    assert topic in trace, trace
    for partition, offset in offsets.items():
        assert re.search(rf"partition {partition} at offset {offset}\b", trace), (partition, offset, trace)
    assert "authoriz" in trace.lower(), trace
    assert "TopicAuthorizationFailedError" in trace, trace  # the consumer's error, chained
    assert f"Grant READ on topic {topic} to {MIRROR}" in trace, trace


async def test_unreadable_topic_fails_task_with_position_then_recovers(acl_cluster, cluster_b, unique_name,
                                                                        tmp_path):
    topic = unique_name("noread")
    remote = f"S.{topic}"
    admin = acl_cluster.client_properties()
    await _create_topic(acl_cluster, topic, 2)
    sent = _records(2, 40)
    await _produce(acl_cluster, topic, sent)
    await grant(admin, _describe_only(topic))

    worker = {"bootstrap.servers": cluster_b.bootstrap_servers,
              "offset.storage.file.filename": str(tmp_path / "offsets.json"),
              "restart.on.failure.enable": "false"}
    name = unique_name("mirror")
    async with running_standalone(worker, [{"name": name, **_mirror_config(acl_cluster, cluster_b, topic)}]) as url, \
            Rest(url) as rest:
        status = await rest.wait_for(f"/connectors/{name}/status", _task_failed, timeout=90)
        assert status["connector"]["state"] == "RUNNING", status
        _assert_names_position(status["tasks"][0]["trace"], topic, {0: 0, 1: 0})
        assert await _record_count(cluster_b.bootstrap_servers, remote) == 0

        await grant(admin, topic_acls(MIRROR, topic, "read"))
        code, _ = await rest.call("POST", f"/connectors/{name}/restart?includeTasks=true&onlyFailed=true")
        assert code in (200, 202), code
        await rest.wait_for(f"/connectors/{name}/status", all_running(1), timeout=60)
        mirrored = await read_all(cluster_b.bootstrap_servers, remote, expect=len(sent), timeout=90)
        for partition in (0, 1):
            expected = [(k, v, h, ts) for p, k, v, h, ts in sent if p == partition]
            assert record_tuples(mirrored[partition]) == expected, f"{remote} partition {partition}"


async def test_read_revoked_mid_stream_names_the_offset_reached(acl_cluster, cluster_b, unique_name, tmp_path):
    topic = unique_name("revoked")
    remote = f"S.{topic}"
    admin = acl_cluster.client_properties()
    await _create_topic(acl_cluster, topic, 2)
    first = _records(2, 20)
    await _produce(acl_cluster, topic, first)
    read = topic_acls(MIRROR, topic, "read")
    await grant(admin, [*_describe_only(topic), *read])

    worker = {"bootstrap.servers": cluster_b.bootstrap_servers,
              "offset.storage.file.filename": str(tmp_path / "offsets.json"),
              "restart.on.failure.enable": "false"}
    name = unique_name("mirror")
    async with running_standalone(worker, [{"name": name, **_mirror_config(acl_cluster, cluster_b, topic)}]) as url, \
            Rest(url) as rest:
        await rest.wait_for(f"/connectors/{name}/status", all_running(1), timeout=60)
        await read_all(cluster_b.bootstrap_servers, remote, expect=len(first), timeout=90)

        await revoke(admin, read)
        status = await rest.wait_for(f"/connectors/{name}/status", _task_failed, timeout=90)
        # each partition got 10 records before READ was revoked: the task stood at offset 10 in both.
        # (Produce more only now: a fetch already waiting at the broker when READ is revoked was
        # authorized on arrival and would still return records produced meanwhile.)
        _assert_names_position(status["tasks"][0]["trace"], topic, {0: 10, 1: 10})
        await _produce(acl_cluster, topic, _records(2, 20, start=len(first)))
        await asyncio.sleep(3)
        assert await _record_count(cluster_b.bootstrap_servers, remote) == len(first)
