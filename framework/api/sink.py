"""The sink half of the contract: a sink task receives records consumed from Kafka and writes them out.

Lifecycle, as the runtime drives it (all on the worker's event loop; the runtime never calls
two of these methods of one task at the same time):

1. Instantiated with no arguments, then ``initialize(context)``.
2. ``await start(config)`` with one of the maps the connector's ``task_configs`` returned,
   plus the connector's ``topics`` / ``topics.regex`` (as Connect adds them).
3. ``await open(partitions)`` when the consumer group assigns partitions to the task, before
   any of their records reaches ``put``; ``await close(partitions)`` when they are taken away
   (a rebalance, or the task stopping), after their offsets were committed. Keep per-partition
   writers here.
4. ``await put(records)`` with each batch consumed, in offset order per partition. Write them
   or buffer them; raise :class:`~mirrorline.api.errors.RetriableError` to have the runtime
   call ``put`` again with the *same* batch after a back-off (Connect's
   ``RetriableException``). Any other exception fails the task (state FAILED, with its trace).
5. Every ``offset.flush.interval.ms``, when the task calls ``context.request_commit()``, before
   partitions are revoked and on stop: ``offsets = await pre_commit(offsets)``. The default
   calls ``await flush(offsets)`` and returns ``offsets``; the runtime then commits the returned
   offsets to the group ``connect-<connector name>``. If ``pre_commit`` raises, nothing is
   committed and the consumer is rewound to the last committed offsets, so the records after
   them are delivered again.
6. ``await stop()`` once, when the task is stopped, after the last commit and ``close``.

Guarantees: at-least-once. An offset is committed only after ``pre_commit`` (``flush``)
returned it, so a record is never skipped; after a crash or a rebalance, records after the last
commit are delivered again (to this task or another). Records of one partition arrive in order.

Offsets are the *next* offset to consume (Kafka's committed offset): ``record.offset + 1`` for
the last record written. ``pre_commit`` may return fewer partitions or smaller offsets (a sink
that writes asynchronously returns what is durable); it must never return larger ones.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from mirrorline.api.context import PluginContext
from mirrorline.api.kafka import TopicPartition
from mirrorline.api.records import ConnectorTaskId, SinkRecord

__all__ = ["ErrantRecordReporter", "SinkTask", "SinkTaskContext", "TopicPartition"]


class ErrantRecordReporter(ABC):
    """Sends a record the task could not write to the connector's dead-letter queue (Connect's reporter).

    Obtained from :meth:`SinkTaskContext.errant_record_reporter`; None when the connector's errors
    are neither tolerated (``errors.tolerance=all``), logged (``errors.log.enable``) nor sent to a
    dead-letter queue (``errors.deadletterqueue.topic.name``), so check before use.
    """

    @abstractmethod
    async def report(self, record: SinkRecord, error: BaseException) -> None:
        """Report ``record`` as failed with ``error``: logged, counted, and written to the DLQ topic.

        The DLQ gets the bytes originally consumed for ``record`` (key, value, headers), with
        ``__connect.errors.*`` context headers when enabled. Returns once the report is sent.
        With ``errors.tolerance=none`` it raises, and the task fails.
        """


class SinkTaskContext(PluginContext):
    """Handed to a sink task in ``initialize``; valid until the task is stopped."""

    #: This task's identity.
    task_id: ConnectorTaskId

    @abstractmethod
    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions assigned to this task now (they change on rebalances)."""

    @abstractmethod
    def pause(self, *partitions: TopicPartition) -> None:
        """Stop fetching from ``partitions`` (e.g. while the target is slow) until :meth:`resume`.

        The task stays in the group and keeps its partitions; a pause outlives a rebalance
        that gives the partition back to this task.
        """

    @abstractmethod
    def resume(self, *partitions: TopicPartition) -> None:
        """Fetch again from partitions paused with :meth:`pause`."""

    @abstractmethod
    def offset(self, offsets: dict[TopicPartition, int]) -> None:
        """Rewind or skip: consume ``partition`` from ``offset`` next (Connect's ``offset(Map)``).

        Useful in ``open`` for a sink that stores its own offsets in the target system. Takes
        effect before the next batch; records already in the batch being ``put`` are not recalled.
        """

    @abstractmethod
    def request_commit(self) -> None:
        """Ask for ``pre_commit`` and an offset commit soon, without waiting for the flush interval."""

    @abstractmethod
    def errant_record_reporter(self) -> ErrantRecordReporter | None:
        """The reporter for records ``put`` cannot write, or None when error handling is not configured."""

    def report_warning(self, message: str, key: str | None = None) -> None:
        """Show a condition in the task's status (``"warnings"``) without failing it; see SourceTaskContext."""

    def clear_warning(self, key: str) -> None:
        """Remove the warning reported under ``key``."""


class SinkTask(ABC):
    """Writes records consumed from Kafka to a target system."""

    context: SinkTaskContext

    def version(self) -> str:
        """The task's version string."""
        return "unknown"

    def initialize(self, context: SinkTaskContext) -> None:
        """Receive the context; called once, before ``start``."""
        self.context = context

    @abstractmethod
    async def start(self, config: dict[str, str]) -> None:
        """Prepare to write: parse the config, open connections to the target."""

    async def open(self, partitions: Iterable[TopicPartition]) -> None:
        """Partitions were assigned to this task; their records follow. Optional."""

    @abstractmethod
    async def put(self, records: list[SinkRecord]) -> None:
        """Write (or buffer) ``records``; may be empty. RetriableError: called again with the same batch."""

    async def flush(self, offsets: dict[TopicPartition, int]) -> None:
        """Make everything ``put`` so far durable in the target; raise if that is not possible. Optional."""

    async def pre_commit(self, offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """The offsets safe to commit: by default ``flush(offsets)``, then ``offsets`` unchanged."""
        await self.flush(offsets)
        return offsets

    async def close(self, partitions: Iterable[TopicPartition]) -> None:
        """Partitions were taken from this task (their offsets are committed): drop their writers. Optional."""

    @abstractmethod
    async def stop(self) -> None:
        """Release resources. ``put`` is not running when this is called."""
