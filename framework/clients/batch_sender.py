"""BatchSender: forwarded record batches written to their leaders by a loop of mirrorline's own.

A mirror task that forwards whole record batches (:class:`~mirrorline.clients.forwarded_batch.ForwardedBatch`)
needs none of what aiokafka's accumulator and sender do for records: no batch to fill, no linger,
no compression. Going through them still costs, per round trip, a batch object and its futures, a
drain over every partition, a task and an ``asyncio.wait`` per loop: about half of what a trickle's
fetch-and-produce round trip cost mirrorline in CPU (docs/performance.md, *The floor under a
rewrite*). :class:`BatchSender` writes those batches instead, for an idempotent producer that is
not transactional, on the same aiokafka client (connections, metadata, authentication) and under
the same producer id and sequence numbers:

- each partition has a queue; at most one of its batches is on the wire at a time (aiokafka's
  "muted" partitions, kept here), so per-partition order and the idempotent sequence numbers hold;
- every partition with a batch ready and none in flight goes into one Produce request per leader,
  the next time the event loop turns (so a task's whole poll goes in one request), split by size
  over ``produce.connections.per.broker`` connections (:func:`~mirrorline.clients.produce_lanes.split_by_size`),
  at most :data:`MAX_IN_FLIGHT` requests in flight per connection, as Java's producer pipelines,
  each of at most :data:`MAX_REQUEST_BYTES`;
- a batch takes its sequence number when it first goes on the wire and keeps it for every retry,
  so a write the broker had already taken is answered as a duplicate, not written twice;
- a retriable refusal or a lost connection sends the batch again after its own back-off
  (``retry.backoff.ms`` x 2^(n-1), at most ``retry.backoff.max.ms``, as
  :mod:`~mirrorline.clients.produce_retries` does for aiokafka's batches), with a spaced metadata
  refresh when the refusal says the metadata is stale; a partition the broker has not made yet is
  held by the producer's :class:`~mirrorline.clients.partition_readiness.ReadinessProbe` until it is
  writable. As aiokafka's idempotent producer, nothing is given up while retriable: the runtime's
  delivery bound and stall watchdog say when that takes too long;
- any other refusal fails the batch's future with the contract's error, and every batch queued
  behind it for that partition with it: nothing is written after a gap. The partition's sequence
  number goes back to the failed batch's, since the broker never took it.

Batches written here and records written through aiokafka never overlap on one partition: each
path waits for the other's writes to a partition before it writes there (:meth:`idle`,
:meth:`RecordProducer._records_idle`). A mirror task uses one path only.

(This relies on aiokafka's client, transaction manager and sender attributes, which is one reason
aiokafka is pinned to a minor version.)
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque

from aiokafka.errors import (DuplicateSequenceNumber, InvalidProducerEpoch, KafkaError, ProducerFenced,
                             TopicAuthorizationFailedError, for_code)
from aiokafka.protocol.produce import ProduceRequest
from aiokafka.structs import TopicPartition

from mirrorline.api.records import RecordMetadata
from mirrorline.clients.errors import translate
from mirrorline.clients.forwarded_batch import ForwardedBatch
from mirrorline.clients.partition_readiness import NOT_WRITABLE_YET, ReadinessProbe
from mirrorline.clients.produce_lanes import split_by_size
from mirrorline.clients.produce_retries import SpacedRefresh, retry_backoff_s
from mirrorline.clients.retry_warnings import PRODUCER_SENDER_LOGGER

__all__ = ["MAX_IN_FLIGHT", "MAX_REQUEST_BYTES", "BatchSender", "make_batch_sender"]

log = logging.getLogger(__name__)
#: retry warnings go where aiokafka's sender writes its own, so the same thinning applies
retry_log = logging.getLogger(PRODUCER_SENDER_LOGGER)

#: Produce requests in flight per connection (Java's ``max.in.flight.requests.per.connection`` default)
MAX_IN_FLIGHT = 5
#: the most bytes of batches in one Produce request: far under a broker's ``socket.request.max.bytes``
#: (100 MiB by default, past which it closes the connection), with room for thousands of partitions'
#: batches per request (aiokafka's sender put every ready batch of a broker into one, without bound)
MAX_REQUEST_BYTES = 32 * 1024 * 1024


class _Outgoing:
    """One batch on its way: its partition, bytes, future, sequence number once given, and retries."""

    __slots__ = ("tp", "batch", "future", "base_sequence", "retry_count")

    def __init__(self, tp: TopicPartition, batch: ForwardedBatch, future: asyncio.Future):
        self.tp = tp
        self.batch = batch
        self.future = future
        self.base_sequence: int | None = None
        self.retry_count = 0

    def expired(self) -> bool:
        """An idempotent producer's batch never expires (the readiness probe asks)."""
        return False


def _size(outgoing: _Outgoing) -> int:
    return outgoing.batch.size()


def _warn_retrying(partitions, error) -> None:
    """aiokafka's own retry warning, word for word, so :mod:`.retry_warnings` thins ours with its."""
    retry_log.warning("Got error produce response on topic-partition %s, retrying. Error: %s",
                      ", ".join(f"{tp.topic}-{tp.partition}" for tp in partitions), error)


def _bounded(share: dict[TopicPartition, _Outgoing], limit: int) -> list[dict[TopicPartition, _Outgoing]]:
    """``share`` cut into requests of at most ``limit`` bytes each (a bigger batch goes alone)."""
    requests: list[dict[TopicPartition, _Outgoing]] = [{}]
    size = 0
    for tp, outgoing in share.items():
        batch_size = _size(outgoing)
        if size and size + batch_size > limit:
            requests.append({})
            size = 0
        requests[-1][tp] = outgoing
        size += batch_size
    return requests


class BatchSender:
    """Writes :class:`ForwardedBatch` es for one idempotent, non-transactional aiokafka producer (see the module docstring).

    ``producer`` is the (unstarted or started) ``AIOKafkaProducer``; ``lanes`` its produce
    connections per broker; ``retry_backoff_max_s`` Java's ``retry.backoff.max.ms`` in seconds.
    """

    def __init__(self, producer, lanes: int, retry_backoff_max_s: float):
        txn = producer._txn_manager
        if txn is None or txn.transactional_id is not None:
            raise ValueError("BatchSender writes for an idempotent producer that is not transactional")
        sender = producer._sender
        self._client = producer.client
        self._txn = txn
        self._acks = sender._acks
        self._timeout_ms = sender._request_timeout_ms
        self._base_s = sender._retry_backoff
        self._max_s = retry_backoff_max_s
        self._lanes = max(lanes, 1)
        self._queues: dict[TopicPartition, deque[_Outgoing]] = {}
        #: partitions with a batch on the wire, backing off or held by the probe
        self._busy: set[TopicPartition] = set()
        #: partitions with a batch queued and none busy
        self._ready: set[TopicPartition] = set()
        #: (node, lane) -> requests in flight on that connection
        self._in_flight: dict[tuple[int, int], int] = {}
        self._tasks: set[asyncio.Task] = set()
        self._timers: dict[_Outgoing, asyncio.TimerHandle] = {}
        self._drain_due: asyncio.Handle | None = None
        self._pending = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._closed = False
        self._refresh = SpacedRefresh(self._client, self._base_s)
        self.probe = ReadinessProbe(self._client, release=self._release, fallback=self._back_off,
                                    refresh=self._refresh.request, backoff=self._backoff_s,
                                    base_s=self._base_s, max_s=self._max_s)

    # -- what the producer calls ----------------------------------------------------------------
    @property
    def pending(self) -> int:
        """Batches handed over and not yet acknowledged or failed."""
        return self._pending

    def has_pending(self, tp: TopicPartition) -> bool:
        """Whether a batch for ``tp`` is queued or in flight."""
        return tp in self._queues

    def has_pending_topic(self, topic: str) -> bool:
        """Whether a batch for any partition of ``topic`` is queued or in flight."""
        return any(tp.topic == topic for tp in self._queues)

    def submit(self, tp: TopicPartition, batch: ForwardedBatch) -> asyncio.Future:
        """Queue ``batch`` for ``tp``; returns the future of its :class:`RecordMetadata`."""
        if self._closed:
            raise KafkaError("the producer is stopping: no batch is taken any more")
        future = asyncio.get_running_loop().create_future()
        queue = self._queues.get(tp)
        if queue is None:
            queue = self._queues[tp] = deque()
        queue.append(_Outgoing(tp, batch, future))
        self._pending += 1
        self._idle.clear()
        if tp not in self._busy:
            self._ready.add(tp)
            self._schedule()
        return future

    async def idle(self, tp: TopicPartition | None = None) -> None:
        """Wait until every batch (of ``tp``, or of all partitions) was acknowledged or failed."""
        if tp is None:
            await self._idle.wait()
            return
        while tp in self._queues:
            futures = [outgoing.future for outgoing in self._queues[tp]]
            await asyncio.wait(futures)

    def give_up(self, exc: BaseException) -> int:
        """Fail every batch not yet acknowledged with ``exc`` (a stop that cannot wait); returns how many."""
        self._cancel_retries()
        error = translate(exc)
        failed = 0
        for tp in list(self._queues):
            for outgoing in self._queues.pop(tp):
                if not outgoing.future.done():
                    outgoing.future.set_exception(error)
                    outgoing.future.exception()  # counted by the caller: nobody else must be told
                    failed += 1
        self._pending = 0
        self._busy.clear()
        self._ready.clear()
        self._idle.set()
        return failed

    async def close(self) -> None:
        """Take no more batches, wait for every one handed over, then stop the background work."""
        self._closed = True
        await self._idle.wait()
        self._cancel_retries()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def _cancel_retries(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self.probe.stop()
        self._refresh.cancel()
        if self._drain_due is not None:
            self._drain_due.cancel()
            self._drain_due = None

    # -- sending ----------------------------------------------------------------------------------
    def _schedule(self) -> None:
        """Drain once the event loop turns: whatever else is handed over until then goes in the same requests."""
        if self._drain_due is None:
            self._drain_due = asyncio.get_running_loop().call_soon(self._drain)

    def _drain(self) -> None:
        self._drain_due = None
        if not self._ready:
            return
        if not self._txn.has_pid():  # the producer is still getting its id: try again shortly
            self._drain_due = asyncio.get_running_loop().call_later(self._base_s, self._drain)
            return
        cluster = self._client.cluster
        by_node: dict[int, dict[TopicPartition, _Outgoing]] = {}
        unknown = []
        for tp in self._ready:
            leader = cluster.leader_for_partition(tp)
            if leader is None or leader < 0:
                unknown.append(tp)
                continue
            node = by_node.get(leader)
            if node is None:
                node = by_node[leader] = {}
            node[tp] = self._queues[tp][0]
        for tp in unknown:  # no leader known: wait for a refresh, as a refused batch does
            self._ready.discard(tp)
            self._busy.add(tp)
            self._back_off(self._queues[tp][0], refresh=True)
        for node_id, batches in by_node.items():
            free = [lane for lane in range(self._lanes) if self._in_flight.get((node_id, lane), 0) < MAX_IN_FLIGHT]
            if not free:
                continue  # left ready: a response from that broker drains again
            shares = split_by_size(batches, len(free), _size) if len(free) > 1 else [batches]
            for lane, share in zip(free, shares):
                for request in _bounded(share, MAX_REQUEST_BYTES):
                    if self._in_flight.get((node_id, lane), 0) >= MAX_IN_FLIGHT:
                        break  # the rest stays ready for the next drain
                    self._dispatch(node_id, lane, request)

    def _dispatch(self, node_id: int, lane: int, share: dict[TopicPartition, _Outgoing]) -> None:
        txn = self._txn
        pid, epoch = txn.producer_id, txn.producer_epoch
        topics: dict[str, list] = {}
        for tp, outgoing in share.items():
            self._ready.discard(tp)
            self._busy.add(tp)
            if outgoing.base_sequence is None:
                outgoing.base_sequence = txn.sequence_number(tp)
                txn.increment_sequence_number(tp, outgoing.batch.record_count())
                outgoing.batch._set_producer_state(pid, epoch, outgoing.base_sequence)
            partitions = topics.get(tp.topic)
            if partitions is None:
                partitions = topics[tp.topic] = []
            partitions.append((tp.partition, outgoing.batch._build()))
        request = ProduceRequest(required_acks=self._acks, timeout=self._timeout_ms,
                                 topics=list(topics.items()), transactional_id=None)
        key = (node_id, lane)
        self._in_flight[key] = self._in_flight.get(key, 0) + 1
        task = asyncio.get_running_loop().create_task(self._request(key, request, share))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _request(self, key: tuple[int, int], request, share: dict[TopicPartition, _Outgoing]) -> None:
        node_id, lane = key
        try:
            group = {} if lane == 0 else {"group": ("produce-lane", lane)}
            try:
                response = await self._client.send(node_id, request, **group)
            except KafkaError as err:
                if err.retriable:
                    _warn_retrying(share, err)
                    for outgoing in share.values():  # the broker may have gone: ask who leads now
                        self._back_off(outgoing, refresh=True)
                else:
                    for outgoing in share.values():
                        self._fail(outgoing, err)
                return
            self._answer(node_id, response, share)
        except asyncio.CancelledError:
            for outgoing in share.values():  # stopping: the batches stay queued, the stop decides
                self._busy.discard(outgoing.tp)
            raise
        except Exception as exc:  # a bug here must not leave batches waiting for ever
            log.exception("Writing %d forwarded batches to broker %s failed unexpectedly", len(share), node_id)
            for outgoing in share.values():
                if not outgoing.future.done():
                    self._fail(outgoing, exc)
        finally:
            self._in_flight[key] -= 1
            if self._ready:
                self._schedule()

    def _answer(self, node_id: int, response, share: dict[TopicPartition, _Outgoing]) -> None:
        answered = set()
        for topic, partitions in response.topics:
            for answer in partitions:
                tp = TopicPartition(topic, answer[0])
                outgoing = share.get(tp)
                if outgoing is None:
                    continue
                answered.add(tp)
                code = answer[1]
                error = for_code(code)
                if code == 0 or error is DuplicateSequenceNumber:
                    timestamp = answer[3] if len(answer) > 3 else -1
                    self._done(outgoing, RecordMetadata(topic, tp.partition, answer[2], timestamp))
                elif code in NOT_WRITABLE_YET:
                    outgoing.retry_count += 1
                    _warn_retrying((tp,), error)
                    self._refresh.request()
                    self.probe.hold(node_id, outgoing)
                elif error.retriable:
                    _warn_retrying((tp,), error)
                    self._back_off(outgoing, refresh=getattr(error, "invalid_metadata", False))
                elif error is InvalidProducerEpoch:
                    self._fail(outgoing, ProducerFenced())
                elif error is TopicAuthorizationFailedError:
                    self._fail(outgoing, error(topic))
                else:
                    self._fail(outgoing, error())
        for tp, outgoing in share.items():
            if tp not in answered:  # a broker that leaves a partition unanswered: ask again
                self._back_off(outgoing)

    # -- a batch's end, or its next attempt ---------------------------------------------------------
    def _done(self, outgoing: _Outgoing, metadata: RecordMetadata) -> None:
        tp = outgoing.tp
        queue = self._queues.get(tp)
        if queue is None or not queue or queue[0] is not outgoing:
            return  # given up on meanwhile
        queue.popleft()
        if not outgoing.future.done():
            outgoing.future.set_result(metadata)
        self._finished(tp, queue, 1)

    def _fail(self, outgoing: _Outgoing, exc: BaseException) -> None:
        """Fail ``outgoing`` and everything queued behind it for its partition (no write after a gap)."""
        tp = outgoing.tp
        queue = self._queues.get(tp)
        if queue is None or not queue or queue[0] is not outgoing:
            return
        if outgoing.base_sequence is not None:  # the broker never took it: the next write reuses its number
            self._txn._sequence_numbers[tp] = outgoing.base_sequence
        error = translate(exc)
        failed = len(queue)
        while queue:
            behind = queue.popleft()
            if not behind.future.done():
                behind.future.set_exception(error)
        log.error("Writing to %s-%d failed: %r; %d batch(es) of that partition were failed with it, so that "
                  "nothing is written after the gap", tp.topic, tp.partition, error, failed)
        self._finished(tp, queue, failed)

    def _finished(self, tp: TopicPartition, queue: deque, count: int) -> None:
        self._busy.discard(tp)
        self._pending -= count
        if queue:
            self._ready.add(tp)
            self._schedule()
        else:
            del self._queues[tp]
            if not self._pending:
                self._idle.set()

    def _backoff_s(self, failures: int) -> float:
        return retry_backoff_s(failures, self._base_s, self._max_s)

    def _back_off(self, outgoing: _Outgoing, refresh: bool = False) -> None:
        """Send ``outgoing`` again after its back-off (its partition stays busy meanwhile)."""
        if refresh:
            self._refresh.request()
        outgoing.retry_count += 1
        self._timers[outgoing] = asyncio.get_running_loop().call_later(
            self._backoff_s(outgoing.retry_count), self._release, outgoing)

    def _release(self, outgoing: _Outgoing) -> None:
        """``outgoing`` may go again: first in its partition's queue, as it still is."""
        self._timers.pop(outgoing, None)
        queue = self._queues.get(outgoing.tp)
        if queue is None or not queue or queue[0] is not outgoing:
            return
        self._busy.discard(outgoing.tp)
        self._ready.add(outgoing.tp)
        self._schedule()


def make_batch_sender(producer, lanes: int, retry_backoff_max_s: float) -> BatchSender | None:
    """A :class:`BatchSender` for ``producer`` when it is idempotent and not transactional, else None."""
    txn = producer._txn_manager
    if txn is None or txn.transactional_id is not None:
        return None
    return BatchSender(producer, lanes, retry_backoff_max_s)

