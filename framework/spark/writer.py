"""Writing records to Kafka from Spark with their partition, key, value, headers and timestamp, in order.

Spark's built-in Kafka sink ignores the ``timestamp`` column (every copy would get the write
time), so records are written by a Python function run with ``mapInArrow``, one librdkafka
producer per Spark task (see :mod:`mirrorline.spark.producer_settings` for why librdkafka). The
input comes from :func:`mirrorline.spark.kafka.read_ranges` without a shuffle, so each Spark task
holds one source partition in offset order and writes it with an idempotent producer: the copy
keeps the source's order.

**Exact, retry-safe.** The caller owns each target partition for the write (nothing else
writes to it) and says, per source partition, which target offset the first input record must
land at (``base``). A task first asks the target for its end offset: records already there
(``end - base``, from an earlier attempt or an interrupted run) are skipped, so a retried task
or a resumed job adds no duplicates. After flushing, the task checks that the target ends at
``base + records``; anything else (a foreign writer) fails the task.

The tasks return, instead of data, small rows: offset-sync candidates ``(upstream,
downstream)`` — the first record, every ``sync_every``-th, each upstream gap, the last — and one
``done`` row per partition, which the driver turns into offset syncs and hand-off offsets.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from mirrorline.api.jobs import PartitionTarget, WriteResult

if TYPE_CHECKING:  # optional dependencies
    import pyarrow
    from pyspark.sql import DataFrame

#: The rows :func:`write_ranges` returns.
RESULT_SCHEMA = "kind string, topic string, partition int, upstream long, downstream long, count long, bytes long"
#: Seconds librdkafka gets to deliver everything at the end of a task.
FLUSH_TIMEOUT_S = 300.0


def write_ranges(frame: DataFrame, producer_settings: Mapping[str, str],
                 targets: Mapping[tuple[str, int], PartitionTarget], sync_every: int,
                 max_records_per_second: float = 0.0) -> WriteResult:
    """Write ``frame`` (columns of :func:`~mirrorline.spark.kafka.read_ranges`) to the targets; blocking.

    ``max_records_per_second`` (> 0) caps each Spark task's writing rate, to spare the target
    cluster. Raises the Spark error of a failed task (after Spark's retries) with its first line.
    """
    from pyspark.sql import functions as F

    settings = dict(producer_settings)
    plan = {f"{t}\x00{p}": (target.remote_topic, target.base) for (t, p), target in targets.items()}
    every = max(1, int(sync_every))

    limit = float(max_records_per_second or 0.0)

    def run(batches: Iterator[pyarrow.RecordBatch]) -> Iterator[pyarrow.RecordBatch]:
        return _write_task(batches, settings, plan, every, limit)

    projected = frame.select("topic", "partition", "offset", "key", "value", "headers",
                             F.unix_millis("timestamp").alias("ts"))
    result = WriteResult()
    for row in projected.mapInArrow(run, RESULT_SCHEMA).collect():
        key = (row["topic"], row["partition"])  # by name: Row is a tuple, row.count is tuple.count
        if row["kind"] == "sync":
            result.syncs.setdefault(key, []).append((row["upstream"], row["downstream"]))
        else:
            result.done[key] = (row["upstream"], row["downstream"], row["count"])
            result.bytes[key] = row["bytes"]
    for candidates in result.syncs.values():
        candidates.sort()
    return result


class _Partition:
    """A task's state for one source partition."""

    def __init__(self, topic: str, partition: int, remote: str, base: int, end: int):
        self.topic, self.partition, self.remote, self.base = topic, partition, remote, base
        self.skip = end - base
        if self.skip < 0:
            raise RuntimeError(f"target {remote}-{partition} ends at offset {end}, below {base} where this "
                               f"backfill started writing: records were deleted from it during the backfill")
        self.index = 0
        self.written = 0
        self.bytes = 0
        self.previous_upstream = -2
        self.last_sync = None
        self.syncs: list[tuple[int, int]] = []
        self.last = None

    def note(self, upstream: int, every: int) -> int:
        """Count one input record; return its target offset (and remember a sync candidate)."""
        downstream = self.base + self.index
        if (self.last_sync is None or upstream - self.previous_upstream != 1
                or downstream - self.last_sync >= every):
            self.syncs.append((upstream, downstream))
            self.last_sync = downstream
        self.previous_upstream = upstream
        self.last = (upstream, downstream)
        self.index += 1
        return downstream


def _write_task(batches: Iterator[pyarrow.RecordBatch], settings: dict[str, str],
                plan: dict[str, tuple[str, int]], every: int, limit: float = 0.0) -> Iterator[pyarrow.RecordBatch]:
    """The body of one Spark task: produce its records, yield the sync and done rows."""
    import time

    import pyarrow as pa
    from confluent_kafka import Consumer, Producer, TopicPartition

    started, produced = time.monotonic(), 0
    errors: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None and len(errors) < 5:
            errors.append(str(err))

    producer = Producer({**settings, "on_delivery": delivered})
    probe_settings = {k: v for k, v in settings.items() if k.startswith(("bootstrap.", "security.", "sasl.", "ssl."))
                      or k == "client.dns.lookup"}
    probe = Consumer({**probe_settings, "group.id": "mirrorline-backfill-probe", "enable.auto.commit": "false"})

    def end_offset(topic: str, partition: int) -> int:
        return probe.get_watermark_offsets(TopicPartition(topic, partition), timeout=30, cached=False)[1]

    states: dict[tuple[str, int], _Partition] = {}
    try:
        for batch in batches:
            columns = {name: batch.column(i).to_pylist() for i, name in enumerate(batch.schema.names)}
            for topic, partition, upstream, key, value, headers, ts in zip(
                    columns["topic"], columns["partition"], columns["offset"], columns["key"], columns["value"],
                    columns["headers"], columns["ts"]):
                state = states.get((topic, partition))
                if state is None:
                    remote, base = plan[f"{topic}\x00{partition}"]
                    state = states[(topic, partition)] = _Partition(topic, partition, remote, base,
                                                                    end_offset(remote, partition))
                index = state.index
                state.note(upstream, every)
                if index < state.skip:
                    continue
                record_headers = [(h["key"], h["value"]) for h in headers] if headers else None
                while True:
                    try:
                        producer.produce(state.remote, value=value, key=key, partition=partition,
                                         timestamp=ts if ts and ts > 0 else 0, headers=record_headers)
                        break
                    except BufferError:  # local queue full: let librdkafka drain it
                        producer.poll(0.05)
                state.written += 1
                state.bytes += (len(key) if key else 0) + (len(value) if value else 0) + (
                    sum(len(h[0]) + len(h[1] or b"") for h in record_headers) if record_headers else 0)
                produced += 1
                if limit and produced % 100 == 0:  # the rate cap: wait until the time these records deserve
                    # poll() returns as soon as it has served a delivery report, so one call is not a
                    # wait: poll until the deadline (a single poll let the cap run at ~4x its rate)
                    deadline = started + produced / limit
                    while (ahead := deadline - time.monotonic()) > 0:
                        producer.poll(ahead)
            producer.poll(0)
            if errors:
                raise RuntimeError(f"writing to the target failed: {errors[0]}")
        remaining = producer.flush(FLUSH_TIMEOUT_S)
        if errors:
            raise RuntimeError(f"writing to the target failed: {errors[0]}")
        if remaining:
            raise RuntimeError(f"{remaining} record(s) not acknowledged by the target within {FLUSH_TIMEOUT_S:.0f} s")
        rows: list[tuple] = []
        for state in states.values():
            end = end_offset(state.remote, state.partition)
            expected = state.base + state.index
            if end != expected:
                raise RuntimeError(f"target {state.remote}-{state.partition} ends at {end}, not {expected}: something "
                                   f"else wrote to it during the backfill; the copy is not exact")
            if state.last is not None and state.syncs[-1] != state.last:
                state.syncs.append(state.last)
            rows.extend(("sync", state.topic, state.partition, u, d, 0, 0) for u, d in state.syncs)
            rows.append(("done", state.topic, state.partition, state.last[0] if state.last else -1, end,
                         state.written, state.bytes))
    finally:
        probe.close()
    if rows:
        names = ["kind", "topic", "partition", "upstream", "downstream", "count", "bytes"]
        types = [pa.string(), pa.string(), pa.int32(), pa.int64(), pa.int64(), pa.int64(), pa.int64()]
        yield pa.RecordBatch.from_arrays([pa.array([r[i] for r in rows], type=t) for i, t in enumerate(types)],
                                         names=names)
