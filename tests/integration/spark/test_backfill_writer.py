"""The Spark writer on its own (embedded ``local[2]`` session): exact copies, and retries that add nothing.

A retried Spark task, or a backfill resumed after a crash, runs the writer again over a range the
target already partly holds; it must skip exactly what is there.
"""

from __future__ import annotations

import pytest

from mirrorline.api import PartitionTarget
from support.kafka import KEEP_OLD_RECORDS, create_topic, produce, read_all, record_tuples

pytestmark = pytest.mark.integration

BASE_TS = 1_600_000_000_000


def history(partitions: int, count: int):
    return [(p, None if i % 7 == 0 else f"k{i}".encode(), None if i % 11 == 3 else f"v{p}-{i}".encode() * 5,
             [("h", str(i).encode()), ("h", b"")] if i % 4 == 0 else [], BASE_TS + i * 10 + p)
            for p in range(partitions) for i in range(count)]


async def test_writer_keeps_everything_and_a_rerun_adds_no_duplicates(spark, cluster_a, cluster_b, unique_name):
    from mirrorline.spark.kafka import kafka_options, read_ranges
    from mirrorline.spark.producer_settings import librdkafka_settings
    from mirrorline.spark.writer import write_ranges

    source, target = unique_name("w-src"), unique_name("w-dst")
    await create_topic(cluster_a.bootstrap_servers, source, 2, config=KEEP_OLD_RECORDS)
    await create_topic(cluster_b.bootstrap_servers, target, 2, config=KEEP_OLD_RECORDS)
    await produce(cluster_a.bootstrap_servers, source, history(2, 400))
    options = kafka_options({"bootstrap.servers": cluster_a.bootstrap_servers})
    settings = librdkafka_settings({"bootstrap.servers": cluster_b.bootstrap_servers})
    targets = {(source, p): PartitionTarget(target, 0) for p in range(2)}

    # a first attempt that died after 150 records of partition 0 (and none of partition 1)
    partial = write_ranges(read_ranges(spark, options, {(source, 0): (0, 150)}), settings,
                           {(source, 0): targets[(source, 0)]}, 100)
    assert partial.done[(source, 0)] == (149, 150, 150)

    # the retry writes the whole range: only what the target lacks is written
    full = {(source, p): (0, 400) for p in range(2)}
    result = write_ranges(read_ranges(spark, options, full), settings, targets, 100)
    assert result.done[(source, 0)] == (399, 400, 250)
    assert result.done[(source, 1)] == (399, 400, 400)
    assert result.syncs[(source, 1)] == [(0, 0), (100, 100), (200, 200), (300, 300), (399, 399)]

    again = write_ranges(read_ranges(spark, options, full), settings, targets, 100)
    assert {key: count for key, (_, _, count) in again.done.items()} == {(source, 0): 0, (source, 1): 0}

    copied = await read_all(cluster_b.bootstrap_servers, target, expect=800)
    original = await read_all(cluster_a.bootstrap_servers, source, expect=800)
    for p in range(2):
        assert record_tuples(copied[p]) == record_tuples(original[p])


async def test_read_ranges_is_exact_and_headers_are_never_null(spark, cluster_a, unique_name):
    from mirrorline.spark.kafka import kafka_options, read_ranges

    source = unique_name("r-src")
    await create_topic(cluster_a.bootstrap_servers, source, 2, config=KEEP_OLD_RECORDS)
    await produce(cluster_a.bootstrap_servers, source, history(2, 50))
    frame = read_ranges(spark, kafka_options({"bootstrap.servers": cluster_a.bootstrap_servers}),
                        {(source, 0): (10, 20), (source, 1): (0, 5), (source, 1 + 1): (3, 3)})
    assert frame.rdd.getNumPartitions() == 2  # one Spark partition per Kafka partition
    rows = frame.collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(0, o) for o in range(10, 20)] + [(1, o) for o in range(5)]
    assert all(r.headers is not None for r in rows)
    assert [len(r.headers) for r in rows if r.partition == 1] == [2, 0, 0, 0, 2]


async def test_the_rate_cap_holds_each_task_to_its_rate(spark, cluster_a, cluster_b, unique_name):
    """``max_records_per_second`` is a cap per Spark task: 2 tasks x 2,000 records at 400/s take 5 s or more.

    Only the lower bound is checked (a loaded machine is slower, never faster). librdkafka's poll()
    returns once it has served a delivery report, and the cap once waited with a single poll: it
    then let a task write at about four times its rate.
    """
    import time

    from mirrorline.spark.kafka import kafka_options, read_ranges
    from mirrorline.spark.producer_settings import librdkafka_settings
    from mirrorline.spark.writer import write_ranges

    source, target = unique_name("cap-src"), unique_name("cap-dst")
    await create_topic(cluster_a.bootstrap_servers, source, 2, config=KEEP_OLD_RECORDS)
    await create_topic(cluster_b.bootstrap_servers, target, 2, config=KEEP_OLD_RECORDS)
    await produce(cluster_a.bootstrap_servers, source, history(2, 2000))
    frame = read_ranges(spark, kafka_options({"bootstrap.servers": cluster_a.bootstrap_servers}),
                        {(source, p): (0, 2000) for p in range(2)})
    frame.cache().count()  # read before the clock starts: only the writing is timed
    settings = librdkafka_settings({"bootstrap.servers": cluster_b.bootstrap_servers})
    began = time.monotonic()
    result = write_ranges(frame, settings, {(source, p): PartitionTarget(target, 0) for p in range(2)}, 1000,
                          max_records_per_second=400)
    took = time.monotonic() - began
    assert {key: count for key, (_, _, count) in result.done.items()} == {(source, 0): 2000, (source, 1): 2000}
    assert took >= 4.9, f"4,000 records in {took:.2f} s: the cap of 400 records/s per task did not hold"
