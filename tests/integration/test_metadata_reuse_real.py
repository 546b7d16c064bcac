"""An unchanged metadata refresh rebuilds nothing, and a changed cluster is still seen (real broker).

mirrorline.clients.metadata_reuse skips rebuilding a client's view of the cluster when a refresh's
answer is byte-for-byte the last one applied. Against a real broker: two refreshes of an unchanged
topic must give equal answers (else the skip would never happen) and keep the view; after
librdkafka (an independent client) adds partitions, the next refresh must show them.
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaClient
from confluent_kafka.admin import AdminClient, NewPartitions

from mirrorline.clients import metadata_reuse, process_patches

pytestmark = pytest.mark.integration


def add_partitions(bootstrap: str, topic: str, total: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the futures are done
    futures = admin.create_partitions([NewPartitions(topic, total)])
    for future in futures.values():
        future.result(30)


async def test_unchanged_refresh_keeps_the_view_and_new_partitions_are_seen(cluster_a, make_topic):
    process_patches.install()
    topic = await make_topic(cluster_a, 3)
    client = AIOKafkaClient(bootstrap_servers=cluster_a.bootstrap_servers)
    await client.bootstrap()
    try:
        client.add_topic(topic)
        assert await client.force_metadata_update()
        assert client.cluster.partitions_for_topic(topic) == {0, 1, 2}
        view = client.cluster._partitions
        refreshed_at = client.cluster._last_successful_refresh_ms
        await asyncio.sleep(0.01)
        assert await client.force_metadata_update()
        # the broker's answer did not change: the view is the same object, only the refresh time moved
        assert client.cluster._partitions is view
        assert client.cluster._last_successful_refresh_ms > refreshed_at

        await asyncio.to_thread(add_partitions, cluster_a.bootstrap_servers, topic, 5)
        deadline = asyncio.get_running_loop().time() + 30
        while client.cluster.partitions_for_topic(topic) != {0, 1, 2, 3, 4}:
            assert asyncio.get_running_loop().time() < deadline, client.cluster.partitions_for_topic(topic)
            await asyncio.sleep(0.2)
            assert await client.force_metadata_update()
        assert client.cluster._partitions is not view
        assert metadata_reuse.is_installed()
    finally:
        await client.close()
