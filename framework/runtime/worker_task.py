"""WorkerSourceTask: runs one SourceTask — poll, produce, track acks, commit offsets — under supervision.

Delivery: records are written with acks=all and idempotence, one producer per task, so
records of a Kafka partition keep the order ``poll`` returned them in. Offsets are stored
every ``offset.flush.interval.ms``, when the task asks (``context.request_commit()``), and on
stop, only up to the last record acknowledged together with all before it
(:class:`~mirrorline.runtime.offset_tracker.OffsetTracker`).
A crash therefore re-sends at most the records after the last flush: at-least-once.

Transforms (``transforms=...``): each record ``poll`` returns goes through the connector's
:class:`~mirrorline.runtime.transform_chain.TransformChain` before the producer. A dropped
record counts as done in its place (its offset commits once the records before it are
acknowledged); ``commit_record`` gets the record as ``poll`` returned it, with ``None``
metadata for a dropped one. Converters (``key.converter``... other than ByteArrayConverter) run
after the transforms, and both run under the connector's
:class:`~mirrorline.runtime.error_handling.ErrorHandler`: a record that fails either fails the
task (``errors.tolerance=none``, the trace naming stage, class, topic, partition and offset) or
is dropped like a filtered record and counted (``errors.tolerance=all``). Without transforms
and with pass-through converters the loop is the plain one.

Record batches (beyond Connect): in that plain case the task's context says ``accepts_batches``
and ``poll`` may also return :class:`~mirrorline.api.records.SourceBatch` items, which the
producer writes whole (:meth:`KafkaProducer.send_record_batch`); their source offset is tracked
like a record's, and the task gets ``commit_batch`` with the first record's offset.

Topic creation (KIP-158): with a :class:`~mirrorline.runtime.topic_creation.TopicCreator`, a
topic the task has not written to yet is described, and created with its group's settings if
missing, before the first record goes to the producer (after the transforms, as in Connect).

Supervision: the task is RUNNING only while all of its loops (poll, acks, flush, watchdog,
delivery) run. An exception escaping any of them, ``start``, or a record the target refuses,
stops every loop and reports the failure once through ``on_failure`` (the Worker records FAILED
with the trace, logs it, counts it, and the supervisor restarts the task later). Retriable
errors (a broker down, a partition not known yet, a full producer buffer) are not failures at
first: the same call is retried with back-off, in order, and the task says so in its status
while it lasts (``"warnings"``). They are bounded by the producer's ``delivery.timeout.ms``
(120 s by default, as in Kafka): a record the producer keeps refusing for longer, or records in
flight with no acknowledgement for that long, fail the task with the last error, so a write a
plugin cannot fix never hides behind RUNNING.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any


from mirrorline.api.context import OffsetReader
from mirrorline.api.errors import ConnectError, KafkaError, KafkaTimeoutError, RetriableError
from mirrorline.clients.errors import translate
from mirrorline.clients.producer import KafkaProducer
from mirrorline.runtime.producer_share import PRODUCER_SHARES, SharedProducer
from mirrorline.api.records import ConnectorTaskId, RecordMetadata, SourceBatch, SourceRecord
from mirrorline.api.task import SourceTask
from mirrorline.runtime import metrics
from mirrorline.runtime.bounded import bounded
from mirrorline.runtime.context import WorkerSourceTaskContext
from mirrorline.runtime.converters import RecordConverters
from mirrorline.runtime.error_handling import SKIP, ErrorHandler, Stage
from mirrorline.runtime.offset_tracker import OffsetTracker, TransformedOffsetTracker, partition_identity
from mirrorline.runtime.topic_creation import TopicCreator
from mirrorline.runtime.task_runner import (
    RETRY_BACKOFF_MAX_S,
    RETRY_BACKOFF_S,
    STALLED,
    UNACKNOWLEDGED,
    FailureCallback,
    StatusCallback,
    TaskRunner,
)
from mirrorline.runtime.transform_chain import TransformChain
from mirrorline.storage.offsets import OffsetStore
from mirrorline.storage.status import State

log = logging.getLogger(__name__)

#: Kafka's default ``delivery.timeout.ms``: how long a write may keep failing before the task fails.
DEFAULT_DELIVERY_TIMEOUT_MS = 120_000
#: Produce connections per target broker (``producer.produce.connections.per.broker`` changes it): a broker
#: answers one connection's requests one at a time, so a second lane lets it work on two (see
#: :mod:`mirrorline.clients.produce_lanes`).
PRODUCE_LANES = 2
#: A task's requested offset flushes (``context.request_commit()``) come at most this often
REQUESTED_FLUSH_MIN_GAP_S = 1.0
#: On stop, the flush and the offsets' write share the flush budget; the offsets of what was
#: acknowledged get at least this long even after a flush that used it all (the target down, the
#: offsets' store up: a file, or another cluster)
MIN_OFFSETS_ON_STOP_S = 1.0


class RecordWriteError(ConnectError):
    """The target refused a record for good (too large, not authorised...): the task fails."""


class StoppingError(ConnectError):
    """A record reached the producer after the task's stop began (a loop that ignored its
    cancellation): it is not written, so nothing lands past the offsets the stop stores."""

    #: the message already says the stop had begun (the runner's log line need not say it again)
    after_stop = True


def handed_on(records: list | None):
    """The items of a poll's ``records`` in order, each let go of by the list as it is yielded.

    A poll can return tens of MiB of batches while the producer takes at most ``buffer.memory``
    at a time: without this, an item acknowledged long ago stays alive until the poll's last item
    has been handed over. (The runtime owns the list: :meth:`SourceTask.poll` says so.)"""
    if type(records) is not list:
        yield from records or ()
        return
    for index in range(len(records)):
        record = records[index]
        records[index] = None
        yield record


def is_retriable(exc: BaseException) -> bool:
    """Whether ``exc`` is transient: our RetriableError, a Kafka client error marked retriable, or a
    KafkaTimeoutError (not marked so, but raised by ``send`` when the producer's buffer stayed full,
    e.g. while a broker is down: the record was not taken, so sending it again keeps order). A task's
    own Kafka client errors are judged as the client layer translates them."""
    exc = translate(exc)
    if isinstance(exc, KafkaTimeoutError):
        return True
    return isinstance(exc, (RetriableError, KafkaError)) and bool(getattr(exc, "retriable", False))


class WorkerSourceTask(TaskRunner):
    """Drives one source task from start to stop and reports its state through the callbacks."""

    def __init__(self, task_id: ConnectorTaskId, task: SourceTask, config: dict[str, str], *,
                 producer_kwargs: dict[str, Any], offset_store: OffsetStore, offset_reader: OffsetReader,
                 on_status: StatusCallback, on_failure: FailureCallback, flush_interval_s: float,
                 start_timeout_s: float = 60.0, stall_timeout_s: float = 60.0,
                 on_topic: Callable[[str, str], None] | None = None, transforms: TransformChain | None = None,
                 converters: RecordConverters | None = None, errors: ErrorHandler | None = None,
                 topic_creator: TopicCreator | None = None,
                 delivery_timeout_s: float = DEFAULT_DELIVERY_TIMEOUT_MS / 1000, client_share: str | None = None):
        super().__init__(task_id, task, config, on_status=on_status, on_failure=on_failure,
                         flush_interval_s=flush_interval_s, start_timeout_s=start_timeout_s, on_topic=on_topic,
                         transforms=transforms, converters=converters, errors=errors)
        self._producer_kwargs = producer_kwargs
        #: the share name of the clients this task shares with the connector's other tasks in this
        #: process (``tasks.share.clients``): its producer, and the consumer the task may ask for
        self._client_share = client_share
        self._store = offset_store
        self._offset_reader = offset_reader
        self._stall_timeout_s = stall_timeout_s
        self._tracker = OffsetTracker(task_id.connector) if transforms is None and self._converters is None \
            else TransformedOffsetTracker(task_id.connector)
        self._acked: deque[tuple[SourceRecord | SourceBatch, RecordMetadata | None]] = deque()
        self._acked_event = asyncio.Event()
        self._resumed = asyncio.Event()
        self._resumed.set()
        self._producer: KafkaProducer | SharedProducer | None = None
        #: set once the stop closes the producer: writes it gives up on then fail without failing the task
        self._producer_stopping = False
        self._commit_due = False
        #: set by ``context.request_commit()``: the flush loop stores offsets without waiting out the interval
        self._flush_requested = asyncio.Event()
        self._unstored: dict[str, tuple[dict, dict]] = {}
        self._started = False
        self._topics: set[str] = set()
        self._last_progress = time.monotonic()
        self._creator = topic_creator
        self._delivery_timeout_s = delivery_timeout_s
        #: records and batches handed to the producer and not acknowledged yet, and since when
        #: that count has been above 0 without an acknowledgement
        self._in_flight = 0
        self._unacked_since = time.monotonic()
        #: bytes of records and batches handed to the producer and not acknowledged yet, bounded
        #: by the producer's ``buffer.memory``; set while under it
        self._unacked_bytes = 0
        self._room = asyncio.Event()
        self._room.set()

    # -- lifecycle -----------------------------------------------------------------------
    async def start(self, paused: bool = False) -> None:
        """Start the producer and the task, then the loops; a failure is reported through ``on_failure``."""
        try:
            # Larger batches than aiokafka's 16 KB default: aiokafka has one request in flight per
            # broker, so small batches cap throughput (measured: +35% at 1 KB records, and a third
            # of the broker CPU). producer.batch.size / producer.override.batch.size still win.
            kwargs = {"acks": "all", "enable_idempotence": True, "linger_ms": 5, "max_batch_size": 512 * 1024,
                      "produce_lanes": PRODUCE_LANES, **self._producer_kwargs}
            if self._client_share is None:
                self._producer = KafkaProducer(kwargs)
            else:
                self._producer = PRODUCER_SHARES.producer(self._client_share, kwargs, lambda: KafkaProducer(kwargs))
            await bounded(self._producer.start(), self._start_timeout_s, f"Task {self.id}: starting its producer")
            self._context = WorkerSourceTaskContext(self.id, self._offset_reader, self.warnings, on_crash=self._fail,
                                                    accepts_batches=self._chain is None and self._converters is None,
                                                    on_commit_request=self.request_commit,
                                                    client_share=self._client_share, clients=self.clients)
            self.task.initialize(self._context)
            await bounded(self.task.start(dict(self.config)), self._start_timeout_s, f"Task {self.id}: start()")
            self._started = True
            await bounded(self._errors.start(), self._start_timeout_s, f"Task {self.id}: starting error reporting")
        except Exception as exc:
            self._fail(exc)
            return
        self._last_progress = time.monotonic()
        metrics.TASK_RUNNING.labels(*self._labels).set(1)
        if paused:
            await self.pause()
        else:
            await self._on_status(self.id, State.RUNNING, None)
        for loop, name in ((self._poll_loop, "poll"), (self._ack_loop, "acks"), (self._flush_loop, "flush"),
                           (self._watchdog_loop, "watchdog"), (self._delivery_loop, "delivery")):
            self._background.spawn(self._supervised(loop, name), name)

    async def pause(self) -> None:
        """Stop polling until resumed; records already returned are still written."""
        if not self.failed:
            self._resumed.clear()
            await self._on_status(self.id, State.PAUSED, None)

    async def resume(self) -> None:
        """Poll again after a pause."""
        if not self.failed:
            self._resumed.set()
            self._last_progress = time.monotonic()
            await self._on_status(self.id, State.RUNNING, None)

    async def stop(self, timeout: float = 10.0) -> None:
        """Stop polling, write out what is in flight, store offsets, then stop the task and producer."""
        await self._stop_loops(timeout)
        await self._shutdown(timeout)
        self._clear_metrics()

    async def _shutdown(self, timeout: float) -> None:
        flushed = True
        if self._producer is not None:
            # the flush and the offsets share one budget, as in Connect (offset.flush.timeout.ms)
            deadline = asyncio.get_running_loop().time() + timeout
            try:
                async with asyncio.timeout(timeout):
                    await self._producer.flush()
            except Exception as exc:  # a broker down at shutdown: keep the offsets we have
                flushed = False
                log.warning("Task %s could not flush its producer on stop (%r); records after the last "
                            "stored offset will be written again on restart", self.id, exc)
            try:  # an unreachable offsets cluster must not hold the stop until the worker gives up on it
                left = max(deadline - asyncio.get_running_loop().time(), MIN_OFFSETS_ON_STOP_S)
                await bounded(self._commit_offsets(), left, f"Task {self.id}: storing its offsets")
            except Exception as exc:
                log.warning("Task %s could not store its offsets on stop (%r); records after the last stored "
                            "offset will be written again on restart", self.id, exc)
            await self._drain_acked()
        if self._started:
            self._started = False
            await self._call_task("stop", self.task.stop(), timeout)
        await self._close_pipeline(timeout)
        if self._creator is not None:
            try:
                await bounded(self._creator.close(), timeout, f"Task {self.id}: closing its topic admin client")
            except Exception as exc:
                log.warning("Task %s: its topic admin client did not close cleanly: %r", self.id, exc)
        await self._stop_producer(timeout if flushed else 0)

    async def _stop_producer(self, wait_s: float) -> None:
        """Stop the producer, giving up on what is unacknowledged after ``wait_s`` (0 after a failed
        flush: it was waited for already), so its connections close even with the target unreachable."""
        producer, self._producer = self._producer, None
        if producer is None:
            return
        self._producer_stopping = True
        try:
            given_up = await bounded(producer.stop_within(wait_s), wait_s + 5, f"Task {self.id}: stopping its producer")
        except Exception as exc:
            log.warning("Task %s: its producer did not stop cleanly: %r", self.id, exc)
            return
        if given_up:
            log.warning("Task %s: %d batch(es) were still unacknowledged when its producer stopped; they are "
                        "written again from the last stored offset on restart", self.id, given_up)

    async def release_clients(self) -> None:
        """After an abandoned stop: close the producer at once, unacknowledged writes given up on, so its
        connections and sender do not outlive the task (they would retry against an unreachable
        target until the process ends)."""
        await self._stop_producer(0)
        await super().release_clients()

    def _clear_metrics(self) -> None:
        for gauge in (metrics.TASK_RUNNING, metrics.TASK_STALLED, metrics.TASK_RETRYING):
            gauge.labels(*self._labels).set(0)

    def forget_topics(self) -> None:
        """Forget which topics this task wrote to (topic-tracking reset)."""
        self._topics.clear()

    # -- supervision -----------------------------------------------------------------------
    def _on_failing(self) -> None:
        self._resumed.clear()  # the poll loop waits instead of calling a failed task

    # -- loops ---------------------------------------------------------------------------
    async def _poll_loop(self) -> None:
        backoff = RETRY_BACKOFF_S
        while True:
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
            if self._chain is None and self._converters is None:
                await self._learn_topics(records)
                for record in handed_on(records):
                    if isinstance(record, SourceBatch):
                        await self._send_batch(record)
                    else:
                        await self._send(record)
            else:
                for record in handed_on(records):
                    if isinstance(record, SourceBatch):
                        raise ConnectError(f"Task {self.id} returned a {type(record).__name__} from poll() although "
                                           f"its context does not accept batches (the connector has transforms or "
                                           f"converters); this is a bug in the connector")
                    # a failure not tolerated raises ToleranceExceededError naming the record: the task fails
                    processed = await self._process(record)
                    if processed is None:
                        self._drop(record)
                    else:
                        await self._send(processed, record)
            self._set_retrying(None)
            if self._commit_due:
                self._commit_due = False
                await self._notify_task("commit", self.task.commit())

    async def _learn_topics(self, records) -> None:
        """One metadata refresh for all new topics of a poll's records, not one per topic (see
        :meth:`KafkaProducer.learn_topics`)."""
        if records and self._producer is not None:
            await self._producer.learn_topics({record.topic for record in records})

    async def _ack_loop(self) -> None:
        # commit_record runs as soon as acks arrive (as Connect calls commitRecord from the producer
        # callback), not at the next poll: MM2 measures replication latency and emits offset syncs there.
        while True:
            await self._acked_event.wait()
            self._acked_event.clear()
            await self._drain_acked()

    def request_commit(self) -> None:
        """Store the task's offsets now rather than at the end of the flush interval (the task asked,
        ``context.request_commit()``); ``commit()`` follows at the next poll, as after every flush."""
        self._flush_requested.set()

    async def _flush_loop(self) -> None:
        requested = self._flush_requested
        while True:
            try:
                async with asyncio.timeout(self._flush_interval_s):
                    await requested.wait()
            except TimeoutError:
                asked = False
            else:
                asked = True
            requested.clear()
            await self._commit_offsets()
            self._commit_due = True  # Connect calls commit() after every flush, even an empty one
            if asked:
                log.debug("Task %s stored its offsets as it asked; the next flush comes in %.0f s unless it asks "
                          "again", self.id, self._flush_interval_s)
                await asyncio.sleep(REQUESTED_FLUSH_MIN_GAP_S)  # a task asking on every poll: one flush a second

    async def _watchdog_loop(self) -> None:
        """Flag the task while it reports pending records but has had nothing acknowledged for a while.

        Counting pending records costs the task O(partitions). An idle task has had nothing
        acknowledged for long, so it would be counted every few seconds; once a count finds
        nothing pending and nothing is in flight, the next count waits up to half the stall
        timeout (30 s at most): a stall that begins while nothing is in flight is flagged that much
        later. A write in flight, or a count that found records, brings back the short period."""
        if self._stall_timeout_s <= 0:
            return
        period = min(5.0, self._stall_timeout_s / 4)
        quiet_period = max(period, min(30.0, self._stall_timeout_s / 2))
        next_count = 0.0
        while True:
            await asyncio.sleep(period)
            if not self._resumed.is_set():
                self._last_progress = time.monotonic()
                continue
            now = time.monotonic()
            if now - self._last_progress <= self._stall_timeout_s and STALLED not in self.warnings:
                continue  # acknowledged lately and not flagged: nothing to set or clear (counting costs O(partitions))
            if now < next_count and not self._in_flight:
                continue  # nothing was pending at the last count, nothing is in flight
            try:
                pending = self.task.pending_records()
            except Exception as exc:  # an optional hint: never fail the task for it
                log.debug("Task %s: pending_records() raised %r", self.id, exc)
                pending = None
            next_count = 0.0 if pending else now + quiet_period
            idle = time.monotonic() - self._last_progress
            if pending and idle > self._stall_timeout_s:
                if STALLED not in self.warnings:
                    log.warning("Task %s is stalled: %d records wait upstream but none was written for %.0fs. "
                                "Check the target cluster and this task's log", self.id, pending, idle)
                    metrics.TASK_STALLED.labels(*self._labels).set(1)
                self.warnings[STALLED] = (f"stalled: {pending} records wait upstream but none was written "
                                          f"for {idle:.0f}s")
            elif self.warnings.pop(STALLED, None) is not None:
                metrics.TASK_STALLED.labels(*self._labels).set(0)
                log.info("Task %s is no longer stalled", self.id)

    async def _delivery_loop(self) -> None:
        """Bound how long writes may go unacknowledged: aiokafka retries an idempotent producer's batches
        without end, where Java's gives up after ``delivery.timeout.ms`` and Connect fails the task.

        Past a quarter of the bound the status says so (``"warnings"``), and past the bound the task fails."""
        interval = min(5.0, self._delivery_timeout_s / 4)
        while True:
            await asyncio.sleep(interval)
            waited = time.monotonic() - self._unacked_since
            if not self._in_flight or waited < interval:
                if self.warnings.pop(UNACKNOWLEDGED, None) is not None:
                    log.info("Task %s: its writes are acknowledged again", self.id)
                continue
            bound_ms = f"{self._delivery_timeout_s * 1000:.0f}"
            if waited > self._delivery_timeout_s:
                raise RecordWriteError(
                    f"Task {self.id}: {self._in_flight} writes were handed to the producer and none was "
                    f"acknowledged for {waited:.0f}s (delivery.timeout.ms={bound_ms}): the target cluster does not "
                    f"take this task's writes. Check its brokers (leaders, in-sync replicas against "
                    f"min.insync.replicas, quotas, disk) and this task's log. Records after the last stored offset "
                    f"are written again when the task restarts")
            if UNACKNOWLEDGED not in self.warnings:
                log.warning("Task %s: %d writes in flight and none acknowledged for %.0fs; the task fails at "
                            "delivery.timeout.ms=%s", self.id, self._in_flight, waited, bound_ms)
            self.warnings[UNACKNOWLEDGED] = (f"unacknowledged: {self._in_flight} writes in flight, none acknowledged "
                                             f"for {waited:.0f}s; the task fails after {self._delivery_timeout_s:.0f}s "
                                             f"(delivery.timeout.ms)")

    # -- producing -----------------------------------------------------------------------
    async def _process(self, record: SourceRecord) -> SourceRecord | None:
        """The record after the transforms and converters, or None when dropped or skipped on error."""
        chain, converters = self._chain, self._converters
        result: Any = record
        if chain is not None:
            result = await self._errors.execute(Stage.TRANSFORMATION, lambda: chain.apply(record), record)
            if result is None or result is SKIP:
                return None
        if converters is not None:
            transformed = result
            result = await self._errors.execute(Stage.VALUE_CONVERTER, lambda: converters.to_bytes(transformed),
                                                record, type(converters.value))
            if result is SKIP:
                return None
        return result

    def _drop(self, record: SourceRecord) -> None:
        """A record a transform dropped: done as if written (its offset commits in its turn, and
        ``commit_record(record, None)`` is called once the records before it are acknowledged)."""
        self._last_progress = time.monotonic()
        released = self._tracker.drop(record)
        if released:
            self._acked.extend((r, None) for r in released)
            self._acked_event.set()

    async def _send(self, record: SourceRecord, original: SourceRecord | None = None) -> None:
        """Hand one record to the producer, retrying retriable refusals in place (order is kept).

        ``original`` is the record as ``poll`` returned it when transforms changed it: its source
        position is tracked, and it is what ``commit_record`` receives, as in Connect."""
        self._refuse_when_stopping(f"writing to {record.topic}")
        producer = self._producer
        assert producer is not None
        if self._creator is not None and record.topic not in self._creator.known:
            await self._create_topic(record)
        size = len(record.key or b"") + len(record.value or b"")
        await self._wait_for_room(size)
        future = await self._retrying_send(record, lambda: producer.send(
            record.topic, value=record.value, key=record.key, partition=record.partition,
            timestamp_ms=record.timestamp, headers=list(record.headers) or None))
        source = record if original is None else original
        pending = self._tracker.submit(source.source_partition, source.source_offset)
        self._sent(size)
        future.add_done_callback(lambda f: self._on_ack(f, record, pending, source, size))

    async def _send_batch(self, batch: SourceBatch) -> None:
        """Hand one whole record batch to the producer, retrying retriable refusals in place."""
        self._refuse_when_stopping(f"writing to {batch.topic}")
        producer = self._producer
        assert producer is not None
        if self._creator is not None and batch.topic not in self._creator.known:
            await self._create_topic(batch)
        size = len(batch.data)
        await self._wait_for_room(size)
        future = await self._retrying_send(batch, lambda: producer.send_record_batch(
            batch.topic, batch.partition, batch.data, batch.record_count))
        pending = self._tracker.submit(batch.source_partition, batch.source_offset)
        self._sent(size)
        future.add_done_callback(lambda f: self._on_ack(f, batch, pending, batch, size))

    def _refuse_when_stopping(self, what: str) -> None:
        """Raise :class:`StoppingError` once the stop began: a loop that outlived its cancellation
        must not write past the offsets the stop stores."""
        if self.stopping:
            raise StoppingError(f"Task {self.id}: {what} came after the task's stop began; it is not done, and "
                                f"the task resumes from its last stored offsets")

    async def _wait_for_room(self, size: int) -> None:
        """Wait until ``size`` more bytes fit under the producer's ``buffer.memory`` with what is
        unacknowledged (one write always fits when nothing is). Java's producer blocks ``send`` the
        same way; aiokafka's queues without bound, so a task whose target is slower than its
        source could hold everything it had read."""
        limit = getattr(self._producer, "buffer_memory", None)
        while limit and self._unacked_bytes and self._unacked_bytes + size > limit:
            self._room.clear()
            await self._room.wait()

    def _sent(self, size: int = 0) -> None:
        """Count one more write in flight (the delivery bound measures from the first one unacknowledged)."""
        if not self._in_flight:
            self._unacked_since = time.monotonic()
        self._in_flight += 1
        self._unacked_bytes += size

    async def _create_topic(self, item: SourceRecord | SourceBatch) -> None:
        """Create ``item``'s topic if it is missing (KIP-158), retrying retriable errors like a send."""
        creator = self._creator
        assert creator is not None
        await self._retrying(item, lambda: creator.ensure(item.topic), f"creating topic {item.topic}", wrap=False)

    async def _retrying_send(self, item: SourceRecord | SourceBatch, send) -> asyncio.Future:
        """``await send()`` until the producer takes ``item``, backing off on retriable refusals (order is
        kept: nothing after it is sent meanwhile); a final refusal raises :class:`RecordWriteError`."""
        return await self._retrying(item, send, f"writing to {item.topic}")

    async def _retrying(self, item: SourceRecord | SourceBatch, call, what: str, wrap: bool = True) -> Any:
        """``await call()``, retrying retriable errors with back-off for at most ``delivery.timeout.ms`` from
        the first one, then raising a :class:`RecordWriteError` naming ``item``. Any other error is
        raised at once: wrapped in one naming ``item`` when ``wrap``, else as it is (its own message
        says what failed, as a topic creation's does)."""
        backoff = RETRY_BACKOFF_S
        first_failure: float | None = None
        while True:
            self._refuse_when_stopping(what)
            try:
                return await call()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                now = time.monotonic()
                first_failure = now if first_failure is None else first_failure
                waited = now - first_failure
                if not is_retriable(exc):
                    if wrap:
                        raise self._write_error(item, exc) from exc
                    raise
                if waited >= self._delivery_timeout_s:
                    gave_up = RecordWriteError(
                        f"{what} kept failing with retriable errors for {waited:.0f}s, longer than "
                        f"delivery.timeout.ms={self._delivery_timeout_s * 1000:.0f}; the last one: {exc!r}")
                    gave_up.__cause__ = exc
                    raise self._write_error(item, gave_up) from gave_up
                log.warning("Task %s: %s (partition %s) is retried in %.0fs: %r", self.id, what, item.partition,
                            backoff, exc)
                self._set_retrying(f"{what} is retrying ({waited:.0f}s so far; the task fails after "
                                   f"{self._delivery_timeout_s:.0f}s, delivery.timeout.ms): {exc!r}")
                await asyncio.sleep(min(backoff, max(self._delivery_timeout_s - waited, 0.01)))
                backoff = min(backoff * 2, RETRY_BACKOFF_MAX_S)

    def _write_error(self, record: SourceRecord | SourceBatch, exc: BaseException,
                     partition: int | None = None) -> RecordWriteError:
        where = record.partition if partition is None else partition
        return RecordWriteError(
            f"Task {self.id} could not write the record of source partition {record.source_partition} at "
            f"source offset {record.source_offset} (or a record sent in the same batch) to topic "
            f"{record.topic} partition {where}: {exc!r}. Nothing after it is written; the task restarts "
            f"from its last stored offset")

    def _on_ack(self, future: asyncio.Future, record: SourceRecord | SourceBatch, pending,
                source: SourceRecord | SourceBatch, size: int = 0) -> None:
        self._in_flight -= 1
        self._unacked_bytes -= size
        if not self._room.is_set():
            self._room.set()  # the waiting send checks again whether it fits now
        if future.cancelled():
            return
        error = future.exception()  # retrieved even when failed already, so asyncio does not complain
        if self.failed or (error is not None and self._producer_stopping):
            return  # given up on by the stop: written again from the last stored offset, not a task failure
        if error is not None:
            # aiokafka already retried retriable errors (idempotent batches never expire): this is final.
            exc = self._write_error(record, error)
            exc.__cause__ = error
            self._fail(exc)
            return
        metadata = future.result()
        released = self._tracker.ack(pending)  # dropped records this makes done (transforms only)
        self._last_progress = self._unacked_since = time.monotonic()
        self._acked.append((source, RecordMetadata(metadata.topic, metadata.partition, metadata.offset,
                                                   metadata.timestamp)))
        if released:
            self._acked.extend((r, None) for r in released)
        self._acked_event.set()
        if record.topic not in self._topics:
            self._topics.add(record.topic)
            if self._on_topic is not None:
                self._on_topic(self.id.connector, record.topic)

    async def _drain_acked(self) -> None:
        while self._acked:
            record, metadata = self._acked.popleft()
            if isinstance(record, SourceBatch):
                await self._notify_task("commit_batch", self.task.commit_batch(record, metadata))
            else:
                await self._notify_task("commit_record", self.task.commit_record(record, metadata))

    async def _notify_task(self, what: str, coro) -> None:
        """Call commit()/commit_record(): a failure is logged and the task goes on, as in Connect."""
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("Task %s raised from %s(); continuing (Connect treats it the same way)", self.id, what)

    async def _commit_offsets(self) -> None:
        for partition, offset in self._tracker.committable():
            self._unstored[partition_identity(partition)] = (partition, offset)
        if not self._unstored:
            return
        pending = list(self._unstored.items())
        batch = [entry for _, entry in pending]
        try:
            await self._store.put(self.id.connector, batch)
        except Exception as exc:
            log.error("Task %s could not store %d source offsets (%r); retrying with the next flush",
                      self.id, len(batch), exc)
            return
        for key, entry in pending:
            if self._unstored.get(key) is entry:  # not replaced by a newer offset while the put ran
                del self._unstored[key]
        self._commit_due = True
