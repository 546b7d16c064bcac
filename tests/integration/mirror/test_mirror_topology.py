"""MirrorSource keeps up with change on the source, and never loops in active-active pairs."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions

from mirrorline.clients.kafka_admin import incremental_alter_configs
from support.kafka import (
    create_topic,
    partitions_of,
    produce,
    read_all,
    record_tuples,
    topic_config,
    topics_of,
)
from support.worker import Rest, all_running, running_standalone

pytestmark = pytest.mark.integration


async def eventually(check, timeout: float = 30.0, interval: float = 0.5):
    """Await ``check()`` until it returns a truthy value; returns it or raises AssertionError."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        result = await check()
        if result:
            return result
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(interval)


def records(partitions: int, count: int, start: int = 0):
    # recent timestamps: these topics keep a finite retention.ms, which is what is mirrored here
    base = int(time.time() * 1000) - 60_000
    return [(i % partitions, f"k{i}".encode(), f"v{i}".encode(), [("i", str(i).encode())], base + i)
            for i in range(start, start + count)]


async def test_new_topics_partitions_and_configs_follow_the_source(cluster_a, cluster_b, flow_config,
                                                                   unique_name):
    prefix = unique_name("dyn")
    first = f"{prefix}-first"
    await create_topic(cluster_a.bootstrap_servers, first, 2, {"retention.ms": "86400000"})
    await produce(cluster_a.bootstrap_servers, first, records(2, 20))
    long_name = f"{prefix}-" + "x" * (248 - len(prefix) - 1)  # legal on A; "A." + it is 250 > 249
    assert len(long_name) == 248
    await create_topic(cluster_a.bootstrap_servers, long_name, 1)
    config = flow_config(topics=f"{prefix}-.*", topics_exclude=f"{prefix}-skip.*")
    name = unique_name("mirror")
    async with running_standalone({"bootstrap.servers": cluster_b.bootstrap_servers},
                                  [{"name": name, **config}]) as url, Rest(url) as rest:
        await rest.wait_for(f"/connectors/{name}/status", all_running(2))
        mirrored = await read_all(cluster_b.bootstrap_servers, f"A.{first}", expect=20)
        assert sum(len(r) for r in mirrored.values()) == 20
        assert await topic_config(cluster_b.bootstrap_servers, f"A.{first}", "retention.ms") == "86400000"

        # a topic created while mirroring runs appears within the refresh interval, from its first record
        second = f"{prefix}-second"
        skipped = f"{prefix}-skip-me"
        await create_topic(cluster_a.bootstrap_servers, second, 3)
        await create_topic(cluster_a.bootstrap_servers, skipped, 1)
        sent = records(3, 30)
        await produce(cluster_a.bootstrap_servers, second, sent)
        await produce(cluster_a.bootstrap_servers, skipped, records(1, 5))
        got = await read_all(cluster_b.bootstrap_servers, f"A.{second}", expect=30, timeout=30)
        for partition in range(3):
            assert record_tuples(got[partition]) == [(k, v, h, ts) for p, k, v, h, ts in sent if p == partition]
        assert await partitions_of(cluster_b.bootstrap_servers, f"A.{second}") == [0, 1, 2]

        # partition growth and a changed retention.ms reach B
        admin = AIOKafkaAdminClient(bootstrap_servers=cluster_a.bootstrap_servers)
        await admin.start()
        try:
            await admin.create_partitions({first: NewPartitions(total_count=4)})
            await incremental_alter_configs(admin, first, {"retention.ms": "3600000"})
        finally:
            await admin.close()
        await eventually(lambda: _has_partitions(cluster_b.bootstrap_servers, f"A.{first}", 4))
        await eventually(lambda: _config_is(cluster_b.bootstrap_servers, f"A.{first}", "retention.ms", "3600000"))
        tail = [(3, b"k-new", b"v-new", [], int(time.time() * 1000))]
        await produce(cluster_a.bootstrap_servers, first, tail)
        grown = await read_all(cluster_b.bootstrap_servers, f"A.{first}", expect=21, timeout=30)
        assert record_tuples(grown[3]) == [(k, v, h, ts) for _, k, v, h, ts in tail]

        # the excluded topic and the over-long remote name never appear on B; the skip is counted
        on_b = await topics_of(cluster_b.bootstrap_servers)
        assert f"A.{skipped}" not in on_b
        assert not any(t.endswith(long_name) for t in on_b)
        status, state = await rest.call("GET", f"/connectors/{name}/status")
        assert state["connector"]["state"] == "RUNNING"
        assert [w for w in state["connector"]["warnings"] if long_name in w and "249" in w]
        status, metrics_text = await rest.call("GET", "/metrics")
        assert 'kafka_connect_mirror_source_connector_skipped_topics_total{reason="remote-name-too-long",' \
               'source="A",target="B"} 1.0' in metrics_text


async def _has_partitions(bootstrap, topic, count):
    return len(await partitions_of(bootstrap, topic)) == count


async def _config_is(bootstrap, topic, name, value):
    return await topic_config(bootstrap, topic, name) == value


async def test_active_active_flows_never_loop(cluster_a, cluster_b, flow_config, unique_name, make_topic):
    on_a = await make_topic(cluster_a, prefix="aa")
    on_b = await make_topic(cluster_b, prefix="bb")
    await produce(cluster_a.bootstrap_servers, on_a, records(1, 10))
    await produce(cluster_b.bootstrap_servers, on_b, records(1, 10))
    pattern = f"(aa|bb|A\\.aa|B\\.bb|A\\.B\\.bb|B\\.A\\.aa)-.*"
    a_to_b = {"name": unique_name("ab"), **flow_config(topics=pattern)}
    b_to_a = {"name": unique_name("ba"), **flow_config(source=cluster_b, target=cluster_a, source_alias="B",
                                                       target_alias="A", topics=pattern)}
    async with running_standalone({"bootstrap.servers": cluster_b.bootstrap_servers}, [a_to_b]), \
            running_standalone({"bootstrap.servers": cluster_a.bootstrap_servers}, [b_to_a]):
        await read_all(cluster_b.bootstrap_servers, f"A.{on_a}", expect=10)
        await read_all(cluster_a.bootstrap_servers, f"B.{on_b}", expect=10)
        await asyncio.sleep(5)  # two refresh intervals: time enough for a loop to show
        topics_a, topics_b = await topics_of(cluster_a.bootstrap_servers), await topics_of(cluster_b.bootstrap_servers)
    assert f"B.{on_b}" in topics_a and f"A.{on_a}" in topics_b
    assert f"A.B.{on_b}" not in topics_b and f"B.A.{on_a}" not in topics_a
    assert not any(t.startswith(("A.B.", "B.A.")) for t in topics_a | topics_b)
