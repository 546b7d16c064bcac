"""Topic ACL sync between two secured clusters: MM2's rules, PREFIXED bindings, and a principal that may not.

Clusters ``SA`` (source) and ``SB`` (target) are started by this module from the session's
LocalKafka manager, each with SASL/PLAIN users and Kafka's StandardAuthorizer (``admin`` is the
super user). ``mirror`` may describe ACLs on SA and do anything on SB; ``blind`` is the same
without DESCRIBE on SA's cluster; ``app`` is a consumer whose ACLs on SA must follow it to SB.
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from prometheus_client import REGISTRY

from mirrorline.clients.kafka_admin import AclBinding, AclFilter, ResourceType, describe_acls
from mirrorline.clients.kafka_clients import client_kwargs
from support.acls import Acl, grant
from support.kafka import KEEP_OLD_RECORDS, produce
from support.worker import Rest, all_running, running_standalone

pytestmark = pytest.mark.integration

USERS = {"mirror": "mirror-secret", "blind": "blind-secret", "app": "app-secret"}
APP = "User:app"
ERRORS_METRIC = "kafka_connect_mirror_source_connector_acl_sync_errors_total"


@pytest.fixture(scope="module")
def secured(local_kafka):
    """``(source, target)`` specs (flow aliases SA and SB); ``mirror`` and ``blind`` have what a
    mirror needs on each side. The local clusters get names of their own: a session's clusters are
    formatted once, so another module's SA/SB (SCRAM users, TLS) must not be these."""
    names = ["ACLSRC", "ACLDST"]
    source, target = local_kafka.start(names, sasl_users=USERS, authorizer=True)
    asyncio.run(_grant_mirror_principals(source.spec, target.spec))
    yield source.spec, target.spec
    local_kafka.stop(names)


async def _grant_mirror_principals(source, target) -> None:
    everything = ("read", "describe", "describe_configs")
    source_acls = [Acl(f"User:{user}", op, "topic", "*") for user in ("mirror", "blind") for op in everything]
    await grant(source.client_properties(), [*source_acls, Acl("User:mirror", "describe", "cluster")])
    await grant(target.client_properties(), [Acl(f"User:{user}", "all", kind, name)
                                             for user in ("mirror", "blind")
                                             for kind, name in (("cluster", "kafka-cluster"), ("topic", "*"))])


def _sasl(spec, user: str, prefix: str) -> dict[str, str]:
    return {prefix + k: v for k, v in spec.client_properties(user).items()}


def _flow(source, target, user: str, topics: str) -> dict[str, str]:
    return {
        "connector.class": "MirrorSourceConnector",
        "source.cluster.alias": "SA", "target.cluster.alias": "SB",
        **_sasl(source, user, "source.cluster."), **_sasl(target, user, "target.cluster."),
        "offset-syncs.topic.location": "target",
        "replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
        "topics": topics, "tasks.max": "1",
        "refresh.topics.interval.seconds": "2", "sync.topic.configs.interval.seconds": "2",
        "sync.topic.acls.interval.seconds": "2",
    }


def _worker(target, tmp_path) -> dict[str, str]:
    return {"bootstrap.servers": target.bootstrap_servers, **_sasl(target, "admin", "admin."),
            **_sasl(target, "mirror", "producer."), "offset.storage.file.filename": str(tmp_path / "offsets.json")}


async def _create_topics(spec, *names: str) -> None:
    kwargs, _ = client_kwargs(spec.client_properties(), "admin")
    admin = AIOKafkaAdminClient(**kwargs)
    await admin.start()
    try:
        response = await admin.create_topics([NewTopic(n, 1, 1, topic_configs=KEEP_OLD_RECORDS) for n in names])
        assert all(err[1] == 0 for err in response.topic_errors), response.topic_errors
    finally:
        await admin.close()


async def _produce(spec, topic: str, count: int) -> None:
    kwargs, _ = client_kwargs(spec.client_properties(), "producer")
    records = [(0, f"k{i}".encode(), f"v{i}".encode(), [], 1_700_000_000_000 + i) for i in range(count)]
    await produce(kwargs.pop("bootstrap_servers"), topic, records, **kwargs)


async def _topic_acls(spec, principal: str | None = None) -> set[AclBinding]:
    kwargs, _ = client_kwargs(spec.client_properties(), "admin")
    admin = AIOKafkaAdminClient(**kwargs)
    await admin.start()
    try:
        return set(await describe_acls(admin, AclFilter(resource_type=ResourceType.TOPIC, principal=principal)))
    finally:
        await admin.close()


async def _wait_acls(spec, bindings: set[AclBinding], timeout: float = 60) -> set[AclBinding]:
    """The topic ACLs of ``APP`` on ``spec`` once they include ``bindings``."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        found = await _topic_acls(spec, APP)
        if bindings <= found:
            return found
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"{sorted(map(str, bindings - found))} not on {spec.name} after {timeout}s; "
                               f"found {sorted(map(str, found))}")
        await asyncio.sleep(0.5)


async def _consume(spec, user: str, topic: str, count: int, group: str | None = None, timeout: float = 60) -> list:
    """``count`` records of partition 0 of ``topic``, read as ``user``; retried while access is refused."""
    kwargs, _ = client_kwargs(spec.client_properties(user), "consumer")
    deadline = asyncio.get_running_loop().time() + timeout
    last = None
    while asyncio.get_running_loop().time() < deadline:
        consumer = AIOKafkaConsumer(**kwargs, group_id=group, enable_auto_commit=False,
                                    auto_offset_reset="earliest")
        records: list = []
        try:
            await consumer.start()
            consumer.assign([TopicPartition(topic, 0)])
            while len(records) < count and asyncio.get_running_loop().time() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                records += [r for batch in batches.values() for r in batch]
            if len(records) >= count:
                return records
        except Exception as exc:  # not authorized yet, or the remote topic is not there yet
            last = exc
        finally:
            await consumer.stop()
        await asyncio.sleep(0.5)
    raise TimeoutError(f"{user} could not read {count} records of {topic} on {spec.name}: {last!r}")


def _errors(reason: str) -> float:
    return REGISTRY.get_sample_value(ERRORS_METRIC, {"source": "SA", "target": "SB", "reason": reason}) or 0.0


def _b(name: str, operation: str, prefixed: bool = False, host: str = "*", deny: bool = False) -> AclBinding:
    return Acl(APP, operation, "topic", name, prefixed=prefixed, host=host, deny=deny).binding()


async def test_topic_acls_follow_the_topics_to_the_target(secured, unique_name, tmp_path):
    source, target = secured
    orders, payments, other = unique_name("orders"), unique_name("payments"), unique_name("other")
    events = unique_name("events") + "-"
    group = unique_name("app-group")
    await _create_topics(source, orders, payments, events + "1", other)
    await _produce(source, orders, 5)
    await grant(source.client_properties(), [
        Acl(APP, "read", "topic", orders), Acl(APP, "write", "topic", orders),
        Acl(APP, "describe", "topic", orders, host="192.0.2.1", deny=True),
        Acl(APP, "all", "topic", payments),
        Acl(APP, "read", "topic", events, prefixed=True),
        Acl(APP, "read", "topic", other),
        Acl(APP, "read", "group", group),
    ])
    # on the target: what the sync must leave alone, and the group READ (group ACLs are not synced)
    existing = Acl(APP, "describe_configs", "topic", f"SA.{orders}")
    await grant(target.client_properties(), [existing, Acl(APP, "read", "group", group)])

    name = unique_name("mirror")
    flow = _flow(source, target, "mirror", f"{orders},{payments},{events}.*")
    async with running_standalone(_worker(target, tmp_path), [{"name": name, **flow}]) as url, Rest(url) as rest:
        await rest.wait_for(f"/connectors/{name}/status", all_running(1), timeout=60)
        synced = {
            _b(f"SA.{orders}", "read"),
            _b(f"SA.{payments}", "read"),  # ALLOW ALL becomes READ
            _b(f"SA.{orders}", "describe", host="192.0.2.1", deny=True),  # DENY is copied with its host
            _b(f"SA.{events}", "read", prefixed=True),  # PREFIXED, with the remote prefix
        }
        on_target = await _wait_acls(target, synced)
        await asyncio.sleep(1)  # a moment for anything unexpected to show up too
        on_target = await _topic_acls(target, APP)
        assert on_target == synced | {existing.binding()}, sorted(map(str, on_target))
        # spelled out: what the equality above rules out
        assert _b(f"SA.{payments}", "all") not in on_target
        assert _b(f"SA.{orders}", "write") not in on_target, "ALLOW WRITE is never synced"
        assert not [b for b in on_target if other in b.resource_name], "only mirrored topics"
        assert not [b for b in on_target if b.resource_name in (orders, payments, events)], "names are renamed"

        records = await _consume(target, "app", f"SA.{orders}", 5, group=group)
        assert [r.value for r in records] == [f"v{i}".encode() for i in range(5)]

        await asyncio.sleep(5)  # two more rounds: nothing more, nothing less
        assert await _topic_acls(target, APP) == on_target
        status = (await rest.call("GET", f"/connectors/{name}/status"))[1]
        assert "warnings" not in status["connector"], status


async def test_a_principal_that_may_not_describe_acls_is_warned_and_still_mirrors(secured, unique_name, tmp_path):
    source, target = secured
    topic = unique_name("blind")
    await _create_topics(source, topic)
    await _produce(source, topic, 10)
    await grant(source.client_properties(), [Acl(APP, "read", "topic", topic)])
    before = _errors("source-describe-denied")

    name = unique_name("mirror")
    flow = _flow(source, target, "blind", topic)
    async with running_standalone(_worker(target, tmp_path), [{"name": name, **flow}]) as url, Rest(url) as rest:
        status = await rest.wait_for(f"/connectors/{name}/status",
                                     lambda s: s["connector"].get("warnings") and all_running(1)(s), timeout=60)
        (warning,) = status["connector"]["warnings"]
        assert "DESCRIBE on the source cluster" in warning and "sync.topic.acls.enabled" in warning, warning
        assert status["connector"]["state"] == "RUNNING", status

        records = await _consume(target, "admin", f"SA.{topic}", 10)
        assert [r.value for r in records] == [f"v{i}".encode() for i in range(10)]
        assert _errors("source-describe-denied") > before
        await asyncio.sleep(3)  # more rounds, still one warning
        status = (await rest.call("GET", f"/connectors/{name}/status"))[1]
        assert len(status["connector"]["warnings"]) == 1, status
        assert not [b for b in await _topic_acls(target, APP) if topic in b.resource_name]
