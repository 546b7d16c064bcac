"""A MirrorSource task that caught up after a backlog stores its offsets and offset syncs at once (beyond MM2).

Real clusters A and B, a standalone worker at Connect's default ``offset.flush.interval.ms`` (60 s):
MM2 would sync a backlog's last positions at the first flush, a minute after the task started; the
task asks for that flush as soon as it has caught up. ``offset.lag.max`` is set so high that no
sync is due during the copy, so the last positions can only be synced by a flush. The syncs are
read back with librdkafka, not with our client.
"""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from confluent_kafka import Consumer as RdConsumer
from confluent_kafka import TopicPartition as RdPartition

from mirrorline.connectors.mirror_client.formats import OffsetSync
from support.kafka import produce, read_all
from support.worker import Rest, all_running, running_standalone

pytestmark = pytest.mark.integration

#: Connect's default offset flush interval: the flush the task would otherwise wait for
FLUSH_INTERVAL_MS = 60_000
PER_PARTITION = 6_000  # 12,000 records over two partitions: a backlog (catch_up.BACKLOG_RECORDS is 10,000)
#: the task asks once at most 1 % of the most that waited is left (catch_up.CAUGHT_UP_FRACTION): what was
#: acknowledged by then is synced at once, any last records in flight at the next periodic flush
NEAR_THE_END = PER_PARTITION - 1 - 2 * PER_PARTITION // 100


def syncs_with_librdkafka(bootstrap: str, topic: str) -> list[OffsetSync]:
    """Every sync of ``topic`` in A's offset-syncs topic (one partition), read to its end with librdkafka."""
    consumer = RdConsumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                           "log_level": 2})
    try:
        low, high = consumer.get_watermark_offsets(RdPartition("mm2-offset-syncs.B.internal", 0), timeout=10)
        consumer.assign([RdPartition("mm2-offset-syncs.B.internal", 0, low)])
        syncs, position = [], low
        deadline = time.monotonic() + 20
        while position < high and time.monotonic() < deadline:
            for message in consumer.consume(500, timeout=0.5):
                if message.error() is None:
                    position = message.offset() + 1
                    sync = OffsetSync.decode(message.key(), message.value())
                    if sync.topic == topic:
                        syncs.append(sync)
        return syncs
    finally:
        consumer.close()


async def test_the_end_of_a_backlog_is_synced_long_before_the_first_offset_flush(
        cluster_a, cluster_b, make_topic, flow_config, unique_name, caplog):
    topic = await make_topic(cluster_a, partitions=2, prefix="catchup")
    await produce(cluster_a.bootstrap_servers, topic,
                  [(i % 2, None, b"x" * 100, [], None) for i in range(2 * PER_PARTITION)])
    name = unique_name("catchup")
    config = flow_config(topics=topic, tasks_max=1, **{"offset.lag.max": "100000000"})
    worker = {"bootstrap.servers": cluster_b.bootstrap_servers, "offset.flush.interval.ms": str(FLUSH_INTERVAL_MS)}
    caplog.set_level(logging.INFO, logger="mirrorline.connectors.source_mirror.task")
    async with running_standalone(worker, [{"name": name, **config}]) as url, Rest(url) as rest:
        started = time.monotonic()  # the task starts after this: its first periodic flush is later still
        await rest.wait_for(f"/connectors/{name}/status", all_running(1))
        await read_all(cluster_b.bootstrap_servers, f"A.{topic}", expect=2 * PER_PARTITION)
        last: dict[int, int] = {}
        while time.monotonic() - started < FLUSH_INTERVAL_MS / 1000 - 15:
            syncs = await asyncio.to_thread(syncs_with_librdkafka, cluster_a.bootstrap_servers, topic)
            last = {p: max((s.upstream_offset for s in syncs if s.partition == p), default=-1) for p in (0, 1)}
            if min(last.values()) >= NEAR_THE_END:
                break
            await asyncio.sleep(0.5)
        synced_after = time.monotonic() - started
    assert min(last.values()) >= NEAR_THE_END, (
        f"the backlog's end was not synced within {synced_after:.0f} s of the worker starting, well before "
        f"its first offset flush ({FLUSH_INTERVAL_MS / 1000:.0f} s): last synced upstream offsets {last}")
    # per partition, the task's first record and the position it had reached when it asked: nothing between
    # (no sync was due by offset.lag.max), so the second sync can only come from the flush it asked for
    for partition in (0, 1):
        assert [s.upstream_offset for s in syncs if s.partition == partition] == [0, last[partition]], syncs
    messages = [r.getMessage() for r in caplog.records if "caught up after a backlog" in r.getMessage()]
    assert len(messages) == 1 and f"{name}-0" in messages[0], messages
