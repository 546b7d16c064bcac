"""Matching a source partition with its copy by content, on Spark: the core of ``mirrorline reconcile``.

Each record is reduced to two hashes of what mirroring keeps — null flags, key, value, headers
(an absent header list counts as empty) and the timestamp in milliseconds — a 64-bit
``xxhash64`` and Spark's 32-bit ``hash`` (Murmur3), so that two different records match only if
both collide. Records with identical content are ranked by offset within their partition, and
the *k*-th copy on the target is the copy of the *k*-th such record on the source: each side's
offsets are grouped by (topic, partition, hashes), the groups joined (full outer) and their
sorted offset lists zipped. Then, per partition:

* **missing**: source records without a copy (``missing_tail`` of them after the last record
  that has one: not copied yet, or lost with a source that stopped);
* **duplicated**: target records that repeat an earlier target record (rank > 0) beyond the
  source's own repeats — what at-least-once copying leaves behind;
* **unexpected**: target records whose content the source partition does not hold at all;
* **out of order**: matched records whose copy comes before the copy of the record matched just
  before them on the source (each place where the target's order goes backwards counts once);
* the offset map, as runs of consecutive offsets on both sides
  (:class:`mirrorline.connectors.mm2.offset_map.Run`).

Only the hashes and offsets are shuffled (about 40 bytes a record), never the data, and only
per-partition counts and the runs reach the driver. Imports pyspark: load it only inside a job.
"""

from __future__ import annotations

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType

from mirrorline.connectors.mm2.offset_map import Run

from .reconcile_result import PartitionResult

#: Columns :func:`hashed` needs (as Spark's Kafka source names them).
RECORD_COLUMNS = ("topic", "partition", "offset", "key", "value", "headers", "timestamp")


def _content(df: DataFrame) -> list[Column]:
    headers_type = df.schema["headers"].dataType
    assert isinstance(headers_type, ArrayType), f"headers must be an array, not {headers_type}"
    headers = F.coalesce(F.col("headers"), F.array().cast(headers_type))  # Spark reads "no headers" as null
    return [F.col("key").isNull(), F.col("value").isNull(), F.col("key"), F.col("value"), headers,
            F.unix_millis(F.col("timestamp"))]


def hashed(df: DataFrame) -> DataFrame:
    """(topic, partition, offset, h1, h2) of every record: its offset and its two content hashes."""
    content = _content(df)
    return df.select("topic", "partition", "offset", F.xxhash64(*content).alias("h1"),
                     F.hash(*reversed(content)).alias("h2"))


def _offsets_by_content(df: DataFrame, name: str) -> DataFrame:
    """(topic, partition, h1, h2, ``name``): the sorted offsets of the records of each content."""
    return (hashed(df).groupBy("topic", "partition", "h1", "h2")
            .agg(F.sort_array(F.collect_list("offset")).alias(name)))


def match(source: DataFrame, target: DataFrame) -> DataFrame:
    """The pairs of both sides: (topic, partition, rank, s_offset, t_offset), either offset null when unmatched.

    Offsets are grouped by content on each side (one shuffle each, by the join's keys, so the
    full outer join adds none) and the two sorted lists zipped: the k-th (``rank``) source and
    target offsets of one content form a pair. ``target``'s ``topic`` must already name the source
    topic (the remote name replaced).
    """
    keys = ["topic", "partition", "h1", "h2"]
    joined = _offsets_by_content(source, "s").join(_offsets_by_content(target, "t"), keys, "full_outer")
    none = F.array().cast("array<bigint>")
    pairs = F.arrays_zip(F.coalesce(F.col("s"), none), F.coalesce(F.col("t"), none))
    return (joined.select("topic", "partition", F.posexplode(pairs).alias("rank", "pair"))
            .select("topic", "partition", "rank", F.col("pair").getField("0").alias("s_offset"),
                    F.col("pair").getField("1").alias("t_offset")))


def _flag(condition: Column) -> Column:
    return F.sum(F.when(condition, 1).otherwise(0))


def summarize(joined: DataFrame) -> dict[tuple[str, int], PartitionResult]:
    """Per-partition results of a :func:`match` (counts, order, runs); a handful of rows per partition
    reach the driver. Persists ``joined`` while it is read twice."""
    joined = joined.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        s, t = F.col("s_offset"), F.col("t_offset")
        only_t = s.isNull() & t.isNotNull()
        rows = joined.groupBy("topic", "partition").agg(
            F.count(s).alias("source"), F.count(t).alias("target"),
            _flag(s.isNotNull() & t.isNotNull()).alias("matched"),
            _flag(s.isNotNull() & t.isNull()).alias("missing"),
            _flag(only_t & (F.col("rank") > 0)).alias("duplicated"),
            _flag(only_t & (F.col("rank") == 0)).alias("unexpected"),
            F.min(F.when(t.isNull(), s)).alias("first_missing"),
            F.max(F.when(t.isNull(), s)).alias("last_missing"),
        ).collect()
        results = {(r["topic"], r["partition"]): PartitionResult(
            r["topic"], r["partition"], source=r["source"], target=r["target"], matched=r["matched"],
            missing=r["missing"], duplicated=r["duplicated"], unexpected=r["unexpected"],
            first_missing=r["first_missing"], last_missing=r["last_missing"]) for r in rows}
        for row in _runs(joined).collect():
            result = results[(row["topic"], row["partition"])]
            result.runs.append(Run(row["source_start"], row["target_start"], row["length"]))
            result.out_of_order += row["descents"]
        for result in results.values():
            result.runs.sort(key=lambda run: run.source_start)
        _count_tails(joined, results)
        return results
    finally:
        joined.unpersist()


def _count_tails(joined: DataFrame, results: dict[tuple[str, int], PartitionResult]) -> None:
    """Set ``missing_tail``: the missing records after the last record that has a copy (the mirror's lag
    when it still runs, records lost with the source when it stopped for good)."""
    spark = joined.sparkSession
    with_missing = [r for r in results.values() if r.missing]
    if not with_missing:
        return
    last = spark.createDataFrame([(r.topic, r.partition, max((run.source_end - 1 for run in r.runs), default=-1))
                                  for r in with_missing], "topic string, partition int, last_matched long")
    tails = (joined.where(F.col("t_offset").isNull() & F.col("s_offset").isNotNull())
             .join(F.broadcast(last), ["topic", "partition"])
             .where(F.col("s_offset") > F.col("last_matched"))
             .groupBy("topic", "partition").count().collect())
    for row in tails:
        results[(row["topic"], row["partition"])].missing_tail = row["count"]


def _runs(joined: DataFrame) -> DataFrame:
    """Runs of consecutive (source, target) offsets among matched records, with the order breaks in each."""
    pairs = joined.where(F.col("s_offset").isNotNull() & F.col("t_offset").isNotNull())
    by_source = Window.partitionBy("topic", "partition").orderBy("s_offset")
    prev_s, prev_t = F.lag("s_offset").over(by_source), F.lag("t_offset").over(by_source)
    marked = pairs.select(
        "topic", "partition", "s_offset", "t_offset",
        F.when(prev_t.isNotNull() & (F.col("t_offset") < prev_t), 1).otherwise(0).alias("descent"),
        F.when(prev_s.isNull() | (F.col("s_offset") != prev_s + 1) | (F.col("t_offset") != prev_t + 1), 1)
        .otherwise(0).alias("new_run"))
    running = by_source.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    numbered = marked.withColumn("run", F.sum("new_run").over(running))
    return numbered.groupBy("topic", "partition", "run").agg(
        F.min("s_offset").alias("source_start"), F.min("t_offset").alias("target_start"),
        F.count("*").alias("length"), F.sum("descent").alias("descents"))


def reconcile_frames(source: DataFrame, target: DataFrame) -> dict[tuple[str, int], PartitionResult]:
    """Match ``source`` with ``target`` (target topics already renamed to the source's) and summarize."""
    return summarize(match(source, target))
