"""Offset syncs decode with MM2's format and map source offsets to the right target records."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete

from mirrorline.connectors.mirror_client.formats import OffsetSync
from support.kafka import produce, read_all
from support.worker import Rest, all_running, running_standalone

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("forwarding", ["true", "false"], ids=["batches", "records"])
async def test_offset_syncs_map_source_offsets_to_target_offsets(cluster_a, cluster_b, make_topic, flow_config,
                                                                unique_name, forwarding):
    """On both copy paths, MM2-format syncs map source offsets to the offsets of the same records on B."""
    topic = await make_topic(cluster_a, partitions=2, prefix="syncs")
    await produce(cluster_a.bootstrap_servers, topic,
                  [(i % 2, f"k{i}".encode(), f"v{i}".encode(), [], None) for i in range(600)])
    # Drop the first 100 records of partition 0, so upstream and downstream offsets differ there.
    admin = AIOKafkaAdminClient(bootstrap_servers=cluster_a.bootstrap_servers)
    await admin.start()
    try:
        await admin.delete_records({TopicPartition(topic, 0): RecordsToDelete(100)}, timeout_ms=10000)
    finally:
        await admin.close()
    name = unique_name("syncs")
    config = flow_config(topics=topic, offset_lag_max=50, **{"batch.forwarding.enabled": forwarding})
    async with running_standalone({"bootstrap.servers": cluster_b.bootstrap_servers, "offset.flush.interval.ms": "500"},
                                  [{"name": name, **config}]) as url, Rest(url) as rest:
        await rest.wait_for(f"/connectors/{name}/status", all_running(2))
        await read_all(cluster_b.bootstrap_servers, f"A.{topic}", expect=500)
        # Syncs are written asynchronously after the target acknowledges; the last ones on the next
        # offset flush. Wait until both partitions' last records are covered.
        deadline = asyncio.get_running_loop().time() + 30
        while True:
            by_partition = await read_all(cluster_a.bootstrap_servers, "mm2-offset-syncs.B.internal")
            syncs_records = [r for records in by_partition.values() for r in records]
            mine = [s for s in (OffsetSync.decode(r.key, r.value) for r in syncs_records) if s.topic == topic]
            last = {p: max((s.upstream_offset for s in mine if s.partition == p), default=-1) for p in (0, 1)}
            if last == {0: 299, 1: 299} or asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.5)
    assert {s.partition for s in mine} == {0, 1}
    # first sync of partition 0 maps upstream 100 to downstream 0
    assert min((s.upstream_offset, s.downstream_offset) for s in mine if s.partition == 0) == (100, 0)
    # the last one is the last record; the syncs due every offset.lag.max=50 records of a backlog copied in a
    # few batches are coalesced per partition while they wait (MM2's rule), so the first and the last at least
    assert max(s.upstream_offset for s in mine if s.partition == 1) == 299
    assert len([s for s in mine if s.partition == 1]) >= 2

    source = {p: {r.offset: (r.key, r.value) for r in rs}
              for p, rs in (await read_all(cluster_a.bootstrap_servers, topic)).items()}
    target = {p: {r.offset: (r.key, r.value) for r in rs}
              for p, rs in (await read_all(cluster_b.bootstrap_servers, f"A.{topic}")).items()}
    for sync in mine:
        assert source[sync.partition][sync.upstream_offset] == target[sync.partition][sync.downstream_offset], sync
    # the topic is compacted with one partition, as MM2 creates it
    assert sorted({r.partition for r in syncs_records}) == [0]
