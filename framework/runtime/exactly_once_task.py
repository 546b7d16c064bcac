"""ExactlyOnceWorkerSourceTask: a source task whose records and source offsets are written in one transaction.

Kafka Connect's ``ExactlyOnceWorkerSourceTask`` (KIP-618), for distributed workers with
``exactly.once.source.support=enabled``:

- **Start.** The task's producer is transactional, with the id Connect derives
  (``<group.id>-<connector>-<task>``). Before it initialises, the task waits until the leader has
  fenced the previous generation of the connector's tasks (the ``tasks-fencing-*`` record in the
  config topic, see :mod:`~mirrorline.runtime.distributed.fencing`); initialising bumps the id's
  epoch, which fences this task's own previous instance wherever it still runs and aborts its open
  transaction. Then the task checks that it is still assigned here and that its configs are still
  current, and only then reads its offsets (read_committed) and starts: it resumes exactly after
  what was committed. All of that runs in the task's own background, never on the herder's.
- **Transactions.** Records are sent inside a transaction; the source offset of every record
  handed to the producer is remembered (the latest per source partition). At each boundary —
  every ``poll`` batch (``transaction.boundary=poll``, the default), every
  ``transaction.boundary.interval.ms`` (``interval``, default ``offset.flush.interval.ms``), or
  where the task asks through its :class:`~mirrorline.api.context.TransactionContext`
  (``connector``) — the offsets are written to the offsets topic *by the same producer, in the
  same transaction*, in the offsets store's own bytes, and the transaction is committed. Only
  then does the task get ``commit_record`` / ``commit_batch`` for its records (so a mirror's
  offset syncs describe committed records only) and ``commit()``.
- **Failures.** aiokafka commits a transaction even when one of its batches failed, so every
  record's and offset's delivery is checked first; any failure aborts the transaction and fails
  the task (FAILED with the trace, restarted by the supervisor from the committed offsets). A
  producer fenced by a newer instance of the task fails this one with a message saying so: it has
  written nothing that will ever be read. On stop the open transaction is committed (``poll`` and
  ``interval``; ``connector`` only when the task asked) or aborted, never left to time out, since
  an open transaction holds back every read_committed reader of its partitions.
- **Pause** commits the open transaction first, as Connect does.

Both copying paths work: records, and whole record batches (``SourceBatch``), which the producer
sends with the transactional bit set and its producer id, epoch and sequence
(:class:`~mirrorline.clients.forwarded_batch.ForwardedBatch`); the sender adds each partition to
the transaction before its first batch, as for records. Beyond Connect, a record a transform
drops and the records of a transaction the task aborted still have their offsets committed and
get ``commit_record(record, None)`` ("done, not written"), never stale metadata.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any


from mirrorline.api.context import TransactionContext
from mirrorline.api.errors import ConnectError, ProducerFencedError, TransactionalIdAuthorizationFailedError
from mirrorline.api.records import RecordMetadata, SourceBatch, SourceRecord
from mirrorline.clients.producer import KafkaProducer
from mirrorline.runtime import metrics
from mirrorline.runtime.bounded import LifecycleTimeout, bounded
from mirrorline.runtime.context import WorkerSourceTaskContext
from mirrorline.runtime.offset_tracker import partition_identity
from mirrorline.runtime.source_config import CONNECTOR, INTERVAL, POLL
from mirrorline.runtime.worker_task import (
    PRODUCE_LANES,
    RETRY_BACKOFF_MAX_S,
    RETRY_BACKOFF_S,
    REQUESTED_FLUSH_MIN_GAP_S,
    RecordWriteError,
    WorkerSourceTask,
    handed_on,
    is_retriable,
)
from mirrorline.storage.kafka_offsets import offset_key, offset_value
from mirrorline.storage.status import State

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExactlyOnceSettings:
    """What the herder decides for one exactly-once task.

    ``preflight`` returns once the previous generation of the connector's tasks is fenced (raises if
    it cannot be); ``verify`` raises if, once the producer is initialised, the task is no longer
    assigned here or its configs changed. ``fencing_timeout_s`` bounds the preflight.
    """

    transactional_id: str
    boundary: str
    interval_s: float
    offsets_topic: str
    preflight: Callable[[], Awaitable[None]]
    verify: Callable[[], Awaitable[None]]
    fencing_timeout_s: float = 60.0


class WorkerTransactionContext(TransactionContext):
    """The task's requests to commit or abort (Connect's ``WorkerTransactionContext``); each is used once."""

    def __init__(self) -> None:
        self._commit_batch = False
        self._abort_batch = False
        self._commit_on: set[int] = set()
        self._abort_on: set[int] = set()
        self._records: dict[int, Any] = {}  # keeps the records asked about alive, so their ids stay unique

    def commit_transaction(self, record: Any = None) -> None:
        if record is None:
            self._commit_batch = True
        else:
            self._records[id(record)] = record
            self._commit_on.add(id(record))

    def abort_transaction(self, record: Any = None) -> None:
        if record is None:
            self._abort_batch = True
        else:
            self._records[id(record)] = record
            self._abort_on.add(id(record))

    def should_commit_batch(self) -> bool:
        """Whether the task asked to commit after the current batch (resets the request)."""
        asked, self._commit_batch = self._commit_batch, False
        return asked

    def should_abort_batch(self) -> bool:
        """Whether the task asked to abort after the current batch (resets the request)."""
        asked, self._abort_batch = self._abort_batch, False
        return asked

    def should_commit_on(self, record: Any) -> bool:
        """Whether the task asked to commit right after ``record`` (resets the request)."""
        return self._take(self._commit_on, record)

    def should_abort_on(self, record: Any) -> bool:
        """Whether the task asked to abort right after ``record`` (resets the request)."""
        return self._take(self._abort_on, record)

    def _take(self, requests: set[int], record: Any) -> bool:
        key = id(record)
        if key not in requests or self._records.get(key) is not record:
            return False
        requests.discard(key)
        if key not in self._commit_on and key not in self._abort_on:
            self._records.pop(key, None)
        return True


class FencedError(ConnectError):
    """This task instance's producer was fenced: a newer instance of the task (or a fencing) took over."""


class ExactlyOnceWorkerSourceTask(WorkerSourceTask):
    """A WorkerSourceTask that writes records and offsets in transactions (see the module docstring)."""

    def __init__(self, *args: Any, exactly_once: ExactlyOnceSettings, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.eos = exactly_once
        self._txn_context = WorkerTransactionContext() if exactly_once.boundary == CONNECTOR else None
        self._txn_open = False
        #: (record or batch as poll returned it, its send future or None when dropped) of the open transaction
        self._txn_items: list[tuple[SourceRecord | SourceBatch, asyncio.Future | None]] = []
        #: partition identity -> (source partition, source offset): the latest offset per partition in the transaction
        self._txn_offsets: dict[Any, tuple[dict, dict]] = {}
        self._txn_records = 0
        self._aborted: list[SourceRecord | SourceBatch] = []
        self._committing: asyncio.Future | None = None
        self._last_commit_time = time.monotonic()
        #: the task asked for a commit (``context.request_commit()``); honoured under the interval boundary
        self._commit_requested = False
        self._sizes = (0, 0, None, 0)  # (transactions, records, min, max)
        for gauge in metrics.TRANSACTION_SIZE.values():
            gauge.labels(*self._labels).set(0)
        metrics.TRANSACTIONS_COMMITTED.labels(*self._labels)
        metrics.TRANSACTIONS_ABORTED.labels(*self._labels)

    # -- lifecycle -----------------------------------------------------------------------
    async def start(self, paused: bool = False) -> None:
        """Return at once; the fencing preflight, the producer's initialisation and the task's start run
        in the task's background (they may wait for the leader, which the herder must stay free to hear)."""
        self._background.spawn(self._supervised(lambda: self._start_exactly_once(paused), "start"), "start")

    async def _start_exactly_once(self, paused: bool) -> None:
        eos = self.eos
        await bounded(eos.preflight(), eos.fencing_timeout_s,
                      f"Task {self.id}: waiting for the zombie fencing of connector {self.id.connector}'s previous "
                      f"task generation")
        self._producer = KafkaProducer({"acks": "all", "linger_ms": 5, "max_batch_size": 512 * 1024,
                                        "produce_lanes": PRODUCE_LANES,
                                        **self._producer_kwargs, "enable_idempotence": True,
                                        "transactional_id": eos.transactional_id})
        try:
            # InitProducerId: fences this task's previous instance and aborts its open transaction
            await bounded(self._producer.start(), self._start_timeout_s,
                          f"Task {self.id}: initialising its transactional producer {eos.transactional_id!r}")
        except Exception as exc:
            raise self._producer_error(exc, "could not initialise its transactional producer") from exc
        await eos.verify()
        self._context = WorkerSourceTaskContext(self.id, self._offset_reader, self.warnings, on_crash=self._fail,
                                                accepts_batches=self._chain is None and self._converters is None,
                                                on_commit_request=self.request_commit, clients=self.clients)
        self._context.exactly_once = True
        self._context.transaction_context = self._txn_context
        self.task.initialize(self._context)
        await bounded(self.task.start(dict(self.config)), self._start_timeout_s, f"Task {self.id}: start()")
        self._started = True
        await bounded(self._errors.start(), self._start_timeout_s, f"Task {self.id}: starting error reporting")
        self._last_progress = self._last_commit_time = time.monotonic()
        metrics.TASK_RUNNING.labels(*self._labels).set(1)
        log.info("Task %s writes exactly-once: transactional id %r, transaction.boundary=%s%s", self.id,
                 eos.transactional_id, eos.boundary,
                 f" ({eos.interval_s:g}s)" if eos.boundary == INTERVAL else "")
        if paused:
            await self.pause()
        else:
            await self._on_status(self.id, State.RUNNING, None)
        for loop, name in ((self._poll_loop, "poll"), (self._watchdog_loop, "watchdog")):
            self._background.spawn(self._supervised(loop, name), name)

    def _producer_error(self, exc: BaseException, what: str) -> ConnectError:
        """A readable error for a transactional producer's failure: fencing and missing ACLs say so."""
        tid = self.eos.transactional_id
        if isinstance(exc, ProducerFencedError):
            return FencedError(
                f"Task {self.id} {what}: its transactional producer {tid!r} was fenced, because another instance "
                f"of this task started (this worker lost its group membership or was frozen, and the task moved) "
                f"or its transaction outlived transaction.timeout.ms. Nothing it wrote since its last commit will "
                f"be read; the task restarts from its committed offsets. If this repeats without a rebalance, "
                f"the transactions take too long: raise producer.override.transaction.timeout.ms, use "
                f"transaction.boundary=poll, or lower transaction.boundary.interval.ms")
        if isinstance(exc, TransactionalIdAuthorizationFailedError):
            return ConnectError(
                f"Task {self.id} {what}: the cluster denied transactional id {tid!r} "
                f"(TRANSACTIONAL_ID_AUTHORIZATION_FAILED). Exactly-once source tasks need WRITE and DESCRIBE on "
                f"TransactionalId {tid!r} (e.g. kafka-acls --add --allow-principal User:<worker principal> "
                f"--operation Write --operation Describe --transactional-id {tid}, or a PREFIXED binding on the "
                f"group id); or set exactly.once.source.support=disabled")
        name = type(exc).__name__
        if isinstance(exc, LifecycleTimeout):
            return ConnectError(
                f"Task {self.id} {what}: the transaction coordinator of {tid!r} did not answer within "
                f"{self._start_timeout_s:g}s (start.timeout.ms). Check that the target cluster's brokers can run "
                f"transactions: __transaction_state needs transaction.state.log.replication.factor and "
                f"transaction.state.log.min.isr brokers alive; or set exactly.once.source.support=disabled")
        if "ClusterAuthorization" in name:
            return ConnectError(f"Task {self.id} {what}: the cluster denied it ({name}); exactly-once source tasks "
                                f"need IdempotentWrite on the cluster besides WRITE on TransactionalId {tid!r}")
        return ConnectError(f"Task {self.id} {what} (transactional id {tid!r}): {exc!r}")

    def request_commit(self) -> None:
        """Under ``transaction.boundary=interval``, commit the open transaction at the end of the next poll
        (a second after the last commit at the soonest) instead of at the interval's end. ``poll``
        commits every poll anyway, and under ``connector`` the task's TransactionContext decides."""
        if self.eos.boundary == INTERVAL:
            self._commit_requested = True

    async def pause(self) -> None:
        """Stop polling; the open transaction is committed first (by the poll loop), as Connect does."""
        await super().pause()

    async def _shutdown(self, timeout: float) -> None:
        producer = self._producer
        if producer is not None and self._started:
            try:
                await bounded(self._finish_transaction(), timeout, f"Task {self.id}: finishing its transaction")
            except Exception as exc:
                log.warning("Task %s: its last transaction was not committed on stop (%r); the records after its "
                            "last committed offsets are written again by its next instance, nothing twice", self.id,
                            exc)
                await self._abort_quietly(timeout)
        elif producer is not None:
            await self._abort_quietly(timeout)
        await self._release_aborted()
        if self._started:
            self._started = False
            await self._call_task("stop", self.task.stop(), timeout)
        await self._close_pipeline(timeout)
        if self._creator is not None:
            try:
                await bounded(self._creator.close(), timeout, f"Task {self.id}: closing its topic admin client")
            except Exception as exc:
                log.warning("Task %s: its topic admin client did not close cleanly: %r", self.id, exc)
        if producer is not None:
            try:
                await bounded(producer.stop(), timeout, f"Task {self.id}: stopping its producer")
            except Exception as exc:
                log.warning("Task %s: its producer did not stop cleanly: %r", self.id, exc)
            self._producer = None

    async def _finish_transaction(self) -> None:
        """On stop: let a commit under way end, then commit what is open (or abort it, see the docstring)."""
        committing = self._committing
        if committing is not None:
            if not committing.done():
                await asyncio.wait({committing})
            if not committing.cancelled() and committing.exception() is not None:
                # the poll loop was stopped while this commit ran, and it failed: abort what is left
                log.info("Task %s: its last commit failed: %s", self.id, committing.exception())
                await self._abort_quietly(5.0)
                return
        if self.failed:
            await self._abort_quietly(5.0)
            return
        if self.eos.boundary == CONNECTOR:
            await self._batch_boundary()  # only what the task asked for (commit, or abort and commit offsets)
        else:
            await self._commit()
        if self._txn_open:
            await self._abort_quietly(5.0)

    async def _abort_quietly(self, timeout: float) -> None:
        """Abort an open transaction, never raising (the producer may be fenced or failed already)."""
        producer = self._producer
        if producer is None or not self._txn_open:
            self._drop_transaction()
            return
        try:
            if producer.can_abort():
                await bounded(producer.abort_transaction(), timeout, f"Task {self.id}: aborting its transaction")
                metrics.TRANSACTIONS_ABORTED.labels(*self._labels).inc()
        except Exception as exc:
            log.info("Task %s: could not abort its open transaction (%r); the coordinator aborts it when the "
                     "task's next instance starts or after transaction.timeout.ms", self.id, exc)
        self._drop_transaction()

    def _clear_metrics(self) -> None:
        super()._clear_metrics()
        for gauge in metrics.TRANSACTION_SIZE.values():
            gauge.labels(*self._labels).set(0)

    # -- the loop ------------------------------------------------------------------------
    async def _poll_loop(self) -> None:
        backoff = RETRY_BACKOFF_S
        plain = self._chain is None and self._converters is None
        while True:
            if not self._resumed.is_set():
                await self._commit()  # Connect commits on pause: an open transaction would time out
                await self._resumed.wait()
            try:
                records = await self.task.poll()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not is_retriable(exc):
                    raise
                log.warning("Task %s: poll() failed with a retriable error, retrying in %.0fs: %r",
                            self.id, backoff, exc)
                self._set_retrying(f"poll() is retrying after a retriable error: {exc!r}")
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, RETRY_BACKOFF_MAX_S)
                continue
            backoff = RETRY_BACKOFF_S
            if plain:
                await self._learn_topics(records)
            for record in handed_on(records):
                await self._dispatch(record, plain)
                if self._txn_context is not None:
                    await self._record_boundary(record)
            self._set_retrying(None)
            await self._batch_boundary()

    async def _dispatch(self, record: SourceRecord | SourceBatch, plain: bool) -> None:
        producer = self._producer
        assert producer is not None
        if isinstance(record, SourceBatch):
            if not plain:
                raise ConnectError(f"Task {self.id} returned a {type(record).__name__} from poll() although its "
                                   f"context does not accept batches (the connector has transforms or "
                                   f"converters); this is a bug in the connector")
            if self._creator is not None and record.topic not in self._creator.known:
                await self._create_topic(record)
            await self._begin()
            future = await self._retrying_send(record, lambda: producer.send_record_batch(
                record.topic, record.partition, record.data, record.record_count))
            self._remember(record, future, record.record_count)
            return
        processed = record if plain else await self._process(record)
        if processed is None:  # dropped by a transform (or skipped on error): done, offset still committed
            self._remember(record, None, 0)
            return
        if processed.topic == self.eos.offsets_topic:
            # as Connect: the task's next offset read would wait for its own open transaction
            raise ConnectError(f"Source tasks may not produce to their own offsets topics when exactly-once "
                               f"support is enabled (task {self.id} wrote to {processed.topic})")
        if self._creator is not None and processed.topic not in self._creator.known:
            await self._create_topic(processed)  # KIP-158, before the first record of the topic
        await self._begin()
        future = await self._retrying_send(processed, lambda: producer.send(
            processed.topic, value=processed.value, key=processed.key, partition=processed.partition,
            timestamp_ms=processed.timestamp, headers=list(processed.headers) or None))
        self._remember(record, future, 1)

    async def _begin(self) -> None:
        if not self._txn_open:
            await self._producer.begin_transaction()
            self._txn_open = True

    def _remember(self, record: SourceRecord | SourceBatch, future: asyncio.Future | None, count: int) -> None:
        self._txn_items.append((record, future))
        self._txn_records += count
        partition = record.source_partition
        if partition is not None:
            self._txn_offsets[partition_identity(partition)] = (partition, record.source_offset)

    async def _batch_boundary(self) -> None:
        boundary = self.eos.boundary
        if boundary == POLL:
            await self._commit()
        elif boundary == INTERVAL:
            now = time.monotonic()
            if now >= self._last_commit_time + (REQUESTED_FLUSH_MIN_GAP_S if self._commit_requested
                                                  else self.eos.interval_s):
                self._commit_requested = False
                self._last_commit_time = now
                await self._commit()
        else:
            context = self._txn_context
            if context.should_abort_batch():
                await self._abort_for_connector("after its batch")
                await self._commit()
            elif context.should_commit_batch():
                await self._commit()

    async def _record_boundary(self, record: SourceRecord | SourceBatch) -> None:
        context = self._txn_context
        if context.should_abort_on(record):
            await self._abort_for_connector(f"after a record for {record.topic}")
            await self._commit()
        elif context.should_commit_on(record):
            await self._commit()

    async def _abort_for_connector(self, where: str) -> None:
        if not self._txn_open:
            log.warning("Task %s: ignoring the request to abort the transaction %s, as the current transaction is "
                        "empty", self.id, where)
            return
        log.info("Task %s: aborting the transaction %s as the connector asked", self.id, where)
        await self._producer.abort_transaction()
        metrics.TRANSACTIONS_ABORTED.labels(*self._labels).inc()
        self._txn_open = False
        # its records were not written: "done" with None, their offsets commit with the next transaction
        self._aborted.extend(record for record, _ in self._txn_items)
        self._txn_items.clear()
        self._txn_records = 0

    # -- committing ----------------------------------------------------------------------
    async def _commit(self) -> None:
        """Commit the open transaction with its offsets; runs to its end even if the loop is cancelled."""
        if self._committing is not None and not self._committing.done():
            await asyncio.shield(self._committing)
        self._committing = asyncio.ensure_future(self._commit_transaction())
        await asyncio.shield(self._committing)

    async def _commit_transaction(self) -> None:
        producer = self._producer
        assert producer is not None
        if not self._txn_open and not self._txn_offsets and not self._txn_items:
            await self._release_aborted()
            await self._notify_task("commit", self.task.commit())
            return
        await self._begin()  # a transaction for the offsets alone (dropped or aborted records)
        offsets = list(self._txn_offsets.values())
        offset_futures = []
        for partition, offset in offsets:
            key, value = offset_key(self.id.connector, partition), offset_value(offset)
            offset_futures.append(await self._retrying_offset_send(key, value))
        # close the batches still lingering (linger.ms) and wait for every record and offset of the transaction
        try:  # bounded as every write is (delivery.timeout.ms): the client retries an idempotent batch forever
            async with asyncio.timeout(self._delivery_timeout_s):
                await asyncio.shield(producer.flush_for_commit())
        except asyncio.TimeoutError:
            await self._abort_quietly(5.0)
            raise RecordWriteError(
                f"Task {self.id}: its transaction was not acknowledged within {self._delivery_timeout_s:.0f}s "
                f"(delivery.timeout.ms): the target cluster does not take this task's writes. The transaction is "
                f"aborted; the task restarts from its last committed offsets") from None
        failure = self._first_failure([f for _, f in self._txn_items] + offset_futures)
        if failure is None:
            failure = self._fatal_error()
        if failure is not None:
            await self._abort_quietly(5.0)
            raise self._write_failure(failure)
        try:
            await producer.commit_transaction()
        except Exception as exc:
            self._txn_open = False
            raise self._producer_error(exc, "could not commit its transaction") from exc
        self._txn_open = False
        metrics.TRANSACTIONS_COMMITTED.labels(*self._labels).inc()
        self._record_size(self._txn_records)
        items, self._txn_items = self._txn_items, []
        self._txn_offsets.clear()
        self._txn_records = 0
        self._last_progress = time.monotonic()
        await self._release_aborted()
        for record, future in items:
            metadata = None
            if future is not None:
                sent = future.result()
                metadata = RecordMetadata(sent.topic, sent.partition, sent.offset, sent.timestamp)
                self._note_topic(record.topic)
            await self._release(record, metadata)
        await self._notify_task("commit", self.task.commit())

    async def _retrying_offset_send(self, key: bytes, value: bytes | None) -> asyncio.Future:
        producer = self._producer
        backoff = RETRY_BACKOFF_S
        while True:
            try:
                return await producer.send(self.eos.offsets_topic, key=key, value=value)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not is_retriable(exc):
                    raise ConnectError(f"Task {self.id} could not write its source offsets to "
                                       f"{self.eos.offsets_topic}: {exc!r}") from exc
                self._set_retrying(f"writing offsets to {self.eos.offsets_topic} is retrying: {exc!r}")
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, RETRY_BACKOFF_MAX_S)

    @staticmethod
    def _first_failure(futures) -> BaseException | None:
        for future in futures:
            if future is not None and future.done() and not future.cancelled() and future.exception() is not None:
                return future.exception()
            if future is not None and not future.done():
                return ConnectError("a record of the transaction was still unacknowledged after flush()")
        return None

    def _fatal_error(self) -> BaseException | None:
        """The error that stopped the producer's sender (fenced, denied...), if it stopped."""
        return self._producer.fatal_error() if self._producer is not None else None

    def _write_failure(self, error: BaseException) -> ConnectError:
        if isinstance(error, (ProducerFencedError, TransactionalIdAuthorizationFailedError)) or \
                "ClusterAuthorization" in type(error).__name__:
            return self._producer_error(error, "could not write its transaction")
        exc = ConnectError(f"Task {self.id} could not write a record of its transaction: {error!r}. The transaction "
                           f"is aborted: nothing of it will be read, and the task restarts from its last committed "
                           f"offsets")
        exc.__cause__ = error
        return exc

    def _drop_transaction(self) -> None:
        """Forget an aborted transaction: its records were not written and their offsets are not committed."""
        for _, future in self._txn_items:  # their errors are the abort's cause, reported already
            if future is not None and future.done() and not future.cancelled():
                future.exception()
        if self._producer is not None:
            self._producer.forget_transaction()  # a fencing error nobody commits or aborts again
        self._txn_open = False
        self._txn_items.clear()
        self._txn_offsets.clear()
        self._txn_records = 0

    async def _release(self, record: SourceRecord | SourceBatch, metadata: RecordMetadata | None) -> None:
        if isinstance(record, SourceBatch):
            if metadata is not None:
                await self._notify_task("commit_batch", self.task.commit_batch(record, metadata))
        else:
            await self._notify_task("commit_record", self.task.commit_record(record, metadata))

    async def _release_aborted(self) -> None:
        aborted, self._aborted = self._aborted, []
        for record in aborted:
            if isinstance(record, SourceRecord):
                await self._notify_task("commit_record", self.task.commit_record(record, None))

    def _note_topic(self, topic: str) -> None:
        if topic not in self._topics:
            self._topics.add(topic)
            if self._on_topic is not None:
                self._on_topic(self.id.connector, topic)

    def _record_size(self, size: int) -> None:
        count, total, low, high = self._sizes
        count, total = count + 1, total + size
        low = size if low is None else min(low, size)
        high = max(high, size)
        self._sizes = (count, total, low, high)
        labels = self._labels
        metrics.TRANSACTION_SIZE["avg"].labels(*labels).set(total / count)
        metrics.TRANSACTION_SIZE["min"].labels(*labels).set(low)
        metrics.TRANSACTION_SIZE["max"].labels(*labels).set(high)
