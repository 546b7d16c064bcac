"""WorkerSinkTask: runs one SinkTask — consume, convert, transform, put, commit — under supervision.

Delivery: one consumer per task in the group ``connect-<connector name>`` (auto commit off,
``auto.offset.reset=earliest`` as in Connect). Each batch goes through the converters and the
transform chain, then to ``put``. Offsets are committed only for records ``put`` accepted,
and only after ``pre_commit`` (by default ``flush``) returned them: every
``offset.flush.interval.ms``, when the task asks (``context.request_commit()``), before
partitions are revoked, and on stop. A crash therefore re-delivers at most the records after
the last commit: at-least-once. A ``pre_commit`` that raises commits nothing and rewinds the
consumer to the last committed offsets, as Connect does.

Rebalances: the group consumer calls the listener from its coordinator's coroutine, which runs beside
the poll loop. One lock serialises them, so a batch is never half ``put`` when its partitions
are revoked, and records of a partition taken away while they were fetched are dropped (the
new owner reads them from the committed offset).

Errors: a converter or transform failing on a record goes through the connector's error
handler (``errors.tolerance``: retried, then skipped and reported to the dead-letter queue, or
the task fails with the record's topic, partition and offset). ``put`` raising
:class:`~mirrorline.api.errors.RetriableError` is retried with the same batch after a back-off,
the partitions paused meanwhile so the group still sees the task polling; anything else fails
the task (FAILED with its trace, logged and counted by the Worker). The task is RUNNING only
while its loop runs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from mirrorline.api.errors import ConnectError, RetriableError
from mirrorline.api.records import ConnectorTaskId, SinkRecord
from mirrorline.api.sink import ErrantRecordReporter, SinkTask, TopicPartition
from mirrorline.clients.consumer import GroupConsumer, RebalanceListener
from mirrorline.runtime import metrics
from mirrorline.runtime.bounded import bounded
from mirrorline.runtime.context import WorkerSinkTaskContext
from mirrorline.runtime.converters import RecordConverters
from mirrorline.runtime.error_handling import SKIP, ErrorHandler, Stage
from mirrorline.runtime.sink_config import topics_pattern
from mirrorline.runtime.transform_chain import TransformChain
from mirrorline.runtime.task_runner import CLOSE_NOW_TIMEOUT_S, RETRY_BACKOFF_MAX_S, RETRY_BACKOFF_S, FailureCallback, \
    StatusCallback, TaskRunner
from mirrorline.storage.status import State

log = logging.getLogger(__name__)

#: Longest wait for records in one poll, so pause, stop and commits stay prompt.
POLL_TIMEOUT_MS = 500
#: Kafka's names of a record's timestamp type, by the client's code (-1: none).
TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime", -1: "NoTimestampType"}


class SinkPutError(ConnectError):
    """``put`` raised something other than RetriableError: the task fails, naming the batch."""


def position(record: SinkRecord) -> str:
    """A consumed record's place in Kafka, for error messages."""
    return f"topic {record.topic} partition {record.partition} offset {record.offset}"


class _Listener(RebalanceListener):
    """Hands the group consumer's rebalance callbacks to the task runner."""

    def __init__(self, runner: WorkerSinkTask):
        self._runner = runner

    async def on_partitions_revoked(self, revoked) -> None:
        await self._runner.partitions_revoked(revoked)

    async def on_partitions_assigned(self, assigned) -> None:
        await self._runner.partitions_assigned(assigned)


class WorkerSinkTask(TaskRunner):
    """Drives one sink task from start to stop and reports its state through the callbacks.

    ``converters`` None (or pass-through) runs no converter code; ``error_handler`` defaults to
    ``errors.tolerance=none`` without reporters.
    """

    def __init__(self, task_id: ConnectorTaskId, task: SinkTask, config: dict[str, str], *,
                 consumer_kwargs: dict[str, Any], topics: list[str], topics_regex: str | None,
                 on_status: StatusCallback, on_failure: FailureCallback, flush_interval_s: float,
                 start_timeout_s: float = 60.0, transforms: TransformChain | None = None,
                 converters: RecordConverters | None = None, error_handler: ErrorHandler | None = None,
                 on_topic: Callable[[str, str], None] | None = None,
                 consumer_factory: Callable[[dict[str, Any]], Any] = GroupConsumer):
        super().__init__(task_id, task, config, on_status=on_status, on_failure=on_failure,
                         flush_interval_s=flush_interval_s, start_timeout_s=start_timeout_s, on_topic=on_topic,
                         transforms=transforms, converters=converters, errors=error_handler)
        self._consumer_kwargs = consumer_kwargs
        self._topics = list(topics)
        self._topics_regex = topics_regex or None
        settings = self._errors.settings
        #: Connect's errant record reporter exists only when errors are tolerated, logged or sent to a DLQ
        self._reporter = _ErrantReporter(self) if (self._errors.tolerates_all or settings.log_enable
                                                   or settings.dlq_topic) else None
        #: the consumed (unconverted) record behind each record of the batch being put, by identity
        self._originals: dict[int, SinkRecord] = {}
        self._consumer_factory = consumer_factory
        self._consumer: Any = None
        #: serialises the poll loop's put/commit with the rebalance callbacks
        self._lock = asyncio.Lock()
        self._assigned: set[TopicPartition] = set()
        #: next offset to consume per partition, for records put; and the last committed
        self._offsets: dict[TopicPartition, int] = {}
        self._committed: dict[TopicPartition, int] = {}
        self._resets: dict[TopicPartition, int] = {}
        self._context_paused: set[TopicPartition] = set()
        self._paused = False
        self._commit_requested = False
        self._next_commit = time.monotonic() + flush_interval_s
        self._started = False
        self._seen_topics: set[str] = set()

    # -- lifecycle -----------------------------------------------------------------------
    async def start(self, paused: bool = False) -> None:
        """Start the consumer and the task, subscribe, then run the poll loop; failures go to ``on_failure``."""
        self._paused = paused
        try:
            self._consumer = self._consumer_factory(
                {"auto_offset_reset": "earliest", **self._consumer_kwargs,
                 "group_id": f"connect-{self.id.connector}", "enable_auto_commit": False})
            await bounded(self._consumer.start(), self._start_timeout_s, f"Task {self.id}: starting its consumer")
            await bounded(self._errors.start(), self._start_timeout_s, f"Task {self.id}: starting its error reporters")
            self._context = WorkerSinkTaskContext(self, self.warnings, clients=self.clients)
            self.task.initialize(self._context)
            config = dict(self.config)
            if self._topics:  # Connect hands the task its connector's topics too
                config.setdefault("topics", ",".join(self._topics))
            if self._topics_regex:
                config.setdefault("topics.regex", self._topics_regex)
            await bounded(self.task.start(config), self._start_timeout_s, f"Task {self.id}: start()")
            self._started = True
            if self._topics_regex:
                self._consumer.subscribe(_Listener(self), pattern=topics_pattern(self._topics_regex))
            else:
                self._consumer.subscribe(_Listener(self), topics=self._topics)
        except Exception as exc:
            self._fail(exc)
            return
        metrics.TASK_RUNNING.labels(*self._labels).set(1)
        await self._on_status(self.id, State.PAUSED if paused else State.RUNNING, None)
        self._background.spawn(self._supervised(self._poll_loop, "poll"), "poll")

    async def pause(self) -> None:
        """Stop fetching (the task stays in the group and keeps its partitions) until resumed."""
        if not self.failed:
            self._paused = True
            self._pause_all()
            await self._on_status(self.id, State.PAUSED, None)

    async def resume(self) -> None:
        """Fetch again after a pause (partitions the task itself paused stay paused)."""
        if not self.failed:
            self._paused = False
            self._resume_all()
            await self._on_status(self.id, State.RUNNING, None)

    async def stop(self, timeout: float = 10.0) -> None:
        """Stop the loop, commit what was put (after ``pre_commit``), close partitions, stop task and consumer."""
        await self._stop_loops(timeout)
        if self._consumer is not None and self._started:
            async with self._lock:
                revoked, self._assigned = set(self._assigned), set()
                if revoked and not self.failed:
                    await self._commit(revoked)
                if revoked:
                    await self._call_task("close", self.task.close(sorted(revoked)), timeout)
        if self._started:
            self._started = False
            await self._call_task("stop", self.task.stop(), timeout)
        await self._close_pipeline(timeout)
        if self._consumer is not None:
            try:
                await bounded(self._consumer.stop(), timeout, f"Task {self.id}: stopping its consumer")
            except Exception as exc:
                log.warning("Task %s: its consumer did not stop cleanly: %r", self.id, exc)
            self._consumer = None
        for gauge in (metrics.TASK_RUNNING, metrics.TASK_RETRYING):
            gauge.labels(*self._labels).set(0)

    async def release_clients(self) -> None:
        """After an abandoned stop: close the group consumer at once (leaving the group is waited for
        a few seconds at most; the group's session timeout ends the membership otherwise), then the
        clients the task opened through its context."""
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                await consumer.close_now(CLOSE_NOW_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - the context's clients are closed all the same
                log.warning("Task %s: its consumer did not close: %r", self.id, exc)
        await super().release_clients()

    def forget_topics(self) -> None:
        """Forget which topics this task consumed (topic-tracking reset)."""
        self._seen_topics.clear()

    # -- the context's requests ------------------------------------------------------------
    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions assigned now."""
        return frozenset(self._assigned)

    def pause_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        """The task asked to stop fetching ``partitions``."""
        partitions = {TopicPartition(*tp) for tp in partitions}
        self._context_paused |= partitions
        assigned = partitions & self._assigned
        if assigned and self._consumer is not None:
            self._consumer.pause(*assigned)

    def resume_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        """The task asked to fetch ``partitions`` again."""
        partitions = {TopicPartition(*tp) for tp in partitions}
        self._context_paused -= partitions
        assigned = partitions & self._assigned
        if assigned and self._consumer is not None and not self._paused:
            self._consumer.resume(*assigned)

    def reset_offsets(self, offsets: dict[TopicPartition, int]) -> None:
        """The task asked to consume from these offsets next; applied before the next fetch."""
        self._resets.update({TopicPartition(*tp): int(offset) for tp, offset in offsets.items()})

    def request_commit(self) -> None:
        """The task asked for a commit at the next chance."""
        self._commit_requested = True

    def errant_record_reporter(self) -> ErrantRecordReporter | None:
        """The runtime's reporter for records ``put`` cannot write, or None."""
        return self._reporter

    def original_of(self, record: SinkRecord) -> SinkRecord:
        """The record as consumed (bytes, its own topic) behind a record of the batch being put."""
        return self._originals.get(id(record), record)

    # -- the loop --------------------------------------------------------------------------
    async def _poll_loop(self) -> None:
        while True:
            self._apply_resets()
            batch = await self._consumer.getmany(timeout_ms=POLL_TIMEOUT_MS)
            async with self._lock:
                # a partition revoked (or rewound) since the fetch: its records are not ours to put
                messages = [m for tp, ms in batch.items() if tp in self._assigned and tp not in self._resets
                            for m in ms]
                await self._deliver(messages)
                if self._commit_requested or time.monotonic() >= self._next_commit:
                    await self._commit(set(self._assigned))

    async def _deliver(self, messages: list[Any]) -> None:
        """Convert and transform ``messages``, ``put`` the result, then count them as consumed."""
        records = []
        for message in messages:
            original = SinkRecord(message.topic, message.partition, message.offset, message.key, message.value,
                                  list(message.headers or ()), message.timestamp,
                                  TIMESTAMP_TYPES.get(message.timestamp_type, "CreateTime"))
            record = await self._prepare(original)
            if record is not None:
                records.append(record)
                self._originals[id(record)] = original
        try:
            await self._put(records)
        finally:
            self._originals.clear()
        for message in messages:
            self._offsets[TopicPartition(message.topic, message.partition)] = message.offset + 1
            if message.topic not in self._seen_topics:
                self._seen_topics.add(message.topic)
                if self._on_topic is not None:
                    self._on_topic(self.id.connector, message.topic)

    async def _prepare(self, original: SinkRecord) -> SinkRecord | None:
        """The record ``put`` gets for one consumed record, or None when a transform dropped it or the
        error handler skipped it (``errors.tolerance=all``: reported, counted, sent to the DLQ)."""
        record: Any = original
        if self._converters is not None:
            record = await self._errors.execute(Stage.VALUE_CONVERTER, lambda: self._converters.to_data(original),
                                                original)  # the converters' StageError names the exact stage
            if record is SKIP:
                return None
        for stage in self._chain.stages if self._chain is not None else ():
            record = await self._errors.execute(Stage.TRANSFORMATION, lambda r=record, s=stage: s.apply(r), original,
                                                type(stage.transformation))
            if record is None or record is SKIP:
                return None
        return record

    async def _put(self, records: list[SinkRecord]) -> None:
        """``put`` the batch; RetriableError retries the same batch after a back-off, other errors fail."""
        backoff = RETRY_BACKOFF_S
        while True:
            try:
                await self.task.put(records)
                break
            except asyncio.CancelledError:
                raise
            except RetriableError as exc:
                log.warning("Task %s: put() failed with a retriable error, retrying the same %d records in %.0fs: "
                            "%r", self.id, len(records), backoff, exc)
                self._set_retrying(f"put() is retrying after a retriable error: {exc!r}")
                await self._wait_paused(backoff)
                backoff = min(backoff * 2, RETRY_BACKOFF_MAX_S)
            except Exception as exc:
                where = f" (from {position(records[0])} to {position(records[-1])})" if records else ""
                raise SinkPutError(f"Task {self.id}: put() of {len(records)} records{where} raised: {exc!r}. "
                                   f"Nothing after the last commit is committed; the records are delivered "
                                   f"again when the task restarts") from exc
        self._set_retrying(None)

    async def _wait_paused(self, seconds: float) -> None:
        """Wait with every partition paused, still polling, so the group keeps this member."""
        self._pause_all()
        try:
            deadline = time.monotonic() + seconds
            while (left := deadline - time.monotonic()) > 0:
                stray = await self._consumer.getmany(timeout_ms=int(min(left, POLL_TIMEOUT_MS / 1000) * 1000))
                for tp, ms in stray.items():  # never expected while paused; fetch them again later
                    if ms:
                        self._consumer.seek(tp, ms[0].offset)
        finally:
            if not self._paused:
                self._resume_all()

    def _pause_all(self) -> None:
        if self._consumer is not None and self._assigned:
            self._consumer.pause(*self._assigned)

    def _resume_all(self) -> None:
        if self._consumer is not None:
            active = self._assigned - self._context_paused
            if active:
                self._consumer.resume(*active)

    def _apply_resets(self) -> None:
        for tp in [tp for tp in self._resets if tp in self._assigned]:
            offset = self._resets.pop(tp)
            self._consumer.seek(tp, offset)
            self._offsets[tp] = offset

    # -- commits ---------------------------------------------------------------------------
    async def _commit(self, partitions: set[TopicPartition]) -> None:
        """``pre_commit`` the offsets of ``partitions``, then commit what it returned. Called under the lock."""
        self._commit_requested = False
        self._next_commit = time.monotonic() + self._flush_interval_s
        current = {tp: offset for tp, offset in self._offsets.items() if tp in partitions}
        try:
            returned = await self.task.pre_commit(dict(current))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.error("Task %s: pre_commit()/flush() raised (%r); nothing is committed and the consumer is "
                      "rewound to the last committed offsets", self.id, exc)
            await self._rewind(current)
            return
        to_commit = {TopicPartition(*tp): int(offset) for tp, offset in (returned or {}).items()}
        to_commit = {tp: offset for tp, offset in to_commit.items()
                     if tp in partitions and self._committed.get(tp) != offset}
        if not to_commit:
            return
        try:
            await self._consumer.commit(to_commit)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # Connect logs and goes on: the next commit carries these offsets too
            log.warning("Task %s: committing offsets of %d partitions failed (%r); retrying with the next commit",
                        self.id, len(to_commit), exc)
            return
        self._committed.update(to_commit)

    async def _rewind(self, current: dict[TopicPartition, int]) -> None:
        for tp in current:
            if tp not in self._assigned:
                continue
            committed = self._committed.get(tp)
            if committed is None:
                committed = await self._consumer.committed(tp)
            if committed is None:
                await self._consumer.seek_to_beginning(tp)
                self._offsets.pop(tp, None)
            else:
                self._consumer.seek(tp, committed)
                self._offsets[tp] = committed

    # -- rebalances (called from the consumer's coordinator) ---------------------------------
    async def partitions_revoked(self, revoked: Iterable[Any]) -> None:
        """Commit (after ``pre_commit``) and ``close`` the partitions the group takes away."""
        async with self._lock:
            revoked = {TopicPartition(*tp) for tp in revoked} & self._assigned
            if not revoked:
                return
            if not self.failed:  # a failed task's last batch may be half written: commit nothing
                await self._commit(revoked)
            await self._guarded("close", self.task.close(sorted(revoked)))
            self._assigned -= revoked
            for tp in revoked:
                self._offsets.pop(tp, None)
                self._committed.pop(tp, None)

    async def partitions_assigned(self, assigned: Iterable[Any]) -> None:
        """Take new partitions: keep pauses, apply pending offset resets, then ``open`` them."""
        async with self._lock:
            new = {TopicPartition(*tp) for tp in assigned} - self._assigned
            if not new or self.failed:
                return
            self._assigned |= new
            paused = new if self._paused else new & self._context_paused
            if paused:
                self._consumer.pause(*paused)
            await self._guarded("open", self.task.open(sorted(new)))
            self._apply_resets()

    async def _guarded(self, what: str, coro: Awaitable[Any]) -> None:
        """Run a task callback from the coordinator: an exception fails the task (the client would only log it)."""
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.error("Task %s: %s() raised: %r", self.id, what, exc)
            self._fail(exc)


class _ErrantReporter(ErrantRecordReporter):
    """Connect's errant record reporter: a record ``put`` could not write goes to the error handler
    (logged, counted, written to the DLQ as consumed) at stage TASK_PUT."""

    def __init__(self, runner: WorkerSinkTask):
        self._runner = runner

    async def report(self, record: SinkRecord, error: BaseException) -> None:
        runner = self._runner
        await runner._errors.execute_failed(Stage.TASK_PUT, type(runner.task), runner.original_of(record), error)
