"""``KafkaConsumer.close_now``: what the worker calls on a sink task's group consumer after the
task's stop was given up on. Nothing of the consumer may keep running afterwards, also when the
given-up stop had already begun aiokafka's close (a second ``stop()`` then does nothing).

Against a real broker; librdkafka's admin client (independent of aiokafka) says whether the member
left its group.
"""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka.admin import AdminClient

from mirrorline.api.kafka import TopicPartition
from mirrorline.clients.consumer import GroupConsumer
from support.kafka import AssignedPartitions

pytestmark = pytest.mark.integration

COORDINATOR_TASKS = ("_coordination_task", "_heartbeat_task", "_commit_refresh_task", "_reset_committed_task")


async def joined_member(bootstrap: str, topic: str, group: str) -> GroupConsumer:
    member = GroupConsumer.from_settings({"bootstrap.servers": bootstrap, "group.id": group,
                                          "enable.auto.commit": "false"})
    assigned = AssignedPartitions()
    member.subscribe(assigned, topics=[topic])
    await member.start()
    deadline = asyncio.get_running_loop().time() + 60
    while assigned.partitions != {TopicPartition(topic, 0), TopicPartition(topic, 1)}:
        assert asyncio.get_running_loop().time() < deadline, assigned.partitions
        await member.getmany(timeout_ms=200)
    return member


def nothing_left(member: GroupConsumer) -> list[str]:
    """What of the consumer still runs or is connected."""
    left = []
    coordinator = member._consumer._coordinator
    for name in COORDINATOR_TASKS:
        task = getattr(coordinator, name, None)
        if isinstance(task, asyncio.Future) and not task.done():
            left.append(name)
    left += [f"connection to {node}" for node, conn in member._consumer._client._conns.items() if conn.connected()]
    fetcher = member._consumer._fetcher
    left += ["fetch task" for task in ([fetcher._fetch_task] + list(fetcher._pending_tasks)) if not task.done()]
    return left


def group_members(bootstrap: str, group: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    description = admin.describe_consumer_groups([group])[group].result(30)
    return len(description.members)


async def test_close_now_leaves_the_group_and_closes_everything(cluster_a, make_topic, unique_name):
    topic = await make_topic(cluster_a, 2)
    group = unique_name("close-now")
    member = await joined_member(cluster_a.bootstrap_servers, topic, group)
    assert await asyncio.to_thread(group_members, cluster_a.bootstrap_servers, group) == 1

    await member.close_now(5.0)

    assert nothing_left(member) == []
    assert await asyncio.to_thread(group_members, cluster_a.bootstrap_servers, group) == 0  # it left, not timed out


async def test_close_now_after_a_stop_cancelled_half_way_closes_what_that_stop_left(cluster_a, make_topic,
                                                                                   unique_name):
    topic = await make_topic(cluster_a, 2)
    member = await joined_member(cluster_a.bootstrap_servers, topic, unique_name("close-now-cancelled"))
    stopping = asyncio.ensure_future(member.stop())
    while not member._consumer._closed:  # aiokafka has begun its close: a second stop() returns at once
        await asyncio.sleep(0)
    stopping.cancel()  # what bounded() does to a task stop that ran out of time
    with pytest.raises(asyncio.CancelledError):
        await stopping

    loop = asyncio.get_running_loop()
    started = loop.time()
    await member.close_now(5.0)

    assert loop.time() - started < 6
    assert nothing_left(member) == []


async def test_the_runtime_closes_a_real_client_a_task_left_open(cluster_a, caplog):
    """OwnedClients over the runtime's real clients: a started consumer the task did not stop is
    closed after its stop (connections and fetch loop gone), the producer it did stop is left alone."""
    from mirrorline.clients.runtime_clients import KAFKA_CLIENTS
    from mirrorline.runtime.owned_clients import OwnedClients

    owned = OwnedClients(KAFKA_CLIENTS, "Task leaky-0")
    props = {"bootstrap.servers": cluster_a.bootstrap_servers}
    consumer, producer = owned.consumer(props), owned.producer(props)
    await consumer.start()
    await producer.start()
    assert consumer.is_open and producer.is_open
    await producer.stop()  # the task's stop() forgot the consumer
    assert not producer.is_open

    assert await owned.close_left_open(5.0) == ["KafkaConsumer"]

    assert not consumer.is_open
    assert consumer._consumer._closed
    assert not any(conn.connected() for conn in consumer._consumer._client._conns.values())
    assert "Task leaky-0: its stop() left a KafkaConsumer open" in caplog.text
