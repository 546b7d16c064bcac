"""The task half of the contract: a source task moves data, nothing else.

Lifecycle, as the runtime drives it (all on the worker's event loop; apart from
``commit_record``, the runtime never calls two of these methods of one task at the same time):

1. Instantiated with no arguments, then ``initialize(context)``.
2. ``await start(config)`` with one of the maps the connector's ``task_configs`` returned.
   Read committed offsets here (``await self.context.offsets.offsets([...])``).
3. ``await poll()`` in a loop. Return the records available now, or ``[]`` when there are
   none: "no data" is an empty list, never None. Waiting inside ``poll`` for data is fine,
   but return within about a second so pause and stop are prompt; the runtime may cancel a
   ``poll`` that is still waiting when the task stops, so never swallow ``CancelledError``.
   Raising :class:`~mirrorline.api.errors.RetriableError` makes the runtime call ``poll``
   again after a back-off; any other exception fails the task (state FAILED, with its
   trace) and leaves the connector's other tasks running.
4. As soon as Kafka acknowledges a record, ``await commit_record(record, metadata)``, on its
   own coroutine: it may run while ``poll`` is waiting (as Connect calls ``commitRecord`` from
   the producer's callback), so keep it short and do not share unguarded state with ``poll``
   across an ``await``. Calls are sequential, and records of one Kafka partition are
   acknowledged in the order ``poll`` returned them. A record a transform dropped gets
   ``commit_record(record, None)`` once the records before it of its source partition are done.
   A :class:`~mirrorline.api.records.SourceBatch` gets ``commit_batch(batch, metadata)`` instead,
   with the offset Kafka gave its first record.
5. After the runtime has stored source offsets (every ``offset.flush.interval.ms``),
   ``await commit()``. Offsets are stored only for records Kafka acknowledged, and for a
   partition only up to the first unacknowledged record, so a restart never skips one.
6. ``await stop()`` once, when the task is stopped; the runtime then flushes what was
   acknowledged. Not guaranteed to be called if the process is killed: after a crash, the
   task restarts from the last stored offsets, and records after them are written again
   (at-least-once).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

from mirrorline.api.records import RecordMetadata, SourceBatch, SourceRecord

if TYPE_CHECKING:
    from mirrorline.api.context import SourceTaskContext


class SourceTask(ABC):
    """Reads from a source system and returns records for the runtime to write to Kafka."""

    context: SourceTaskContext

    def version(self) -> str:
        """The task's version string."""
        return "unknown"

    def initialize(self, context: SourceTaskContext) -> None:
        """Receive the context; called once, before ``start``."""
        self.context = context

    @abstractmethod
    async def start(self, config: dict[str, str]) -> None:
        """Prepare to poll: open clients, read committed offsets, seek."""

    @abstractmethod
    async def poll(self) -> list[SourceRecord | SourceBatch]:
        """The next records to write, or ``[]``.

        :class:`~mirrorline.api.records.SourceBatch` items (whole record batches) are allowed only
        while ``self.context.accepts_batches`` is true; records and batches of one partition
        are written in the order returned. The runtime takes the returned list over: it lets go of
        each item as it hands it to the producer (so what a poll returned is not all held until its
        last item is written), so a task must not keep the list or reuse it.
        """

    async def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        """Called once Kafka has acknowledged ``record``; ``metadata`` says where it landed. Optional.

        ``record`` is the record as ``poll`` returned it, before any transform. ``metadata`` is
        ``None`` when a transform dropped the record (Connect passes null then too): it was not
        written, but it is done, and its offset is committed in its turn.
        """

    async def commit_batch(self, batch: SourceBatch, metadata: RecordMetadata) -> None:
        """Called once Kafka has acknowledged a ``SourceBatch``. Optional.

        ``metadata.offset`` is the offset of the batch's first record; its ``i``-th record is at
        ``metadata.offset + i``. Runs on the same coroutine as ``commit_record``, in ack order.
        """

    async def commit(self) -> None:
        """Called after the runtime has stored source offsets. Optional."""

    def pending_records(self) -> int | None:
        """How many records are known to wait upstream for this task (its lag), or None if unknown.

        Optional. The runtime's stall watchdog uses it to tell an idle task from a stuck one: a
        task that reports pending records but has had nothing acknowledged for
        ``task.stall.timeout.ms`` is flagged in its status and metrics. Must be cheap and must
        not block: it is called from the runtime's own coroutine.
        """
        return None

    @abstractmethod
    async def stop(self) -> None:
        """Release resources. ``poll`` is not running when this is called."""
