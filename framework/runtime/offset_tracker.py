"""Which source offsets are safe to commit: only those whose record, and every earlier one, is acked.

Records of one source partition may land in several Kafka partitions and be acknowledged
out of order. For each source partition the tracker keeps the records in the order the
task returned them; the committable offset is that of the last record in the acknowledged
prefix. So a restart resumes after a record only if everything before it is in Kafka.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from framework.storage.offsets import partition_key


@dataclass
class _Pending:
    offset: dict[str, Any]
    acked: bool = False


@dataclass
class _PartitionQueue:
    partition: dict[str, Any]
    queue: deque[_Pending] = field(default_factory=deque)


class OffsetTracker:
    """Tracks submitted and acknowledged records of one task."""

    def __init__(self, connector: str):
        self.connector = connector
        self._partitions: dict[str, _PartitionQueue] = {}
        self.outstanding = 0

    def submit(self, partition: dict[str, Any] | None, offset: dict[str, Any] | None) -> _Pending | None:
        """Record that a record was handed to the producer; returns the handle to ``ack`` later."""
        if partition is None or offset is None:
            return None
        key = partition_key(self.connector, partition)
        entry = self._partitions.get(key)
        if entry is None:
            entry = self._partitions[key] = _PartitionQueue(dict(partition))
        pending = _Pending(dict(offset))
        entry.queue.append(pending)
        self.outstanding += 1
        return pending

    def ack(self, pending: _Pending | None) -> None:
        """Mark a submitted record as acknowledged by Kafka."""
        if pending is not None and not pending.acked:
            pending.acked = True
            self.outstanding -= 1

    def committable(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(partition, offset) pairs that advanced since the last call; consumes the acked prefixes."""
        out = []
        for entry in self._partitions.values():
            latest = None
            while entry.queue and entry.queue[0].acked:
                latest = entry.queue.popleft().offset
            if latest is not None:
                out.append((entry.partition, latest))
        return out
