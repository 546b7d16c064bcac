"""Reading Kafka with Spark: cluster client settings as Spark options, and exact per-partition ranges.

Spark's Kafka source (spark-sql-kafka) runs Kafka's Java client, so our client settings —
Java-style already (``bootstrap.servers``, ``security.protocol``, ``sasl.*``, ``ssl.*``) — pass
through with Spark's ``kafka.`` prefix. Settings the source forbids or sets itself (group,
deserializers, offset reset, auto commit) are left out.

A batch read with per-partition ``startingOffsets``/``endingOffsets`` is exact: the end is
exclusive, and each Kafka partition becomes one Spark partition (no ``minPartitions``), which is
what keeps per-partition order through a writer that runs once per Spark partition.
``failOnDataLoss=true``: a range whose start was deleted by retention fails the read instead of
being skipped silently (Spark's behaviour with ``false``). Headers are never null: a record
without headers reads as ``[]``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pyspark is an optional dependency
    from pyspark.sql import DataFrame, SparkSession

#: Client settings that mean the same to Spark's Kafka source (Kafka's Java consumer/admin).
PASSED_PREFIXES = ("sasl.", "ssl.")
PASSED_KEYS = frozenset({
    "bootstrap.servers", "security.protocol", "client.dns.lookup", "connections.max.idle.ms",
    "request.timeout.ms", "default.api.timeout.ms", "metadata.max.age.ms", "receive.buffer.bytes",
    "send.buffer.bytes", "fetch.max.bytes", "max.partition.fetch.bytes", "fetch.min.bytes",
    "fetch.max.wait.ms", "max.poll.records", "reconnect.backoff.ms", "reconnect.backoff.max.ms",
    "retry.backoff.ms", "socket.connection.setup.timeout.ms", "socket.connection.setup.timeout.max.ms",
    "client.rack", "isolation.level",
})
#: Throughput defaults for the bulk reads (the Java consumer's are sized for streaming: 1 MiB per
#: partition per fetch, a 64 KiB socket buffer); a setting the caller gives wins.
READ_DEFAULTS = {"kafka.max.partition.fetch.bytes": str(8 * 1024 * 1024), "kafka.receive.buffer.bytes": str(1024 * 1024)}
#: The columns :func:`read_ranges` returns.
COLUMNS = ("topic", "partition", "offset", "key", "value", "headers", "timestamp", "timestampType")


def kafka_options(client_settings: Mapping[str, str]) -> dict[str, str]:
    """Our cluster client settings (Java-style) as Spark Kafka source options (``kafka.<setting>``)."""
    return {f"kafka.{key}": str(value) for key, value in client_settings.items()
            if key in PASSED_KEYS or key.startswith(PASSED_PREFIXES)}


def offsets_json(ranges: Mapping[tuple[str, int], int]) -> str:
    """``{(topic, partition): offset}`` in the JSON Spark's ``startingOffsets``/``endingOffsets`` take."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(ranges.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return json.dumps(out)


def read_ranges(spark: SparkSession, options: Mapping[str, str],
                ranges: Mapping[tuple[str, int], tuple[int, int]]) -> DataFrame:
    """The records of each ``(topic, partition)`` in ``[start, end)``, one Spark partition per Kafka partition.

    Columns: topic, partition, offset, key, value (binary, null kept), headers
    (``array<struct<key: string, value: binary>>``, ``[]`` when the record has none), timestamp,
    timestampType. Empty ranges are left out; ValueError when none is left. The read fails
    (a Spark error naming the partition) when a start lies below the partition's log start.
    """
    from pyspark.sql import functions as F

    wanted = {tp: (int(start), int(end)) for tp, (start, end) in ranges.items() if end > start}
    if not wanted:
        raise ValueError("no partition has records in the requested ranges")
    assign: dict[str, list[int]] = {}
    for topic, partition in sorted(wanted):
        assign.setdefault(topic, []).append(partition)
    frame = (spark.read.format("kafka").options(**{**READ_DEFAULTS, **dict(options)})
             .option("assign", json.dumps(assign))
             .option("startingOffsets", offsets_json({tp: r[0] for tp, r in wanted.items()}))
             .option("endingOffsets", offsets_json({tp: r[1] for tp, r in wanted.items()}))
             .option("failOnDataLoss", "true")
             .option("includeHeaders", "true")
             .load())
    headers_type = frame.schema["headers"].dataType
    return frame.select(
        "topic", "partition", "offset", "key", "value",
        F.coalesce(F.col("headers"), F.array().cast(headers_type)).alias("headers"),
        "timestamp", "timestampType")
