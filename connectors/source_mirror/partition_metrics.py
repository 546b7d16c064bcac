"""The metric series a MirrorSource task keeps for each partition it mirrors, at one of two levels.

``replication.metrics.level`` (beyond MM2, in the spirit of Connect's ``metrics.recording.level``):

- ``partition`` (default): MM2's tags, one series per source/target/topic/partition and metric.
- ``topic``: one series per topic, with an empty ``partition`` label (which Prometheus stores as
  no label at all), so a flow of 8,000 partitions in 2,000 topics exports a quarter of the
  series. Counters (records, bytes, records lost, offset resets) are sums over the topic's
  partitions; ``replication_lag_records`` is the sum of its partitions' lags mirrored in this
  process; ``record_age_ms`` and ``replication_latency_ms`` are those of the topic's most recent
  record, whichever partition it came from. The dashboard's queries aggregate by topic already
  (``sum by``/``max by (source, target, topic)``), so they read the same at either level; only
  the "most lagging partitions" panel shows topics instead.

One topic's partitions are dealt to several tasks, which may run in one process: at topic level
the tasks share the topic's series. :class:`TopicSeries` counts the tasks using them (a gauge is
dropped when the last one stops) and sums the lags each task reports per partition.
"""

from __future__ import annotations

from mirrorline.connectors.source_mirror import metrics
from mirrorline.connectors.source_mirror.positions import PositionState

PARTITION_LEVEL = "partition"
TOPIC_LEVEL = "topic"
LEVELS = (PARTITION_LEVEL, TOPIC_LEVEL)
_GAUGES = (metrics.RECORD_AGE_MS, metrics.REPLICATION_LATENCY_MS, metrics.REPLICATION_LAG_RECORDS)
_RESET_STATES = (PositionState.LOST_TO_RETENTION, PositionState.OFFSETS_WENT_BACKWARDS)


class PartitionMetrics:
    """The metric series of one mirrored partition (``partition`` level: its own)."""

    def __init__(self, labels: tuple[str, ...]):
        self.record_count = metrics.RECORD_COUNT.labels(*labels)
        self.byte_count = metrics.BYTE_COUNT.labels(*labels)
        self.record_age_ms = metrics.RECORD_AGE_MS.labels(*labels)
        self.replication_latency_ms = metrics.REPLICATION_LATENCY_MS.labels(*labels)
        self.lag_records = metrics.REPLICATION_LAG_RECORDS.labels(*labels)
        self.lost_to_retention = metrics.RECORDS_LOST_TO_RETENTION.labels(*labels)
        self.resets = {state: metrics.SOURCE_OFFSET_RESETS.labels(*labels, state.value) for state in _RESET_STATES}
        self._labels = labels

    def forget_gauges(self) -> None:
        """Drop this partition's gauges: once the task stops here, its last lag or latency is stale
        (another worker may mirror the partition now). Counters stay, so rates stay continuous."""
        for gauge in _GAUGES:
            try:
                gauge.remove(*self._labels)
            except KeyError:
                pass


class _LagShare:
    """One partition's part of its topic's lag gauge (topic level)."""

    __slots__ = ("_series", "_partition")

    def __init__(self, series: TopicSeries, partition: int):
        self._series, self._partition = series, partition

    def set(self, value: float) -> None:
        self._series.set_lag(self._partition, value)


class TopicSeries:
    """The series of one topic at topic level, shared by every partition of it mirrored in this process."""

    _shared: dict[tuple[str, ...], TopicSeries] = {}

    def __init__(self, labels: tuple[str, ...]):
        self.labels = labels
        self.users = 0
        self.lags: dict[int, float] = {}
        self.lag_total = 0.0
        self.record_count = metrics.RECORD_COUNT.labels(*labels)
        self.byte_count = metrics.BYTE_COUNT.labels(*labels)
        self.record_age_ms = metrics.RECORD_AGE_MS.labels(*labels)
        self.replication_latency_ms = metrics.REPLICATION_LATENCY_MS.labels(*labels)
        self._lag_gauge = metrics.REPLICATION_LAG_RECORDS.labels(*labels)
        self.lost_to_retention = metrics.RECORDS_LOST_TO_RETENTION.labels(*labels)
        self.resets = {state: metrics.SOURCE_OFFSET_RESETS.labels(*labels, state.value) for state in _RESET_STATES}

    @classmethod
    def acquire(cls, labels: tuple[str, ...]) -> TopicSeries:
        series = cls._shared.get(labels)
        if series is None:
            series = cls._shared[labels] = cls(labels)
            for gauge in _GAUGES:  # re-created after the last user dropped them
                gauge.labels(*labels)
        series.users += 1
        return series

    def set_lag(self, partition: int, value: float) -> None:
        self.lag_total += value - self.lags.get(partition, 0.0)
        self.lags[partition] = value
        self._lag_gauge.set(self.lag_total)

    def release(self, partition: int) -> None:
        """A partition stopped here: its lag leaves the sum; the last user drops the topic's gauges."""
        self.set_lag(partition, 0.0)
        self.lags.pop(partition, None)
        self.users -= 1
        if self.users <= 0:
            self._shared.pop(self.labels, None)
            for gauge in _GAUGES:
                try:
                    gauge.remove(*self.labels)
                except KeyError:
                    pass


class TopicLevelPartition:
    """One partition's handle on its topic's shared series (topic level); the same interface as
    :class:`PartitionMetrics`."""

    def __init__(self, labels: tuple[str, ...]):
        source, target, topic, partition = labels
        self._partition = int(partition)
        self._series = TopicSeries.acquire((source, target, topic, ""))
        self._series.lags.setdefault(self._partition, 0.0)
        self.record_count = self._series.record_count
        self.byte_count = self._series.byte_count
        self.record_age_ms = self._series.record_age_ms
        self.replication_latency_ms = self._series.replication_latency_ms
        self.lag_records = _LagShare(self._series, self._partition)
        self.lost_to_retention = self._series.lost_to_retention
        self.resets = self._series.resets
        self._released = False

    def forget_gauges(self) -> None:
        """This partition stopped here (once): see :meth:`TopicSeries.release`."""
        if not self._released:
            self._released = True
            self._series.release(self._partition)


def partition_metrics(level: str, labels: tuple[str, ...]) -> PartitionMetrics | TopicLevelPartition:
    """The series handle of one partition (labels: source, target, remote topic, partition) at ``level``."""
    return TopicLevelPartition(labels) if level == TOPIC_LEVEL else PartitionMetrics(labels)
