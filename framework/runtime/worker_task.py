"""WorkerSourceTask: runs one SourceTask — poll, produce, track acks, commit offsets.

Delivery: records are written with acks=all and idempotence, one producer per task, so
records of a Kafka partition keep the order ``poll`` returned them in. Offsets are stored
every ``offset.flush.interval.ms`` and on stop, only up to the last record acknowledged
together with all before it (:class:`~framework.runtime.offset_tracker.OffsetTracker`).
A crash therefore re-sends at most the records after the last flush: at-least-once.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from framework.api.producer import RecordProducer

from framework.api.errors import RetriableError
from framework.api.records import ConnectorTaskId, RecordMetadata, SourceRecord
from framework.api.task import SourceTask
from framework.runtime.background import BackgroundTasks
from framework.runtime.context import StoreOffsetReader, WorkerSourceTaskContext
from framework.runtime.offset_tracker import OffsetTracker
from framework.storage.offsets import OffsetStore, partition_key
from framework.storage.status import State

log = logging.getLogger(__name__)

StatusCallback = Callable[[ConnectorTaskId, State, str | None], Awaitable[None]]

RETRY_BACKOFF_S = 1.0


class WorkerSourceTask:
    """Drives one source task from start to stop and reports its state through ``on_status``."""

    def __init__(self, task_id: ConnectorTaskId, task: SourceTask, config: dict[str, str], *,
                 producer_kwargs: dict[str, Any], offset_store: OffsetStore, on_status: StatusCallback,
                 flush_interval_s: float, on_topic: Callable[[str, str], None] | None = None):
        self.id = task_id
        self.task = task
        self.config = config
        self._producer_kwargs = producer_kwargs
        self._store = offset_store
        self._on_status = on_status
        self._on_topic = on_topic
        self._flush_interval_s = flush_interval_s
        self._tracker = OffsetTracker(task_id.connector)
        self._acked: deque[tuple[SourceRecord, RecordMetadata]] = deque()
        self._acked_event = asyncio.Event()
        self._resumed = asyncio.Event()
        self._resumed.set()
        self._background = BackgroundTasks(str(task_id))
        self._producer: RecordProducer | None = None
        self._send_error: BaseException | None = None
        self._commit_due = False
        self._unstored: dict[str, tuple[dict, dict]] = {}
        self._started = False
        self._topics: set[str] = set()
        self.failed = False

    # -- lifecycle -----------------------------------------------------------------------
    async def start(self, paused: bool = False) -> None:
        """Start the producer and the task, then the poll and flush loops; a failure leaves it FAILED."""
        try:
            # Larger batches than aiokafka's 16 KB default: aiokafka has one request in flight per
            # broker, so small batches cap throughput (measured: +35% at 1 KB records, and a third
            # of the broker CPU). producer.batch.size / producer.override.batch.size still win.
            self._producer = RecordProducer(**{"acks": "all", "enable_idempotence": True, "linger_ms": 5,
                                               "max_batch_size": 512 * 1024, **self._producer_kwargs})
            await self._producer.start()
            self.task.initialize(WorkerSourceTaskContext(self.id, StoreOffsetReader(self._store, self.id.connector)))
            await self.task.start(dict(self.config))
            self._started = True
        except Exception as exc:
            await self._fail(exc)
            return
        if paused:
            await self.pause()
        else:
            await self._on_status(self.id, State.RUNNING, None)
        self._background.spawn(self._poll_loop(), "poll")
        self._background.spawn(self._ack_loop(), "acks")
        self._background.spawn(self._flush_loop(), "flush")

    async def pause(self) -> None:
        """Stop polling until resumed; records already returned are still written."""
        if not self.failed:
            self._resumed.clear()
            await self._on_status(self.id, State.PAUSED, None)

    async def resume(self) -> None:
        """Poll again after a pause."""
        if not self.failed:
            self._resumed.set()
            await self._on_status(self.id, State.RUNNING, None)

    async def stop(self, timeout: float = 10.0) -> None:
        """Stop polling, write out what is in flight, store offsets, then stop the task and producer."""
        await self._background.close(timeout)
        await self._shutdown(timeout)

    async def _shutdown(self, timeout: float) -> None:
        if self._producer is not None:
            try:
                await asyncio.wait_for(self._producer.flush(), timeout)
            except Exception as exc:  # a broker down at shutdown: keep the offsets we have
                log.warning("Task %s could not flush its producer on stop (%s); records after the last "
                            "stored offset will be written again on restart", self.id, exc)
            await self._commit_offsets()
            await self._drain_acked()
        if self._started:
            self._started = False
            try:
                await self.task.stop()
            except Exception:
                log.exception("Task %s raised from stop()", self.id)
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None

    def forget_topics(self) -> None:
        """Forget which topics this task wrote to (topic-tracking reset)."""
        self._topics.clear()

    # -- loops ---------------------------------------------------------------------------
    async def _poll_loop(self) -> None:
        while True:
            await self._resumed.wait()
            if self._send_error is not None:
                await self._fail(self._send_error)
                return
            try:
                records = await self.task.poll()
            except asyncio.CancelledError:
                raise
            except RetriableError as exc:
                log.warning("Task %s poll failed with a retriable error, retrying in %.0fs: %s",
                            self.id, RETRY_BACKOFF_S, exc)
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            except Exception as exc:
                await self._fail(exc)
                return
            for record in records or ():
                await self._send(record)
            if self._commit_due:
                self._commit_due = False
                await self._call_task("commit", self.task.commit())

    async def _ack_loop(self) -> None:
        # commit_record runs as soon as acks arrive (as Connect calls commitRecord from the producer
        # callback), not at the next poll: MM2 measures replication latency and emits offset syncs there.
        while True:
            await self._acked_event.wait()
            self._acked_event.clear()
            await self._drain_acked()

    async def _flush_loop(self) -> None:
        while True:
            await asyncio.sleep(self._flush_interval_s)
            await self._commit_offsets()
            self._commit_due = True  # Connect calls commit() after every flush, even an empty one

    # -- producing -----------------------------------------------------------------------
    async def _send(self, record: SourceRecord) -> None:
        assert self._producer is not None
        future = await self._producer.send(record.topic, value=record.value, key=record.key,
                                           partition=record.partition, timestamp_ms=record.timestamp,
                                           headers=list(record.headers) or None)
        pending = self._tracker.submit(record.source_partition, record.source_offset)
        future.add_done_callback(lambda f: self._on_ack(f, record, pending))

    def _on_ack(self, future: asyncio.Future, record: SourceRecord, pending) -> None:
        if future.cancelled():
            return
        error = future.exception()
        if error is not None:
            if self._send_error is None:
                self._send_error = error
            return
        metadata = future.result()
        self._tracker.ack(pending)
        self._acked.append((record, RecordMetadata(metadata.topic, metadata.partition, metadata.offset,
                                                   metadata.timestamp)))
        self._acked_event.set()
        if record.topic not in self._topics:
            self._topics.add(record.topic)
            if self._on_topic is not None:
                self._on_topic(self.id.connector, record.topic)

    async def _drain_acked(self) -> None:
        while self._acked:
            record, metadata = self._acked.popleft()
            await self._call_task("commit_record", self.task.commit_record(record, metadata))

    async def _call_task(self, what: str, coro) -> None:
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("Task %s raised from %s(); continuing", self.id, what)

    async def _commit_offsets(self) -> None:
        for partition, offset in self._tracker.committable():
            self._unstored[partition_key(self.id.connector, partition)] = (partition, offset)
        if not self._unstored:
            return
        batch = list(self._unstored.values())
        try:
            await self._store.put(self.id.connector, batch)
        except Exception as exc:
            log.error("Task %s could not store %d source offsets (%s); retrying with the next flush",
                      self.id, len(batch), exc)
            return
        for partition, offset in batch:
            key = partition_key(self.id.connector, partition)
            if self._unstored.get(key) == (partition, offset):
                del self._unstored[key]
        self._commit_due = True

    async def _fail(self, exc: BaseException) -> None:
        self.failed = True
        trace = "".join(traceback.format_exception(exc))
        log.error("Task %s failed and will not run until restarted: %s", self.id, exc)
        await self._on_status(self.id, State.FAILED, trace)
