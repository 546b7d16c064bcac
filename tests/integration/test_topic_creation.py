"""Kafka Connect's topic creation for source connectors (KIP-158), against brokers on Kafka's defaults.

What is checked, each topic read back with librdkafka's AdminClient (an independent client):

- ``topic.creation.default.*``: a topic the task writes to that did not exist is created before
  the first record with exactly those partitions, replication factor and topic configs;
- a listed group with ``include``/``exclude`` gives the topics it takes other settings, a topic it
  excludes falls back to ``default``, and a topic that already exists is left as it is;
- ``topic.creation.enable=false`` on the worker: the settings are ignored and the producer lets the
  broker's ``auto.create.topics.enable`` decide (it creates the topic with the broker's defaults);
- bad settings (``partitions=0``, a negative replication factor, an invalid ``include``) are a 400
  from ``config/validate`` and from ``PUT /connectors/{name}/config``, naming the field.
"""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource

from support.kafka import create_topic, read_all
from support.worker import Rest, all_running, running_standalone

pytestmark = pytest.mark.integration

RECORDS = 20


def _describe(bootstrap: str, topics: list[str]) -> dict[str, tuple[int, int, dict[str, str]]]:
    """``{topic: (partitions, replication factor, configs set on the topic)}`` as librdkafka reads them.

    ``list_topics()`` asks for every topic, so it never makes the broker create one."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    metadata = admin.list_topics(timeout=10).topics
    out = {}
    for topic in topics:
        if topic not in metadata:
            continue
        partitions = metadata[topic].partitions
        replicas = {len(p.replicas) for p in partitions.values()}
        (described,) = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)]).values()
        dynamic = {name: entry.value for name, entry in described.result(timeout=10).items()
                   if getattr(entry.source, "value", entry.source) == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
        out[topic] = (len(partitions), replicas.pop(), dynamic)
    return out


async def described(bootstrap: str, *topics: str) -> dict[str, tuple[int, int, dict[str, str]]]:
    """:func:`_describe`, off the event loop."""
    return await asyncio.to_thread(_describe, bootstrap, list(topics))


def sequence(name: str, topic: str, **extra: str) -> dict[str, str]:
    """A SequenceSource (keyed records, so compacted topics take them) writing RECORDS records to ``topic``."""
    return {"name": name, "connector.class": "SequenceSource", "topic": topic, "records.per.poll": "5",
            "poll.interval.ms": "20", "max.records": str(RECORDS), **extra}


CREATION = {
    "topic.creation.default.partitions": "6",
    "topic.creation.default.replication.factor": "1",
    "topic.creation.default.cleanup.policy": "compact",
}


async def test_missing_topics_are_created_with_their_groups_settings(cluster_a, unique_name):
    bootstrap = cluster_a.bootstrap_servers
    base = unique_name("kip158")
    plain, special, skipped, existing = (f"{base}-plain", f"{base}-special", f"{base}-special-skip",
                                         f"{base}-existing")
    await create_topic(bootstrap, existing, 2)
    groups = {**CREATION, "topic.creation.groups": "special,unused",
              "topic.creation.special.include": rf"{base}-special.*",
              "topic.creation.special.exclude": r".*-skip",
              "topic.creation.special.partitions": "2",
              "topic.creation.special.retention.ms": "3600000",
              "topic.creation.unused.include": "",  # an empty include takes no topic
              "topic.creation.unused.partitions": "9"}
    connectors = [sequence(unique_name(t.rsplit("-", 1)[-1]), t, **groups) for t in (plain, special, skipped, existing)]
    assert not await described(bootstrap, plain, special, skipped)
    async with running_standalone({"bootstrap.servers": bootstrap}, connectors) as url, Rest(url) as rest:
        for connector in connectors:
            await rest.wait_for(f"/connectors/{connector['name']}/status", all_running(1))
        for topic in (plain, special, skipped, existing):
            records = await read_all(bootstrap, topic, expect=RECORDS, timeout=60)
            assert sum(map(len, records.values())) == RECORDS, topic
        for connector in connectors:
            status = await rest.wait_for(f"/connectors/{connector['name']}/status", all_running(1))
            assert not status["tasks"][0].get("warnings"), status
    topics = await described(bootstrap, plain, special, skipped, existing)
    assert topics[plain] == (6, 1, {"cleanup.policy": "compact"})  # default group, exactly its settings
    # the listed group: its own partitions and configs, replication factor taken from default
    assert topics[special] == (2, 1, {"retention.ms": "3600000"})
    assert topics[skipped] == (6, 1, {"cleanup.policy": "compact"})  # excluded from special: default
    assert topics[existing] == (2, 1, {})  # found, left alone


async def test_topic_creation_disabled_on_the_worker_leaves_it_to_the_broker(cluster_a, unique_name):
    """``topic.creation.enable=false``: the connector's topic.creation.* settings are ignored (not even
    validated), and its producer lets the broker's ``auto.create.topics.enable`` (true by default)
    create the topic, with the broker's default partitions (1) and configs."""
    bootstrap = cluster_a.bootstrap_servers
    topic = unique_name("nocreate")
    name = unique_name("seq")
    worker = {"bootstrap.servers": bootstrap, "topic.creation.enable": "false"}
    async with running_standalone(worker) as url, Rest(url) as rest:
        bad = {**sequence(name, topic, **CREATION), "topic.creation.default.partitions": "0"}
        code, result = await rest.call("PUT", "/connector-plugins/SequenceSource/config/validate", bad)
        assert code == 200 and result["error_count"] == 0, result
        code, _ = await rest.call("PUT", f"/connectors/{name}/config", sequence(name, topic, **CREATION))
        assert code == 201
        await rest.wait_for(f"/connectors/{name}/status", all_running(1))
        records = await read_all(bootstrap, topic, expect=RECORDS, timeout=60)
        assert sum(map(len, records.values())) == RECORDS
    assert (await described(bootstrap, topic))[topic] == (1, 1, {})  # the broker's defaults, not 6 / compact


async def test_bad_topic_creation_settings_are_refused_naming_the_field(cluster_a, unique_name):
    topic = unique_name("never")
    name = unique_name("bad")
    cases = {
        "topic.creation.default.partitions": ("0", "Number of partitions must be positive, or -1 to use the "
                                                   "broker's default"),
        "topic.creation.default.replication.factor": ("-2", "Replication factor must be positive"),
        "topic.creation.hot.include": ("orders-(", "Syntax error in regular expression"),
    }
    async with running_standalone({"bootstrap.servers": cluster_a.bootstrap_servers}) as url, Rest(url) as rest:
        for field, (value, message) in cases.items():
            config = {**sequence(name, topic, **CREATION), "topic.creation.groups": "hot", field: value}
            code, result = await rest.call("PUT", "/connector-plugins/SequenceSource/config/validate", config)
            assert code == 200 and result["error_count"] == 1, result
            (errors,) = [c["value"]["errors"] for c in result["configs"] if c["value"]["errors"]]
            (shown,) = [c["value"]["name"] for c in result["configs"] if c["value"]["errors"]]
            assert shown == field and message in errors[0], result
            code, body = await rest.call("PUT", f"/connectors/{name}/config", config)
            assert code == 400 and f"{field}: Invalid value {value} for configuration {field}" in body["message"], body
        # a group listed with no default group settings: both required settings are named
        code, result = await rest.call("PUT", "/connector-plugins/SequenceSource/config/validate",
                                       sequence(name, topic, **{"topic.creation.groups": "hot"}))
        missing = {c["value"]["name"] for c in result["configs"] if c["value"]["errors"]}
        assert missing == {"topic.creation.default.partitions", "topic.creation.default.replication.factor"}
        code, _ = await rest.call("GET", f"/connectors/{name}")
        assert code == 404  # nothing was created
    assert not await described(cluster_a.bootstrap_servers, topic)
