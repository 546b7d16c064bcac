"""MirrorSourceConnector reading from a SASL_PLAINTEXT (PLAIN) cluster, configured as a Kafka Connect user would.

Cluster ``S`` is started by this module with SASL users; the session's cluster B stays plain.
Client settings reach the connector through ``source.cluster.*`` exactly as in MirrorMaker 2.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from mirrorline.clients.kafka_clients import client_kwargs
from mirrorline.localkafka.cluster import SINGLE_BROKER_MM2_PROPERTIES
from mirrorline.localkafka.manager import LocalKafka
from support.mm2 import start_mm2, stop_mm2
from mirrorline.testing.fixtures import _free_base_port
from support.kafka import KEEP_OLD_RECORDS, partitions_of, produce, read_all, record_tuples
from support.worker import Rest, all_running, running_standalone

pytestmark = pytest.mark.integration

ALICE_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="alice" password="alice-secret";')
WRONG_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="alice" password="not-the-password";')


@pytest.fixture(scope="module")
def sasl_cluster(kafka_clusters, tmp_path_factory):
    """A single-node cluster ``S`` whose client listener is SASL_PLAINTEXT with mechanism PLAIN."""
    manager = LocalKafka(tmp_path_factory.mktemp("sasl-kafka"), _free_base_port(1))
    try:
        (cluster,) = manager.start(["S"], sasl_users={"alice": "alice-secret"})
        yield cluster.spec
    finally:
        manager.stop()


def sasl_props(spec, jaas: str = ALICE_JAAS) -> dict[str, str]:
    """Java-style client settings for ``spec`` as alice (or whoever ``jaas`` names)."""
    return {"bootstrap.servers": spec.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas}


def _kwargs(props: dict[str, str], role: str) -> dict:
    kwargs, ignored = client_kwargs(props, role)
    assert ignored == [], ignored
    return kwargs


async def create_topic_as(props: dict[str, str], name: str, partitions: int, config: dict | None = None) -> None:
    admin = AIOKafkaAdminClient(**_kwargs(props, "admin"))
    await admin.start()
    try:
        response = await admin.create_topics([NewTopic(name, partitions, 1, topic_configs=config or {})])
        assert all(err[1] == 0 for err in response.topic_errors), response.topic_errors
    finally:
        await admin.close()


async def produce_as(props: dict[str, str], topic: str, records) -> None:
    kwargs = _kwargs(props, "producer")
    await produce(kwargs.pop("bootstrap_servers"), topic, records, **kwargs)


async def _admin_answers(kwargs: dict) -> bool:
    """True when an admin client with ``kwargs`` can list the cluster's brokers within a few seconds."""
    admin = AIOKafkaAdminClient(request_timeout_ms=2000, **kwargs)
    try:
        await asyncio.wait_for(admin.start(), 10)
        cluster = await asyncio.wait_for(admin.describe_cluster(), 10)
        return bool(cluster.get("brokers"))
    except Exception:
        return False
    finally:
        await admin.close()


async def _producer_delivers(kwargs: dict, topic: str) -> bool:
    producer = AIOKafkaProducer(request_timeout_ms=2000, **kwargs)
    try:
        await asyncio.wait_for(producer.start(), 10)
        await asyncio.wait_for(producer.send_and_wait(topic, b"v", key=b"k"), 10)
        return True
    except Exception:
        return False
    finally:
        await asyncio.wait_for(producer.stop(), 10)


def keyed_records(partitions: int, count: int):
    base = 1_700_000_000_000
    return [(i % partitions, None if i % 50 == 0 else f"key-{i % 37}".encode(), f"value-{i}".encode(),
             [("seq", str(i).encode()), ("h", bytes([i % 256]))] + ([("h", b"dup")] if i % 7 == 0 else []),
             base + i)
            for i in range(count)]


async def test_sasl_cluster_refuses_unauthenticated_and_wrong_password_clients(sasl_cluster, unique_name):
    topic = unique_name("sasl")
    alice = sasl_props(sasl_cluster)
    await create_topic_as(alice, topic, 1)
    plain = {"bootstrap_servers": sasl_cluster.bootstrap_servers}
    assert not await _admin_answers(plain)
    assert not await _producer_delivers(plain, topic)
    wrong = _kwargs(sasl_props(sasl_cluster, WRONG_JAAS), "admin")
    assert not await _admin_answers(wrong)
    assert await _admin_answers(_kwargs(alice, "admin"))
    assert await _producer_delivers(_kwargs(alice, "producer"), topic)


def _mirror_config(source, target, topic: str, jaas: str) -> dict[str, str]:
    return {
        "connector.class": "MirrorSourceConnector",
        "source.cluster.alias": "S", "target.cluster.alias": "B",
        "source.cluster.bootstrap.servers": source.bootstrap_servers,
        "source.cluster.security.protocol": "SASL_PLAINTEXT",
        "source.cluster.sasl.mechanism": "PLAIN",
        "source.cluster.sasl.jaas.config": jaas,
        "target.cluster.bootstrap.servers": target.bootstrap_servers,
        "replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
        "topics": topic, "tasks.max": "1",
        "refresh.topics.interval.seconds": "2", "sync.topic.configs.interval.seconds": "2",
    }


async def test_mirror_from_sasl_source_to_plain_target(sasl_cluster, cluster_b, unique_name, tmp_path):
    topic = unique_name("secured")
    alice = sasl_props(sasl_cluster)
    await create_topic_as(alice, topic, 3, KEEP_OLD_RECORDS)  # keyed_records are timestamped 2023
    sent = keyed_records(3, 600)
    await produce_as(alice, topic, sent)
    worker = {"bootstrap.servers": cluster_b.bootstrap_servers,
              "offset.storage.file.filename": str(tmp_path / "offsets.json")}
    name = unique_name("mirror")
    config = _mirror_config(sasl_cluster, cluster_b, topic, ALICE_JAAS)
    async with running_standalone(worker, [{"name": name, **config}]) as url, Rest(url) as rest:
        await rest.wait_for(f"/connectors/{name}/status", all_running(1), timeout=60)
        mirrored = await read_all(cluster_b.bootstrap_servers, f"S.{topic}", expect=len(sent), timeout=90)
        assert sorted(mirrored) == [0, 1, 2]
        for partition in range(3):
            expected = [(k, v, h, ts) for p, k, v, h, ts in sent if p == partition]
            assert record_tuples(mirrored[partition]) == expected, f"S.{topic} partition {partition}"


async def test_wrong_source_password_fails_visibly(sasl_cluster, cluster_b, unique_name, tmp_path):
    topic = unique_name("badpw")
    await create_topic_as(sasl_props(sasl_cluster), topic, 1, KEEP_OLD_RECORDS)  # keyed_records are timestamped 2023
    await produce_as(sasl_props(sasl_cluster), topic, keyed_records(1, 10))
    worker = {"bootstrap.servers": cluster_b.bootstrap_servers,
              "offset.storage.file.filename": str(tmp_path / "offsets.json")}
    name = unique_name("mirror")
    config = _mirror_config(sasl_cluster, cluster_b, topic, WRONG_JAAS)

    def failed(status: dict) -> bool:
        states = [status["connector"]["state"]] + [t["state"] for t in status["tasks"]]
        return "FAILED" in states

    async with running_standalone(worker, [{"name": name, **config}]) as url, Rest(url) as rest:
        status = await rest.wait_for(f"/connectors/{name}/status", failed, timeout=60)
        traces = [status["connector"].get("trace", "")] + [t.get("trace", "") for t in status["tasks"]]
        assert any("cannot connect to the source cluster" in t and "security.protocol=SASL_PLAINTEXT" in t
                   and "source.cluster.sasl" in t for t in traces), status
        assert all(t["state"] != "RUNNING" for t in status["tasks"]), status
    # nothing was copied
    assert await partitions_of(cluster_b.bootstrap_servers, f"S.{topic}") == []


async def test_sasl_password_from_a_file_provider_reaches_the_cluster_and_is_never_stored(
        sasl_cluster, cluster_b, unique_name, tmp_path):
    """mm2.properties says ``S.sasl.jaas.config = ${file:...:jaas}``: the flow logs in with the file's
    secret, while the config topic keeps the reference (connector and task configs) and neither it
    nor the log ever holds the password."""
    topic, state = unique_name("provided"), unique_name("prov")
    alice = sasl_props(sasl_cluster)
    await create_topic_as(alice, topic, 2, KEEP_OLD_RECORDS)  # keyed_records are timestamped 2023
    sent = keyed_records(2, 50)
    await produce_as(alice, topic, sent)
    secrets = tmp_path / "kafka-secrets.properties"
    secrets.write_text(f"jaas = {ALICE_JAAS}\n")
    reference = f"${{file:{secrets}:jaas}}"
    properties = tmp_path / "mm2.properties"
    properties.write_text(f"""clusters = S, B
S.bootstrap.servers = {sasl_cluster.bootstrap_servers}
S.security.protocol = SASL_PLAINTEXT
S.sasl.mechanism = PLAIN
S.sasl.jaas.config = {reference}
B.bootstrap.servers = {cluster_b.bootstrap_servers}
config.providers = file
config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider
S->B.enabled = true
S->B.topics = {topic}
S->B.emit.heartbeats.enabled = false
B->S.emit.heartbeats.enabled = false
{SINGLE_BROKER_MM2_PROPERTIES}offset.storage.partitions = 5
B.group.id = {state}-mm2
config.storage.topic = mm2-configs.{state}.internal
offset.storage.topic = mm2-offsets.{state}.internal
status.storage.topic = mm2-status.{state}.internal
""")
    log_path = tmp_path / "mm2.log"
    mm2 = start_mm2(properties, log_path)
    try:
        mirrored = await read_all(cluster_b.bootstrap_servers, f"S.{topic}", expect=len(sent), timeout=90)
        assert sum(len(r) for r in mirrored.values()) == len(sent), log_path.read_text()[-3000:]
    finally:
        assert stop_mm2(mm2) == 0
    stored = [r.value.decode() for r in (await read_all(cluster_b.bootstrap_servers,
                                                        f"mm2-configs.{state}.internal")).get(0, []) if r.value]
    tasks = [v for v in stored if "task.assigned.partitions" in v]
    assert tasks and all(json.dumps(reference)[1:-1] in v for v in tasks), stored
    assert not any("alice-secret" in v for v in stored)
    assert "alice-secret" not in log_path.read_text()
