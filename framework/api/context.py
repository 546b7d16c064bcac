"""Context objects: a plugin's only way back into the runtime. Each one is deliberately small.

Connectors and tasks never receive the worker, the herder or a store. What they may ask of
the runtime is listed here; anything new is added as a method on a context, so existing
plugins keep working.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any

from mirrorline.api.clients import KafkaClients
from mirrorline.api.records import ConnectorTaskId


class OffsetReader(ABC):
    """Reads the source offsets the runtime has committed for this connector."""

    @abstractmethod
    async def offsets(self, partitions: Sequence[Mapping[str, Any]]) -> list[dict[str, Any] | None]:
        """The committed offset of each source partition, in the order asked; None where there is none.

        Partitions compare by value (key order does not matter). Offsets are those of
        records already acknowledged by Kafka and flushed to the offset store; records
        written after the last flush are not reflected.
        """

    async def offset(self, partition: Mapping[str, Any]) -> dict[str, Any] | None:
        """The committed offset of one source partition, or None."""
        return (await self.offsets([partition]))[0]


class PluginContext(ABC):
    """What every context offers (connector, source task, sink task): Kafka clients and background work."""

    #: Builds Kafka clients from client settings and runs the admin requests the runtime knows
    #: (see :class:`~mirrorline.api.clients.KafkaClients`). Connectors never import the runtime's
    #: client helpers; they ask this.
    clients: KafkaClients

    def run_in_background(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task:
        """Run ``coro`` (a loop the plugin needs besides its own calls) as a task the runtime owns.

        The runtime cancels and awaits it when the connector or task stops (after ``stop()``
        returns), so ``stop`` need not. If it raises, the connector or task is marked FAILED
        with the trace (logged and counted), as if ``start`` had failed; returning normally just
        ends it. The returned task may be cancelled early by the plugin (that is not a failure).

        API addition: contexts written before it raise NotImplementedError.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot run background work")


class ConnectorContext(PluginContext):
    """Handed to a connector in ``initialize``; valid until the connector is stopped."""

    #: The connector's name, as the user gave it.
    name: str
    #: Committed source offsets of this connector's tasks (e.g. to plan task splits).
    offsets: OffsetReader

    @abstractmethod
    def request_task_reconfiguration(self) -> None:
        """Ask the runtime to call ``task_configs`` again and restart tasks if the result changed.

        Call it when the work to split changes (new topics, new partitions). Returns at once;
        the runtime does the reconfiguration on its own coroutine shortly after. Requests made
        while one is pending are merged.
        """

    def report_warning(self, message: str) -> None:
        """Show a condition the user should act on, without failing the connector.

        The message appears (once, however often it is reported) in the connector's status as
        ``"warnings": [...]`` — an addition to Kafka Connect's status shape, which clients that
        do not know it ignore — until the connector is restarted or reconfigured. Example: a
        topic that cannot be mirrored because its remote name would be too long.
        """

    @abstractmethod
    def raise_error(self, error: BaseException) -> None:
        """Report a fatal error found in the background: the connector is marked FAILED with its trace.

        The runtime stops the connector. Tasks already running are left running, as
        Kafka Connect does; a restart of the connector clears the failure.
        """

    # -- bulk jobs (API addition: contexts written before it answer "none" / raise NotImplementedError) --
    def partitions_held_by_jobs(self) -> list[tuple[dict[str, Any], str]]:
        """``(source partition, job name)`` for each of this connector's partitions a bulk job holds.

        A job submitted with ``"connector": <this connector>`` (``POST /jobs``, or
        :meth:`submit_job`) holds the source partitions it writes from when it is accepted until
        it has handed them back (it succeeded, or was cancelled and handed over what it
        copied); a failed job keeps them until it is deleted or succeeds on a rerun. A connector
        whose ``task_configs`` leaves these partitions out, and whose
        :meth:`~mirrorline.api.connector.SourceConnector.task_partitions` says which partitions
        a task reads, can hand partitions to jobs while it runs. The runtime asks for new task
        configs (``task_configs``) whenever this list changes.
        """
        return []

    async def submit_job(self, name: str, config: Mapping[str, str]) -> None:
        """Submit a bulk job bound to this connector, as ``POST /jobs`` with ``"connector": <this connector>``.

        ``config`` holds ``job.class`` and the job's settings. Raises
        :class:`~mirrorline.api.errors.AlreadyExistsError` when a job of that name exists, and
        ConfigError/BadRequestError for bad settings or partitions another job holds. Returns
        once the job is recorded; it then runs on a worker the cluster picks.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot submit jobs")

    def job_status(self, name: str) -> dict[str, Any] | None:
        """A job's status as ``GET /jobs/{name}`` shows it (None when there is no such job)."""
        return None

    async def remove_job(self, name: str) -> None:
        """Remove a finished job (as ``DELETE /jobs/{name}``); a running one is cancelled first."""
        raise NotImplementedError(f"{type(self).__name__} cannot remove jobs")


class TransactionContext(ABC):
    """How a source task defines transaction boundaries itself (Connect's ``TransactionContext``).

    Offered as ``context.transaction_context`` only when the worker writes in transactions
    (``exactly.once.source.support=enabled``) and the connector is configured with
    ``transaction.boundary=connector``; otherwise that attribute is None. Requests take effect
    once the records ``poll`` returned so far have been handed to the producer: without a record,
    after the current ``poll`` batch; with a record, right after that record. A commit writes the
    records and their source offsets atomically; an abort drops the records of the transaction
    but still commits their source offsets, so they are not read again (as Connect does).
    """

    @abstractmethod
    def commit_transaction(self, record: Any = None) -> None:
        """Commit the open transaction after ``record`` (a SourceRecord ``poll`` returned), or after the current batch."""

    @abstractmethod
    def abort_transaction(self, record: Any = None) -> None:
        """Abort the open transaction after ``record``, or after the current batch; its offsets still commit."""


class SourceTaskContext(PluginContext):
    """Handed to a source task in ``initialize``; valid until the task is stopped."""

    #: This task's identity.
    task_id: ConnectorTaskId
    #: Committed source offsets, to resume from on start.
    offsets: OffsetReader
    #: Whether ``poll`` may return :class:`~mirrorline.api.records.SourceBatch` items: true when the
    #: connector has no transform and only pass-through (ByteArray) converters, so whole record
    #: batches can be written as they are. Beyond Connect; False for contexts that predate it.
    accepts_batches: bool = False
    #: Whether the runtime writes this task's records and source offsets in Kafka transactions
    #: (a distributed worker with ``exactly.once.source.support=enabled``): a restarted task then
    #: resumes exactly after what was committed. Beyond Connect, which does not tell tasks.
    exactly_once: bool = False
    #: A name to pass as ``share`` to :meth:`~mirrorline.api.clients.KafkaClients.consumer`: the
    #: connector's tasks in this worker process then read through one consumer, one fetch per
    #: broker for all of them (beyond Connect). Set per connector when ``tasks.share.clients``
    #: is true; None otherwise (the default), and for contexts that predate it.
    client_share: str | None = None
    #: Set when the connector defines its own transaction boundaries (``transaction.boundary=connector``
    #: under exactly-once); None otherwise. See :class:`TransactionContext`.
    transaction_context: TransactionContext | None = None

    def report_warning(self, message: str, key: str | None = None) -> None:
        """Show a condition the user should act on in the task's status, without failing the task.

        The message appears in the task's status as ``"warnings": [...]`` (an addition to
        Kafka Connect's status shape) until :meth:`clear_warning` is called with the same
        ``key`` (default: the message itself) or the task restarts. Reporting the same key
        again replaces its message. Example: a source partition whose records were deleted
        by retention before they were copied.
        """

    def clear_warning(self, key: str) -> None:
        """Remove the warning reported under ``key`` (nothing happens if there is none)."""

    def request_commit(self) -> None:
        """Ask the runtime to store this task's source offsets soon, then call ``commit()``, instead of
        waiting for the next ``offset.flush.interval.ms`` (beyond Connect, where only sink tasks can ask).

        For a task that has just caught up after a backlog: what it copied is then committed, and so
        is whatever the task does in ``commit()``, up to a flush interval sooner. The periodic flush
        goes on counting from the requested one. Requests closer together than a second are served by
        one flush; asking on every poll defeats the interval, so ask when something was achieved.
        Under exactly-once (``context.exactly_once``) the open transaction is committed at the next
        poll when ``transaction.boundary`` is ``interval``; with ``poll`` every poll commits anyway, and
        with ``connector`` the task's :class:`TransactionContext` decides, so the request does nothing.
        Contexts that predate it ignore it; the periodic flush still comes.
        """
