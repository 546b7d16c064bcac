"""Which source offsets are safe to commit: only those whose record, and every earlier one, is acked.

Records of one source partition may land in several Kafka partitions and be acknowledged
out of order. For each source partition the tracker keeps the unacknowledged records in
the order the task returned them; the committable offset is that of the last record of
the acknowledged prefix. So a restart resumes after a record only if everything before it
is in Kafka. The acknowledged prefix is dropped as acks arrive, so memory is bounded by
the records in flight, not by the records written since the last flush.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any


@dataclass
class _Pending:
    offset: dict[str, Any]
    queue: _PartitionQueue
    acked: bool = False


@dataclass
class _PartitionQueue:
    partition: dict[str, Any]
    queue: deque[_Pending] = field(default_factory=deque)
    latest: dict[str, Any] | None = None  # offset of the last record of the acked prefix, not yet taken


def partition_identity(partition: dict[str, Any]) -> Any:
    """A hashable identity of a source partition, cheap for the usual flat maps of scalars.

    Equal for equal maps whatever their key order; a few times cheaper than the canonical JSON of
    :func:`~mirrorline.storage.offsets.partition_key`, which matters at thousands of partitions.
    """
    try:
        return tuple(sorted(partition.items()))
    except TypeError:  # nested or unorderable values
        return json.dumps(partition, sort_keys=True)


class OffsetTracker:
    """Tracks submitted and acknowledged records of one task."""

    def __init__(self, connector: str):
        self.connector = connector
        self._partitions: dict[Any, _PartitionQueue] = {}
        self.outstanding = 0

    def submit(self, partition: dict[str, Any] | None, offset: dict[str, Any] | None) -> _Pending | None:
        """Record that a record was handed to the producer; returns the handle to ``ack`` later."""
        if partition is None or offset is None:
            return None
        key = partition_identity(partition)
        entry = self._partitions.get(key)
        if entry is None:
            entry = self._partitions[key] = _PartitionQueue(dict(partition))
        pending = _Pending(dict(offset), entry)
        entry.queue.append(pending)
        self.outstanding += 1
        return pending

    def ack(self, pending: _Pending | None) -> None:
        """Mark a submitted record as acknowledged by Kafka."""
        if pending is None or pending.acked:
            return
        pending.acked = True
        self.outstanding -= 1
        entry = pending.queue
        while entry.queue and entry.queue[0].acked:
            entry.latest = entry.queue.popleft().offset

    def committable(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(partition, offset) pairs that advanced since the last call."""
        out = []
        for entry in self._partitions.values():
            if entry.latest is not None:
                out.append((entry.partition, entry.latest))
                entry.latest = None
        return out


@dataclass
class _Dropped(_Pending):
    record: Any = None  # the record a transform dropped, handed back once it is done


class TransformedOffsetTracker(OffsetTracker):
    """An OffsetTracker for a task with transforms, which may drop records.

    A dropped record is done at once, but in its place: its offset becomes committable only
    when every earlier record of its source partition is acknowledged, and only then is it
    handed back (so ``commit_record(record, None)`` follows the records before it). Tasks
    without transforms use the plain tracker, whose ``ack`` does none of this.
    """

    def drop(self, record: Any) -> list[Any]:
        """Record that a transform dropped ``record``; returns the dropped records now done, in order."""
        if record.source_partition is None or record.source_offset is None:
            return [record]
        key = partition_identity(record.source_partition)
        entry = self._partitions.get(key)
        if entry is None:
            entry = self._partitions[key] = _PartitionQueue(dict(record.source_partition))
        pending = _Dropped(dict(record.source_offset), entry, record=record)
        entry.queue.append(pending)
        self.outstanding += 1
        return self.ack(pending)

    def ack(self, pending: _Pending | None) -> list[Any]:
        """Mark a submitted record as acknowledged; returns the dropped records this makes done."""
        released: list[Any] = []
        if pending is None or pending.acked:
            return released
        pending.acked = True
        self.outstanding -= 1
        entry = pending.queue
        while entry.queue and entry.queue[0].acked:
            done = entry.queue.popleft()
            entry.latest = done.offset
            if isinstance(done, _Dropped):
                released.append(done.record)
        return released
