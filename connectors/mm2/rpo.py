"""The recovery point of a flow: per partition, the records the source holds and the target does not.

For each mirrored partition, the last record on the target's remote partition is found on the
source by content (:func:`mirrorline.connectors.mm2.locate.find_copy`); every source record after
it is one the target does not hold yet. The records are read and counted (not offsets
subtracted), so transaction markers and compaction gaps do not inflate the figure.

``seconds`` is how much time of data those records span, as seen by their timestamps: the
timestamp of the source's last record minus that of the last record the target holds (or of
the first missing record, when the target holds none). A partition with nothing missing is 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from mirrorline.api import Consumer, TopicPartition

from .locate import bounds, find_copy, last_record, scan

#: Past this many missing records a partition's count comes from offsets instead of reading them.
COUNT_LIMIT = 200_000


@dataclass(frozen=True)
class PartitionRpo:
    """What one source partition holds that its remote partition on the target does not.

    ``missing`` is None when it cannot be known (the target's last record is not found on the
    source: the source topic was re-created or its records deleted); ``exact`` is False when the
    count came from offsets (more than :data:`COUNT_LIMIT` records behind).
    """

    source: TopicPartition
    target: TopicPartition
    missing: int | None
    seconds: float
    last_mirrored_ms: int | None
    exact: bool = True


async def partition_rpo(source: Consumer, source_tp: TopicPartition,
                        target: Consumer, target_tp: TopicPartition) -> PartitionRpo:
    """Measure one partition's recovery point (both clusters must answer)."""
    source_start, source_end = await bounds(source, source_tp)
    target_last = await last_record(target, target_tp)
    if target_last is None:
        first_missing = source_start
        last_mirrored_ms = None
    else:
        copy = await find_copy(source, source_tp, target_last)
        if copy is None:
            return PartitionRpo(source_tp, target_tp, None, 0.0, target_last.timestamp)
        first_missing = copy + 1
        last_mirrored_ms = target_last.timestamp
    if first_missing >= source_end:
        return PartitionRpo(source_tp, target_tp, 0, 0.0, last_mirrored_ms)
    if source_end - first_missing > COUNT_LIMIT:
        newest = await last_record(source, source_tp)
        reference = last_mirrored_ms if last_mirrored_ms is not None else newest.timestamp
        return PartitionRpo(source_tp, target_tp, source_end - first_missing,
                            max(0.0, (newest.timestamp - reference) / 1000), last_mirrored_ms, exact=False)
    count, first_ms, last_ms = 0, None, None
    async for record in scan(source, source_tp, first_missing, source_end):
        count += 1
        first_ms = record.timestamp if first_ms is None else first_ms
        last_ms = record.timestamp
    if count == 0:
        return PartitionRpo(source_tp, target_tp, 0, 0.0, last_mirrored_ms)
    reference = last_mirrored_ms if last_mirrored_ms is not None else first_ms
    return PartitionRpo(source_tp, target_tp, count, max(0.0, (last_ms - reference) / 1000), last_mirrored_ms)


@dataclass(frozen=True)
class TopicRpo:
    """A topic's recovery point: the sum of its partitions' missing records and the worst seconds."""

    topic: str
    remote: str
    partitions: list[PartitionRpo]

    @property
    def missing(self) -> int | None:
        """Records the target does not hold (None if any partition cannot be measured)."""
        counts = [p.missing for p in self.partitions]
        return None if any(c is None for c in counts) else sum(counts)

    @property
    def seconds(self) -> float:
        """The largest time span of missing data over the topic's partitions."""
        return max((p.seconds for p in self.partitions), default=0.0)

    @property
    def exact(self) -> bool:
        """True when every partition's count was read record by record."""
        return all(p.exact for p in self.partitions)


async def topic_rpo(source: Consumer, topic: str, partitions: int,
                    target: Consumer, remote: str, remote_partitions: int) -> TopicRpo:
    """Measure every partition of ``topic`` against ``remote`` on the target.

    A source partition the remote topic lacks (or a remote topic that does not exist:
    ``remote_partitions`` 0) counts all its records as missing.
    """
    out = []
    for partition in range(partitions):
        source_tp, target_tp = TopicPartition(topic, partition), TopicPartition(remote, partition)
        if partition < remote_partitions:
            out.append(await partition_rpo(source, source_tp, target, target_tp))
        else:
            out.append(await _all_missing(source, source_tp, target_tp))
    return TopicRpo(topic, remote, out)


async def _all_missing(source: Consumer, source_tp: TopicPartition, target_tp: TopicPartition) -> PartitionRpo:
    start, end = await bounds(source, source_tp)
    if end <= start:
        return PartitionRpo(source_tp, target_tp, 0, 0.0, None)
    first = await find_first(source, source_tp, start, end)
    newest = await last_record(source, source_tp)
    seconds = 0.0 if first is None or newest is None else max(0.0, (newest.timestamp - first.timestamp) / 1000)
    return PartitionRpo(source_tp, target_tp, end - start, seconds, None, exact=False)


async def find_first(consumer: Consumer, tp: TopicPartition, begin: int, end: int):
    """The first record of ``tp`` in ``[begin, end)``, or None."""
    async for record in scan(consumer, tp, begin, end):
        return record
    return None
