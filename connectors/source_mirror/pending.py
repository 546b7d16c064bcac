"""What a MirrorSource task still has to copy, counting only records a consumer can be given.

Per partition: the records between the consumer's fetch position and the partition's end, plus
the records already handed to the runtime and not yet acknowledged by the target (so a task whose
sends hang shows pending work). The end is the last stable offset under ``read_committed`` (records
of open transactions cannot be given yet) and the high watermark otherwise.

Offsets are not records: a transaction's commit or abort marker takes an offset, and so do the
records of an aborted transaction, which a ``read_committed`` consumer never receives. The fetch
position moves past them as they are fetched, so an idle partition whose log ends with a marker
counts 0. (Counting from the offset after the last acknowledged record instead would count the
final marker of a transactional partition as a record waiting forever: a false stall.)

It feeds the task's ``pending_records()`` (the stall watchdog) and the
``replication_lag_records`` gauge.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator

from mirrorline.api import Consumer, TopicPartition


class PendingRecords:
    """Counts, per partition, the records still to copy (see the module docstring)."""

    def __init__(self, consumer: Consumer, read_committed: bool):
        self._consumer = consumer
        self._read_committed = read_committed
        self._unacknowledged: Counter[TopicPartition] = Counter()
        #: partitions acknowledged since the last :meth:`changed`, and what it returned before
        self._acknowledged_since: set[TopicPartition] = set()
        self._changed_before: set[TopicPartition] = set()

    def handed_over(self, tp: TopicPartition, count: int) -> None:
        """``count`` records of ``tp`` were returned by poll() and are on their way to the target."""
        self._unacknowledged[tp] += count

    def acknowledged(self, tp: TopicPartition, count: int) -> None:
        """``count`` records of ``tp`` were acknowledged (or dropped by a transform)."""
        self._acknowledged_since.add(tp)
        left = self._unacknowledged[tp] - count
        if left > 0:
            self._unacknowledged[tp] = left
        else:
            del self._unacknowledged[tp]

    def end(self, tp: TopicPartition) -> int | None:
        """The offset up to which a consumer of this isolation level can be given records."""
        consumer = self._consumer
        end = consumer.last_stable_offset(tp) if self._read_committed else None
        return consumer.highwater(tp) if end is None else end

    def of(self, tp: TopicPartition) -> int | None:
        """Records of ``tp`` still to copy (None while its end or position is unknown)."""
        # fetch_position, not position(): that waits for a pending reset, the watchdog needs the value now
        end, position = self.end(tp), self._consumer.fetch_position(tp)
        if end is None or position is None:
            return None
        return max(0, end - position) + self._unacknowledged[tp]

    def all_of(self, partitions: Iterable[TopicPartition]) -> Iterator[tuple[TopicPartition, int]]:
        """``(partition, records still to copy)`` of those of ``partitions`` whose count is known:
        :meth:`of` for each, read from the consumer in one pass."""
        unacknowledged, read_committed = self._unacknowledged, self._read_committed
        for tp, position, highwater, stable in self._consumer.fetch_states(partitions):
            end = stable if read_committed and stable is not None else highwater
            if end is not None and position is not None:
                yield tp, max(0, end - position) + unacknowledged.get(tp, 0)

    def changed(self) -> set[TopicPartition] | None:
        """The partitions whose count may have moved since the call before the previous one: answered
        by a fetch (:meth:`~mirrorline.api.Consumer.fetch_state_changes`) or acknowledged. None when
        the consumer cannot tell. Two periods, not one: a partition answered just before one call has
        its records (or a transaction marker) consumed just after it, which moves its position."""
        fetched = self._consumer.fetch_state_changes()
        latest = self._acknowledged_since if fetched is None else self._acknowledged_since | fetched
        self._acknowledged_since = set()
        before, self._changed_before = self._changed_before, latest
        return None if fetched is None else latest | before

    def total(self, partitions: list[TopicPartition]) -> int | None:
        """Over ``partitions`` (those assigned now: the consumer has no fetch state for the others, as
        while start() is still running); None while none is known."""
        total, known = 0, False
        for _tp, count in self.all_of(partitions):
            known = True
            total += count
        return total if known else None
