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

from aiokafka import AIOKafkaConsumer, TopicPartition


def fetch_position(consumer: AIOKafkaConsumer, tp: TopicPartition) -> int | None:
    """The consumer's position on ``tp`` now (None while unknown), without waiting.

    aiokafka's ``position()`` is a coroutine that waits for a pending reset; the watchdog needs the
    current value synchronously, which the assignment state holds.
    """
    try:
        state = consumer._subscription.subscription.assignment.state_value(tp)
    except AttributeError:  # not assigned (yet, or any more)
        return None
    if state is None or not state.has_valid_position:
        return None
    return state.position


class PendingRecords:
    """Counts, per partition, the records still to copy (see the module docstring)."""

    def __init__(self, consumer: AIOKafkaConsumer, read_committed: bool):
        self._consumer = consumer
        self._read_committed = read_committed
        self._unacknowledged: Counter[TopicPartition] = Counter()

    def handed_over(self, tp: TopicPartition, count: int) -> None:
        """``count`` records of ``tp`` were returned by poll() and are on their way to the target."""
        self._unacknowledged[tp] += count

    def acknowledged(self, tp: TopicPartition, count: int) -> None:
        """``count`` records of ``tp`` were acknowledged (or dropped by a transform)."""
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
        end, position = self.end(tp), fetch_position(self._consumer, tp)
        if end is None or position is None:
            return None
        return max(0, end - position) + self._unacknowledged[tp]

    def total(self, partitions: list[TopicPartition]) -> int | None:
        """Over ``partitions`` (those assigned now); None while none is known."""
        assigned = self._consumer.assignment()  # highwater() asserts assignment; start() may still be running
        total, known = 0, False
        for tp in partitions:
            if tp not in assigned:
                continue
            count = self.of(tp)
            if count is not None:
                known = True
                total += count
        return total if known else None
