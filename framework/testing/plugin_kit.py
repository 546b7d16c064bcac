"""A test kit for plugin authors: run a connector, task, transform or sink without a broker or a worker.

Fake contexts stand in for the runtime's (:class:`FakeConnectorContext`, :class:`FakeSourceTaskContext`,
:class:`FakeSinkTaskContext`); they record what the plugin asks of the runtime (warnings,
reconfiguration requests, errors, commit requests) and own its background work as the runtime would
(:meth:`PluginContext.run_in_background`: cancelled on :meth:`close`, a crash recorded in ``errors``).
The harness drives the plugin's lifecycle in memory:

- :func:`run_source_task`: start a source task, poll until N records (or polls), acknowledge each
  record (``commit_record``), ``commit``, stop; returns the records;
- :func:`apply_transforms`: feed records through a ``transforms=...`` chain, built from a connector
  config exactly as a worker builds it (Connect's syntax, predicates, ``negate``);
- :func:`run_sink_task`: open partitions, ``put`` batches of :class:`SinkRecord`, ``flush`` /
  ``pre_commit`` the offsets, close and stop.

Kafka clients are :class:`FakeKafkaClients`: client settings translate as in a worker, and anything
that needs a broker raises :class:`~mirrorline.api.errors.ConnectError` (subclass it to answer).
See "Testing your plugin" in docs/plugin-authoring.md, and :mod:`mirrorline.testing.conformance`.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mirrorline.api.clients import Admin, BatchFetch, Consumer, KafkaClients, Producer
from mirrorline.api.context import ConnectorContext, OffsetReader, SourceTaskContext
from mirrorline.api.errors import ConnectError
from mirrorline.api.records import ConnectorTaskId, RecordMetadata, SinkRecord, SourceRecord
from mirrorline.api.task import SourceTask
from mirrorline.clients.kafka_clients import client_kwargs

try:  # sink connectors are part of the API from issue #14 on
    from mirrorline.api.sink import ErrantRecordReporter, SinkTask, SinkTaskContext, TopicPartition
except ImportError:  # pragma: no cover - an API without sinks
    SinkTask = SinkTaskContext = ErrantRecordReporter = TopicPartition = None  # type: ignore[assignment,misc]

__all__ = [
    "FakeConnectorContext", "FakeKafkaClients", "FakeOffsetReader", "FakeSinkTaskContext", "FakeSourceTaskContext",
    "SinkRun", "SourceRun", "apply_transforms", "run_sink_task", "run_source_task",
]


class FakeKafkaClients(KafkaClients):
    """Kafka clients with no broker: settings translate as in a worker; every request raises ConnectError.

    Override the methods a test needs to answer (e.g. ``admin`` returning a fake :class:`Admin`).
    """

    def _no_broker(self, what: str) -> ConnectError:
        return ConnectError(f"{what}: the plugin test kit has no Kafka broker (override "
                            f"{type(self).__name__}.{what} to answer it)")

    def admin(self, props: Mapping[str, Any]) -> Admin:
        client_kwargs(props, "admin")  # wrong security settings raise ConfigError, as in a worker
        raise self._no_broker("admin")

    def consumer(self, props: Mapping[str, Any], *, fetch_batches: BatchFetch | None = None,
                 fetch_sessions: bool = False, gather_max_wait_ms: int | None = None,
                 gather_trickle_wait_ms: int | None = None, share: str | None = None) -> Consumer:
        client_kwargs(props, "consumer")
        raise self._no_broker("consumer")

    def producer(self, props: Mapping[str, Any]) -> Producer:
        client_kwargs(props, "producer")
        raise self._no_broker("producer")

    async def security_problem(self, props: Mapping[str, Any], timeout_s: float = 10.0) -> str | None:
        return None


class FakeOffsetReader(OffsetReader):
    """Committed source offsets from a list of ``(partition, offset)`` pairs; written back by :func:`run_source_task`."""

    def __init__(self, offsets: Iterable[tuple[Mapping[str, Any], Mapping[str, Any]]] = ()):
        self._offsets: list[tuple[dict[str, Any], dict[str, Any]]] = [(dict(p), dict(o)) for p, o in offsets]

    def put(self, partition: Mapping[str, Any], offset: Mapping[str, Any]) -> None:
        """Record ``offset`` as committed for ``partition`` (replacing the previous one)."""
        self._offsets = [(p, o) for p, o in self._offsets if p != dict(partition)] + [(dict(partition), dict(offset))]

    async def offsets(self, partitions: Sequence[Mapping[str, Any]]) -> list[dict[str, Any] | None]:
        found = []
        for wanted in partitions:
            found.append(next((dict(o) for p, o in self._offsets if p == dict(wanted)), None))
        return found


class _Background:
    """``run_in_background`` as the runtime offers it: owned tasks, crashes recorded, cancelled on close."""

    def _init_background(self) -> None:
        self.errors: list[BaseException] = []
        self._tasks: set[asyncio.Task] = set()

    def run_in_background(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(self._guarded(coro, name), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _guarded(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.errors.append(exc)

    @property
    def background_tasks(self) -> list[asyncio.Task]:
        """The background tasks still running."""
        return [t for t in self._tasks if not t.done()]

    async def close(self) -> None:
        """Cancel and await the plugin's background work, as the runtime does after ``stop()``."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def raise_errors(self) -> None:
        """Raise the first error the plugin reported (``raise_error`` or a crashed background task)."""
        if self.errors:
            error = self.errors[0]
            raise AssertionError("the plugin reported an error:\n" + "".join(traceback.format_exception(error)))


class FakeConnectorContext(_Background, ConnectorContext):
    """A connector's context: records warnings, reconfiguration requests and errors instead of acting on them."""

    def __init__(self, name: str = "test-connector", offsets: OffsetReader | None = None,
                 clients: KafkaClients | None = None):
        self.name = name
        self.offsets = offsets or FakeOffsetReader()
        self.clients = clients or FakeKafkaClients()
        self.warnings: list[str] = []
        self.reconfigurations = 0
        self._init_background()

    def request_task_reconfiguration(self) -> None:
        self.reconfigurations += 1

    def report_warning(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def raise_error(self, error: BaseException) -> None:
        self.errors.append(error)


class FakeSourceTaskContext(_Background, SourceTaskContext):
    """A source task's context: its id, offsets, warnings (by key), commit requests (counted) and background work."""

    def __init__(self, task_id: ConnectorTaskId | None = None, offsets: OffsetReader | None = None,
                 clients: KafkaClients | None = None):
        self.task_id = task_id or ConnectorTaskId("test-connector", 0)
        self.offsets = offsets or FakeOffsetReader()
        self.clients = clients or FakeKafkaClients()
        self.warnings: dict[str, str] = {}
        self.commit_requests = 0
        self._init_background()

    def request_commit(self) -> None:
        self.commit_requests += 1

    def report_warning(self, message: str, key: str | None = None) -> None:
        self.warnings[message if key is None else key] = message

    def clear_warning(self, key: str) -> None:
        self.warnings.pop(key, None)


if SinkTaskContext is not None:
    class _RecordingReporter(ErrantRecordReporter):
        """Collects ``(record, error)`` pairs a sink task reports (``errors.tolerance=all``)."""

        def __init__(self) -> None:
            self.reported: list[tuple[SinkRecord, BaseException]] = []

        async def report(self, record: SinkRecord, error: BaseException) -> None:
            self.reported.append((record, error))

    class FakeSinkTaskContext(_Background, SinkTaskContext):  # type: ignore[no-redef]
        """A sink task's context: assignment, pauses, offset resets and commit requests, recorded.

        ``tolerate_errors``: whether :meth:`errant_record_reporter` gives a reporter (its
        ``reported`` list holds what the task reported) or None (``errors.tolerance=none``).
        """

        def __init__(self, task_id: ConnectorTaskId | None = None, clients: KafkaClients | None = None,
                     tolerate_errors: bool = False):
            self.task_id = task_id or ConnectorTaskId("test-connector", 0)
            self.clients = clients or FakeKafkaClients()
            self.assigned: set[TopicPartition] = set()
            self.paused: set[TopicPartition] = set()
            self.offset_resets: dict[TopicPartition, int] = {}
            self.commit_requests = 0
            self.warnings: dict[str, str] = {}
            self.reporter = _RecordingReporter() if tolerate_errors else None
            self._init_background()

        def assignment(self) -> frozenset[TopicPartition]:
            return frozenset(self.assigned)

        def pause(self, *partitions: TopicPartition) -> None:
            self.paused.update(partitions)

        def resume(self, *partitions: TopicPartition) -> None:
            self.paused.difference_update(partitions)

        def offset(self, offsets: dict[TopicPartition, int]) -> None:
            self.offset_resets.update(offsets)

        def request_commit(self) -> None:
            self.commit_requests += 1

        def errant_record_reporter(self) -> ErrantRecordReporter | None:
            return self.reporter

        def report_warning(self, message: str, key: str | None = None) -> None:
            self.warnings[message if key is None else key] = message

        def clear_warning(self, key: str) -> None:
            self.warnings.pop(key, None)
else:  # pragma: no cover
    FakeSinkTaskContext = None  # type: ignore[assignment,misc]


# ---------------------------------------------------------------------------------------------
# The in-memory harness


@dataclass
class SourceRun:
    """What :func:`run_source_task` saw: the records polled, in order, and the context the task had."""

    records: list[SourceRecord]
    context: FakeSourceTaskContext
    polls: int


async def run_source_task(task: SourceTask | type[SourceTask], config: Mapping[str, str], *, records: int = 1,
                          max_polls: int = 100, context: FakeSourceTaskContext | None = None,
                          timeout_s: float = 10.0) -> SourceRun:
    """Start ``task`` with ``config``, poll until ``records`` records (or ``max_polls`` polls), acknowledge
    each record as written (``commit_record`` with made-up metadata), ``commit``, then stop.

    Offsets of acknowledged records go to the context's :class:`FakeOffsetReader`, so running the
    task again with the same context resumes as after a worker restart. A crash of the task's
    background work fails the run (AssertionError with the trace).
    """
    task = task() if isinstance(task, type) else task
    context = context or FakeSourceTaskContext()
    task.initialize(context)
    polled: list[SourceRecord] = []
    polls = 0
    async with asyncio.timeout(timeout_s):
        await task.start(dict(config))
    try:
        deadline = time.monotonic() + timeout_s
        while len(polled) < records and polls < max_polls and time.monotonic() < deadline:
            async with asyncio.timeout(timeout_s):
                batch = await task.poll() or []
            polls += 1
            for offset, record in enumerate(batch, start=len(polled)):
                metadata = RecordMetadata(record.topic, record.partition or 0, offset, record.timestamp or 0)
                await task.commit_record(record, metadata)
                if record.source_partition is not None and record.source_offset is not None:
                    offsets = context.offsets
                    if isinstance(offsets, FakeOffsetReader):
                        offsets.put(record.source_partition, record.source_offset)
            polled.extend(batch)
            context.raise_errors()
        await task.commit()
    finally:
        async with asyncio.timeout(timeout_s):
            await task.stop()
        await context.close()
    context.raise_errors()
    return SourceRun(polled, context, polls)


def apply_transforms(records: Iterable[SourceRecord | SinkRecord], config: Mapping[str, Any],
                     plugins: Any = None) -> list[SourceRecord | SinkRecord]:
    """``records`` through the chain ``config`` declares (``transforms=...``, ``predicates=...``), in order;
    dropped records are left out. ``plugins``: a :class:`~mirrorline.plugins.PluginRegistry` (default: the
    installed plugins). A bad chain raises ConfigError as a worker would; a failing transform raises."""
    from mirrorline.plugins import PluginRegistry
    from mirrorline.runtime.transform_chain import build_chain

    chain = build_chain(dict(config), plugins or PluginRegistry.discover())
    if chain is None:
        return list(records)
    try:
        out = []
        for record in records:
            result = chain.apply(record)
            if result is not None:
                out.append(result)
        return out
    finally:
        chain.close()


@dataclass
class SinkRun:
    """What :func:`run_sink_task` did: the offsets it committed per partition, and the context."""

    committed: dict[Any, int] = field(default_factory=dict)
    context: Any = None


async def run_sink_task(task: Any, config: Mapping[str, str], batches: Iterable[Sequence[SinkRecord]], *,
                        context: Any = None, timeout_s: float = 10.0) -> SinkRun:
    """Start a sink task, ``open`` the partitions the records come from, ``put`` each batch, then
    ``pre_commit`` (which flushes by default) the next offsets and commit what it returns, ``close``
    and ``stop`` — the order a worker uses. Returns the offsets committed (next offset to read)."""
    if SinkTask is None:  # pragma: no cover
        raise RuntimeError("this mirrorline.api has no sink connectors")
    task = task() if isinstance(task, type) else task
    context = context or FakeSinkTaskContext()
    batches = [list(batch) for batch in batches]
    partitions = sorted({TopicPartition(r.topic, r.partition) for batch in batches for r in batch})
    task.initialize(context)
    async with asyncio.timeout(timeout_s):
        await task.start(dict(config))
    run = SinkRun(context=context)
    try:
        context.assigned.update(partitions)
        async with asyncio.timeout(timeout_s):
            await task.open(partitions)
        positions: dict[Any, int] = {}
        for batch in batches:
            async with asyncio.timeout(timeout_s):
                await task.put(batch)
            for record in batch:
                tp = TopicPartition(record.topic, record.partition)
                positions[tp] = max(positions.get(tp, 0), record.offset + 1)
            context.raise_errors()
        async with asyncio.timeout(timeout_s):
            committed = await task.pre_commit(dict(positions))
        run.committed = dict(committed or {})
        async with asyncio.timeout(timeout_s):
            await task.close(partitions)
        context.assigned.difference_update(partitions)
    finally:
        async with asyncio.timeout(timeout_s):
            await task.stop()
        await context.close()
    context.raise_errors()
    return run
