"""Retention deleting source records the mirror has not copied yet.

The mirror is stopped, records are produced, then deleted on the source (DeleteRecords, what
retention does) up to chosen offsets, and the mirror is started again. The records lost are
exactly those deleted but never mirrored; the mirror counts them in
``kafka_connect_mirror_source_connector_records_lost_to_retention_total`` and carries on.
"""

from __future__ import annotations

import asyncio
import re

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from fault_scenario import GRACEFUL_DUP_BOUND
from support.faults import read_topic, tally

pytestmark = pytest.mark.integration

PARTITIONS = 3
TASKS = 2
RATE = 1000
LOST_METRIC = "kafka_connect_mirror_source_connector_records_lost_to_retention_total"


def lost_metric(text: str, remote_topic: str) -> float:
    """Sum of the lost-to-retention counter over the partitions of ``remote_topic``."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(LOST_METRIC + "{") and re.search(rf'topic="{re.escape(remote_topic)}"', line):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def test_retention_deletes_unmirrored_records(scenario, shared_clusters, fault_report):
    s = scenario("9 retention deletes unmirrored records", shared_clusters)
    topic = s.topic()
    await s.create_topic(topic, PARTITIONS)
    await s.start_mirror(TASKS)
    load = s.load(topic, PARTITIONS, RATE)
    await asyncio.sleep(1.5)
    await asyncio.to_thread(load.settle)
    assert (await s.converge(topic, load.acknowledged(), timeout=60, unconfirmed=load.unconfirmed())).lost == 0

    # stop the mirror; what is on B now is all it ever copied of the first phase
    [worker] = s.workers.workers
    assert s.workers.stop(worker) == 0, s.workers.logs()
    offsets = load.acknowledged_offsets()
    on_target = await asyncio.to_thread(read_topic, s.target.bootstrap_servers, s.remote(topic))
    mirrored_end = {}
    for partition, records in offsets.items():
        copied = set(on_target.get(partition, ()))
        mirrored_end[partition] = 1 + max((o for o, v in records if v in copied and o is not None), default=-1)

    load.resume()
    await asyncio.sleep(1.5)
    await asyncio.to_thread(load.settle)
    offsets = load.acknowledged_offsets()
    ends = {p: max(o for o, _ in records if o is not None) + 1 for p, records in offsets.items()}
    # partition 0: only records already mirrored are deleted; 1: half of the unmirrored ones; 2: all of them
    delete_to = {0: mirrored_end[0] - 50,
                 1: mirrored_end[1] + (ends[1] - mirrored_end[1]) // 2,
                 2: ends[2]}
    admin = AdminClient({"bootstrap.servers": s.source.bootstrap_servers})
    futures = admin.delete_records([TopicPartition(topic, p, o) for p, o in delete_to.items()])
    for future in futures.values():
        await asyncio.to_thread(future.result, 30)
    lost_ids = {v for p, records in offsets.items() for o, v in records if mirrored_end[p] <= o < delete_to[p]}
    print(f"mirrored up to {mirrored_end}, produced up to {ends}, deleted up to {delete_to}: "
          f"{len(lost_ids)} records deleted before they were mirrored")

    s.workers.start(worker)
    await s.wait_healthy()
    await s.wait_running(TASKS)
    load.resume()
    await asyncio.sleep(1.5)
    await asyncio.to_thread(load.stop)
    expected = load.acknowledged()
    counted = await s.converge(topic, expected, expected_lost=len(lost_ids), timeout=60)

    # exactly the deleted-unmirrored records are missing: every other one arrived, none of those did
    got = await asyncio.to_thread(read_topic, s.target.bootstrap_servers, s.remote(topic))
    survivors = {p: [v for v in values if v not in lost_ids] for p, values in expected.items()}
    deleted = {p: [v for v in values if v in lost_ids] for p, values in expected.items()}
    assert tally(survivors, got).lost == 0, tally(survivors, got).summary()
    assert tally(deleted, got).lost == len(lost_ids), "a record deleted before mirroring reached B"

    status = await s.status()
    print(f"task warnings: {[t.get('warnings') for t in status['tasks']] if status else status}")
    await s.finish(counted, fault_report, expected_lost=len(lost_ids), dup_bound=GRACEFUL_DUP_BOUND, tasks=TASKS)
    reported = lost_metric(await s.metrics(), s.remote(topic))
    assert reported == len(lost_ids), f"{LOST_METRIC} says {reported}, {len(lost_ids)} were lost"
