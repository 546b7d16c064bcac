"""What a source task hands the runtime and gets back once a record is written, and what a sink task receives."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class SourceRecord:
    """One record to write to Kafka, with the position in the source system it came from.

    - ``source_partition`` / ``source_offset``: JSON-serialisable dicts. The runtime stores the
      latest offset per partition once the record (and every earlier record of the same
      partition) is acknowledged by Kafka, and gives it back through
      ``context.offsets`` after a restart. Return the offset *of* this record; the task
      decides on restart whether to resume at it or after it (mirror tasks resume after).
      ``None`` for both means "no position to remember".
    - ``topic`` and ``partition``: where to write. ``partition=None`` lets the producer's
      partitioner choose from the key.
    - ``key`` / ``value``: bytes, written unchanged (no converter); ``None`` is a null key or
      value (a tombstone when the value is null).
    - ``headers``: ``(name, bytes value)`` pairs, kept in order, names may repeat.
    - ``timestamp``: epoch milliseconds, or None for the producer's clock.
    - ``key_schema`` / ``value_schema``: only with a converter other than the default
      ``ByteArrayConverter`` (``key.converter``, ``value.converter``): then ``key`` / ``value``
      may be data (``str``, ``int``, ``dict``...) the converter turns into bytes, and the schema
      (Connect's JSON schema form, see :mod:`mirrorline.api.converters`) says what it is. None
      lets the converter infer one from the value.
    """

    source_partition: dict[str, Any] | None
    source_offset: dict[str, Any] | None
    topic: str
    partition: int | None = None
    key: bytes | None = None
    value: bytes | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    timestamp: int | None = None
    key_schema: Any = None
    value_schema: Any = None


@dataclass(slots=True)
class SourceBatch:
    """Records already encoded as one Kafka record batch, written to one partition as they are.

    Beyond Connect. A task whose context says ``accepts_batches`` (no transform, no converter
    other than ByteArray on the connector) may return these from ``poll`` next to, or instead
    of, :class:`SourceRecord` s. The runtime hands ``data`` to the producer whole: no record is
    decoded or re-encoded, and its compression stays as it is. It rewrites only what the
    producer owns — producer id, epoch and base sequence (idempotence), baseOffset,
    partitionLeaderEpoch, the transactional and control attribute bits — and the CRC.

    - ``data``: exactly one record batch of magic 2, CreateTime, offset deltas ``0..n-1``
      (``record_count`` records), without the delete-horizon flag. Kafka assigns its records
      consecutive offsets from the base offset it reports.
    - ``source_partition`` / ``source_offset``: as for :class:`SourceRecord`; the offset is
      that of the batch's *last* record and is stored once the batch is acknowledged.
    - ``topic`` / ``partition``: where to write (a partition is required).
    - ``max_timestamp``: the largest record timestamp (epoch ms) or -1, for latency metrics.
    - ``data`` as ``bytes`` is copied once when written; a ``bytearray`` is taken over instead:
      the fields above are rewritten in it, in place, so that only one copy of each batch waits
      for the target's acknowledgement. Pass ``bytes`` to keep your buffer as it was.

    Subclass it to carry what your ``commit_batch`` needs (a mirror keeps the source offset of
    every record to emit exact offset syncs).
    """

    source_partition: dict[str, Any] | None
    source_offset: dict[str, Any] | None
    topic: str
    partition: int
    data: bytes | bytearray
    record_count: int
    max_timestamp: int = -1


@dataclass(slots=True)
class SinkRecord:
    """One record a sink task receives: a record consumed from Kafka, after converters and transforms.

    - ``topic`` / ``partition`` / ``offset``: where it was consumed. A transform may change
      ``topic`` (``RegexRouter``); the runtime still commits the offset of the record it consumed.
    - ``key`` / ``value``: bytes with the default ``ByteArrayConverter``, otherwise what the
      configured ``key.converter`` / ``value.converter`` made of them (``str``, a JSON value...).
      ``None`` is a null key or value (a tombstone when the value is null).
    - ``headers``: ``(name, value)`` pairs, in order, names may repeat.
    - ``timestamp``: epoch milliseconds, or None; ``timestamp_type`` is Kafka's name for it
      (``CreateTime``, ``LogAppendTime`` or ``NoTimestampType``).
    - ``key_schema`` / ``value_schema``: the schema a converter read with the data (JSON with
      ``schemas.enable=true``), else None.

    Its field names match :class:`SourceRecord`'s, so a transform written with
    ``dataclasses.replace(record, topic=...)`` works on both.
    """

    topic: str
    partition: int
    offset: int
    key: Any = None
    value: Any = None
    headers: list[tuple[str, Any]] = field(default_factory=list)
    timestamp: int | None = None
    timestamp_type: str = "CreateTime"
    key_schema: Any = None
    value_schema: Any = None


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where Kafka stored a record: passed to ``SourceTask.commit_record`` after the ack."""

    topic: str
    partition: int
    offset: int
    timestamp: int


@dataclass(frozen=True, slots=True, order=True)
class ConnectorTaskId:
    """A task's identity: its connector's name and its index (0-based)."""

    connector: str
    task: int

    def __str__(self) -> str:
        return f"{self.connector}-{self.task}"
