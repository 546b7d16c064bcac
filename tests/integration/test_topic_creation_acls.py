"""Topic creation (KIP-158) refused by the cluster's ACLs: the task is FAILED with a reason naming the permission.

Cluster ``TC`` is started by this module (one node, SASL/PLAIN users, Kafka's StandardAuthorizer;
``admin`` is the super user). ``app`` may describe and write the test's topics, but has no CREATE
on them nor on the cluster. A worker whose admin and producer clients log in as ``app`` runs a
source connector with ``topic.creation.default.*`` settings: the topic must not appear, and the
task must be FAILED with a trace that names the topic and the missing CREATE operation. Once CREATE
is granted and the task restarted, the topic is created with the group's settings and records arrive.
"""

from __future__ import annotations

import asyncio

import pytest

from mirrorline.localkafka.manager import LocalKafka
from mirrorline.testing.fixtures import _free_base_port
from support.acls import Acl, grant
from support.worker import Rest, all_running, running_standalone

pytestmark = pytest.mark.integration

APP_USER, APP_PASSWORD = "app", "app-secret"


@pytest.fixture(scope="module")
def secured(kafka_clusters, tmp_path_factory):
    """A single-node cluster with SASL/PLAIN and the ACL authorizer (its own LocalKafka, stopped after the module)."""
    manager = LocalKafka(tmp_path_factory.mktemp("topic-creation-acls"), _free_base_port(1))
    try:
        (cluster,) = manager.start(["TC"], sasl_users={APP_USER: APP_PASSWORD}, authorizer=True)
        yield cluster.spec
    finally:
        manager.stop()


def _as_app(spec, prefix: str) -> dict[str, str]:
    return {prefix + k: v for k, v in spec.client_properties(APP_USER).items() if k != "bootstrap.servers"}


def _topic_state(spec, topic: str) -> tuple[int, int]:
    """``(partitions, records)`` of ``topic`` as librdkafka (logged in as the super user) reads them; (0, 0)
    when it does not exist, records -1 while a partition of a topic just created has no leader to
    answer yet (NOT_LEADER_FOR_PARTITION: ask again). Listing every topic never makes the broker create one."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient

    user, password = spec.sasl_admin_credentials()
    settings = {"bootstrap.servers": spec.bootstrap_servers, "security.protocol": spec.security_protocol,
                "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": password}
    topics = AdminClient(settings).list_topics(timeout=10).topics
    if topic not in topics:
        return 0, 0
    consumer = Consumer({**settings, "group.id": "topic-state"})
    try:
        ends = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in topics[topic].partitions]
    except KafkaException as exc:
        if exc.args[0].code() not in (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                                      KafkaError.UNKNOWN_TOPIC_OR_PART):
            raise
        return len(topics[topic].partitions), -1
    finally:
        consumer.close()
    return len(ends), sum(ends)


async def topic_state(spec, topic: str) -> tuple[int, int]:
    """:func:`_topic_state` off the event loop."""
    return await asyncio.to_thread(_topic_state, spec, topic)


async def test_creation_denied_by_acls_fails_the_task_naming_the_permission(secured, unique_name):
    prefix = unique_name("acl")
    topic = f"{prefix}-orders"
    app = f"User:{APP_USER}"
    await grant(secured.client_properties(), [Acl(app, op, "topic", prefix, prefixed=True)
                                              for op in ("describe", "write")])
    name = unique_name("seq")
    worker = {"bootstrap.servers": secured.bootstrap_servers, **_as_app(secured, "admin."),
              **_as_app(secured, "producer."), "restart.on.failure.enable": "false"}
    connector = {"name": name, "connector.class": "SequenceSource", "topic": topic, "max.records": "10",
                 "topic.creation.default.partitions": "3", "topic.creation.default.replication.factor": "1"}
    async with running_standalone(worker, [connector]) as url, Rest(url) as rest:
        status = await rest.wait_for(f"/connectors/{name}/status",
                                     lambda s: s["tasks"] and s["tasks"][0]["state"] == "FAILED", timeout=30)
        trace = status["tasks"][0]["trace"]
        assert f"failed to create topic '{topic}'" in trace and "TOPIC_AUTHORIZATION_FAILED" in trace, trace
        assert f"needs the CREATE operation on topic '{topic}'" in trace, trace
        assert status["connector"]["state"] == "RUNNING"
        assert await topic_state(secured, topic) == (0, 0)
        # granted CREATE and restarted, the same task creates the topic with the group's settings
        await grant(secured.client_properties(), [Acl(app, "create", "topic", prefix, prefixed=True)])
        code, _ = await rest.call("POST", f"/connectors/{name}/tasks/0/restart")
        assert code == 204
        await rest.wait_for(f"/connectors/{name}/status", all_running(1), timeout=30)
        deadline = asyncio.get_running_loop().time() + 30
        while (state := await topic_state(secured, topic))[1] < 10 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.3)
    assert state == (3, 10)
