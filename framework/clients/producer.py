"""A producer that writes every record Kafka accepts and waits for partitions it does not know yet.

aiokafka's ``send()`` asserts that a record has a key or a value, but Kafka allows records
with neither, and a mirror must copy them byte for byte. :class:`RecordProducer` sends such
records through the same metadata, partitioner and accumulator path ``send()`` uses.

aiokafka also asserts (``Unrecognized partition``) when a record names a partition its metadata
does not list, which happens whenever a topic was just grown, was just created, or the metadata
is stale. A mirror sends every record to an explicit partition, so :class:`RecordProducer`
refreshes the metadata and waits for the partition instead, bounded like the Java producer's
``max.block.ms``, and then raises the retriable :class:`PartitionNotAvailableError`. A record is
never sent to another partition than the one asked for.

By default the producer's metadata requests never make a broker auto-create a topic (see
:mod:`mirrorline.clients.no_auto_create`); ``allow_auto_create_topics=True`` lets the broker's
``auto.create.topics.enable`` decide, as for a Java producer (the worker's choice for a source task
whose connector neither creates its topics itself nor has topic creation configured).

What it hands back is the contract's: a send's future resolves to
:class:`~mirrorline.api.records.RecordMetadata`, and fails with a
:class:`~mirrorline.api.errors.KafkaError`. aiokafka resolves a record's future in its batch
(``MessageBatch.done`` / ``failure``); each batch this producer creates is one of
:class:`_TranslatedBatch`, which does exactly that with our metadata and our errors, so nothing is
added per record. :class:`KafkaProducer` is the contract's
:class:`~mirrorline.api.clients.Producer` around it (``context.clients.producer``), with what the
runtime needs besides: forwarding encoded batches and transactions.

(This touches aiokafka internals, which is why aiokafka is pinned to a minor version.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.errors import IllegalOperation, KafkaTimeoutError, TopicAuthorizationFailedError
from aiokafka.partitioner import DefaultPartitioner
from aiokafka.producer.message_accumulator import MessageBatch
from aiokafka.producer.transaction_manager import TransactionState

from mirrorline.api.clients import Producer
from mirrorline.api.errors import ConnectError, PartitionNotAvailableError
from mirrorline.api.records import RecordMetadata
from mirrorline.clients import metadata_reuse, no_auto_create, produce_retries
from mirrorline.clients.batch_sender import make_batch_sender
from mirrorline.clients.consumer import AIO_ERRORS
from mirrorline.clients.errors import translate
from mirrorline.clients.forwarded_batch import ForwardedBatch
from mirrorline.clients.kafka_clients import client_kwargs
from mirrorline.clients.key_partitioner import partition_for_key
from mirrorline.clients.produce_lanes import LaneClient, enable_lanes
from mirrorline.clients.retry_warnings import thin_retry_warnings

DEFAULT_MAX_BLOCK_MS = 60_000
#: Java's ``buffer.memory`` default: bytes handed to a producer and not yet acknowledged.
DEFAULT_BUFFER_MEMORY = 33_554_432
# Upper bound of the pause between two metadata refreshes while waiting for a partition.
_MAX_REFRESH_BACKOFF_S = 1.0
#: keyed records' partitions remembered per producer (internal topics' keys are a few thousand)...
_CACHED_KEYS = 50_000
#: ... for keys no longer than this (a connector writing large, ever-new keys gains nothing from it)
_CACHED_KEY_BYTES = 512


def _default_choice(known, key: bytes) -> int:
    """The partition aiokafka's (and Java's) default partitioner gives ``key`` among the ``known``
    partitions: the murmur2 index into them in ascending order (:mod:`.key_partitioner`)."""
    index = partition_for_key(key, len(known))
    return index if len(known) - 1 in known else sorted(known)[index]


class _PartitionUnknown(Exception):
    """Raised by ``_partition`` in place of aiokafka's assertion; ``send`` waits and tries again."""


def _metadata(topic, partition, _tp, offset, timestamp, _timestamp_type, _log_start_offset) -> RecordMetadata:
    return RecordMetadata(topic, partition, offset, timestamp)


class _TranslatedBatch(MessageBatch):
    """aiokafka's batch of a producer's records, resolving their futures with the contract's types."""

    def done(self, base_offset, timestamp=None, log_start_offset=None, _record_metadata_class=None):
        super().done(base_offset, timestamp, log_start_offset, _record_metadata_class=_metadata)

    def failure(self, exception):
        super().failure(translate(exception))


def _translate_batches(producer: AIOKafkaProducer) -> None:
    """Make every batch ``producer`` creates a :class:`_TranslatedBatch` (aiokafka builds them in one place)."""
    accumulator = producer._message_accumulator
    original = accumulator._append_batch

    def _append_batch(builder, tp):
        batch = original(builder, tp)
        batch.__class__ = _TranslatedBatch
        return batch

    accumulator._append_batch = _append_batch


class RecordProducer(AIOKafkaProducer):
    """AIOKafkaProducer for source tasks: null key *and* value allowed; unknown partitions are waited for.

    ``max_block_ms`` (Java ``max.block.ms``, default 60 s) bounds how long ``send`` waits for
    the topic, or the explicit partition, to appear in the metadata. ``allow_auto_create_topics``
    (default False) lets this producer's metadata requests have a broker auto-create a missing topic.
    A batch a broker refuses with a retriable error waits ``retry_backoff_ms`` x 2^(n-1) after its
    n-th failure, at most ``retry_backoff_max_ms`` (Java's ``retry.backoff.max.ms``, 1,000 ms), while
    the others go on (see :mod:`mirrorline.clients.produce_retries`).
    """

    def __init__(self, *args, max_block_ms: int = DEFAULT_MAX_BLOCK_MS, allow_auto_create_topics: bool = False,
                 produce_lanes: int = 1, buffer_memory: int = DEFAULT_BUFFER_MEMORY,
                 retry_backoff_max_ms: int = produce_retries.DEFAULT_RETRY_BACKOFF_MAX_MS, **kwargs):
        if max_block_ms < 0:
            raise ValueError(f"max_block_ms must be >= 0, not {max_block_ms}")
        if buffer_memory < 0:
            raise ValueError(f"buffer.memory must be >= 0, not {buffer_memory}")
        if produce_lanes < 1:
            raise ValueError(f"produce.connections.per.broker must be >= 1, not {produce_lanes}")
        if retry_backoff_max_ms < 0:
            raise ValueError(f"retry.backoff.max.ms must be >= 0, not {retry_backoff_max_ms}")
        super().__init__(*args, **kwargs)
        #: (topic, key) -> (partition count, partition) the default partitioner chose (see _partition)
        self._key_partitions: dict[tuple[str, bytes], tuple[int, int]] = {}
        enable_lanes(self, produce_lanes)
        produce_retries.install(self, produce_lanes, retry_backoff_max_ms, lane_client=LaneClient)
        thin_retry_warnings()
        self.max_block_ms = max_block_ms
        #: Java's ``buffer.memory``: what a source task may have handed over unacknowledged (the
        #: runtime waits for acknowledgements beyond it; aiokafka itself has no such bound)
        self.buffer_memory = buffer_memory
        self.allow_auto_create_topics = allow_auto_create_topics
        if allow_auto_create_topics:
            no_auto_create.allow_auto_create(self.client)
        metadata_reuse.ask_for_no_topics_when_empty(self.client)  # before its first record it needs none
        _translate_batches(self)
        #: writes forwarded batches of an idempotent, non-transactional producer (None: aiokafka's sender does)
        self.batch_sender = make_batch_sender(self, produce_lanes, retry_backoff_max_ms / 1000)

    async def stop(self):
        """Wait for every forwarded batch handed over, then stop as aiokafka's producer does."""
        if self.batch_sender is not None:
            await self.batch_sender.close()
        await super().stop()

    async def flush(self):
        """Wait until every record and forwarded batch handed over was acknowledged or failed."""
        await super().flush()
        if self.batch_sender is not None:
            await self.batch_sender.idle()

    async def _batches_idle(self, topic: str, partition: int | None) -> None:
        """Wait for the forwarded batches in flight to ``topic`` (``partition``, or any of its partitions
        when the partitioner will choose): records never overtake a batch on its partition."""
        sender = self.batch_sender
        if sender is None or not sender.pending:
            return
        if partition is not None:
            await sender.idle(TopicPartition(topic, partition))
        elif sender.has_pending_topic(topic):
            await sender.idle()

    async def _records_idle(self, tp: TopicPartition) -> None:
        """Before a forwarded batch goes to ``tp``: if aiokafka has batches queued or in flight there, wait
        until all of its batches are done (it flushes as a whole), so the forwarded batch never overtakes them."""
        if self._message_accumulator._batches.get(tp) or tp in self._sender._muted_partitions:
            await self._message_accumulator.flush()

    async def send(self, topic, value=None, key=None, partition=None, timestamp_ms=None, headers=None):
        """As ``AIOKafkaProducer.send``, and a record with neither key nor value is written as such.

        Raises :class:`PartitionNotAvailableError` (retriable) if ``topic`` or ``partition`` is
        still not in the cluster metadata after ``max_block_ms``.
        """
        if partition is not None and partition < 0:
            raise ValueError(f"partition must be >= 0, not {partition} (topic {topic})")
        await self._batches_idle(topic, partition)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.max_block_ms / 1000
        while True:
            await self._wait_for_partition(topic, partition, deadline)
            try:
                return await self._send_known(topic, value, key, partition, timestamp_ms, headers)
            except _PartitionUnknown:
                # Only reachable if the metadata changed between the wait and the send: wait again.
                continue

    async def send_record_batch(self, topic: str, partition: int, data: bytes, record_count: int):
        """Write one already-encoded record batch (magic 2) to ``topic``/``partition`` as it is.

        Only the producer fields and the CRC are rewritten (:class:`ForwardedBatch`); returns the
        future of its RecordMetadata, whose offset is the batch's first record's. Waits for an
        unknown partition as :meth:`send` does.
        """
        if partition < 0:
            raise ValueError(f"partition must be >= 0, not {partition} (topic {topic})")
        txn = self._txn_manager
        batch = ForwardedBatch(data, record_count,
                               transactional=txn is not None and txn.transactional_id is not None)
        deadline = asyncio.get_running_loop().time() + self.max_block_ms / 1000
        if self.batch_sender is None:
            return await self._queue_built(batch, topic, partition, deadline)
        await self._wait_for_partition(topic, partition, deadline)
        tp = TopicPartition(topic, partition)
        await self._records_idle(tp)
        return self.batch_sender.submit(tp, batch)

    async def send_keyed(self, topic: str, records: list[tuple[bytes, bytes | None]],
                         partition: int | None = None) -> list[RecordMetadata]:
        """Write keyed records in as few batches as their partitions need; wait for every acknowledgement.

        Each record goes where :meth:`send` would put it (``partition``, else the default
        partitioner's choice for its key, as Java's producer), in order within its partition.
        Instead of queueing each record through the accumulator, each partition's records are
        appended to batches of up to ``batch.size`` (aiokafka's batch builder) and each batch is
        queued once: the internal topics' writers hand over thousands of records at a time (an
        offsets flush writes one per source partition). Returns each record's
        :class:`RecordMetadata`, in the order given; a batch's failure raises its (translated)
        error once every batch has ended. A record over ``max.request.size`` raises
        ``MessageSizeTooLargeError`` as :meth:`send` does, and then none of them is written.
        """
        if partition is not None and partition < 0:
            raise ValueError(f"partition must be >= 0, not {partition} (topic {topic})")
        if any(key is None for key, _value in records):
            raise ValueError(f"send_keyed writes keyed records only (topic {topic})")
        for key, value in records:  # max.request.size, checked as send() checks it, before anything is queued
            self._serialize(key, value, [])
        await self._batches_idle(topic, partition)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.max_block_ms / 1000
        while True:
            await self._wait_for_partition(topic, partition, deadline)
            try:
                chosen = self._partitions_of(topic, partition, records)
                break
            except _PartitionUnknown:
                continue
        by_partition: dict[int, list[int]] = {}
        for index, target in enumerate(chosen):
            by_partition.setdefault(target, []).append(index)
        #: (future of one batch, [(record index, offset delta, record timestamp), ...])
        sent: list[tuple[asyncio.Future, list[tuple[int, int, int]]]] = []
        for target, indices in by_partition.items():
            builder, placed = self.create_batch(), []
            for index in indices:
                key, value = records[index]
                appended = builder.append(timestamp=None, key=key, value=value)
                if appended is None:  # full: queue it, start the next (a first record always fits)
                    sent.append((await self._queue_built(builder, topic, target, deadline), placed))
                    builder, placed = self.create_batch(), []
                    appended = builder.append(timestamp=None, key=key, value=value)
                placed.append((index, appended.offset, appended.timestamp))
            sent.append((await self._queue_built(builder, topic, target, deadline), placed))
        results = await asyncio.gather(*(future for future, _placed in sent), return_exceptions=True)
        written: list[RecordMetadata | None] = [None] * len(records)
        for result, (_future, placed) in zip(results, sent):
            if isinstance(result, BaseException):
                raise result
            for index, delta, timestamp in placed:
                written[index] = RecordMetadata(topic, result.partition, result.offset + delta,
                                                timestamp if result.timestamp == -1 else result.timestamp)
        return written  # type: ignore[return-value]

    def _partitions_of(self, topic: str, partition: int | None, records) -> list[int]:
        """The partition of each keyed record, as :meth:`_partition` chooses it, with the topic's
        partitions looked up once for all of them, not once per record."""
        known = self._metadata.partitions_for_topic(topic)
        if not known or (partition is not None and partition not in known):
            raise _PartitionUnknown()
        if partition is not None:
            return [partition] * len(records)
        chosen = []
        for key, _value in records:
            choice = self._cached_choice(topic, key, known)
            chosen.append(choice if choice is not None else self._partition(topic, None, None, None, key, None))
        return chosen

    async def _queue_built(self, batch, topic: str, partition: int, deadline: float) -> asyncio.Future:
        """Queue one built (or forwarded) batch for ``partition``, waiting for the partition as
        :meth:`send` would, until ``deadline`` (the loop's time); returns the batch's future."""
        while True:
            await self._wait_for_partition(topic, partition, deadline)
            try:
                return await self.send_batch(batch, topic, partition=partition)
            except _PartitionUnknown:
                continue

    async def _send_known(self, topic, value, key, partition, timestamp_ms, headers):
        if key is not None or value is not None:
            return await super().send(topic, value=value, key=key, partition=partition,
                                      timestamp_ms=timestamp_ms, headers=headers)
        # aiokafka's send() would assert here; the rest mirrors what it does for other records.
        txn = self._txn_manager
        if txn is not None and txn.transactional_id is not None and not txn.is_in_transaction():
            raise IllegalOperation("Can't send messages while not in transaction")
        partition = self._partition(topic, partition, None, None, None, None)
        return await self._message_accumulator.add_message(
            TopicPartition(topic, partition), None, None, self._request_timeout_ms / 1000,
            timestamp_ms=timestamp_ms, headers=headers or [])

    def _partition(self, topic, partition, key, value, serialized_key, serialized_value):
        known = self._metadata.partitions_for_topic(topic)
        if not known or (partition is not None and partition not in known):
            raise _PartitionUnknown()
        if partition is None:
            chosen = self._cached_choice(topic, serialized_key, known)
            if chosen is not None:
                return chosen
        return super()._partition(topic, partition, key, value, serialized_key, serialized_value)

    def _cached_choice(self, topic: str, key, known) -> int | None:
        """The default partitioner's partition for ``key`` among the ``known`` partitions, remembered
        per key; None when it cannot be cached (another partitioner, or a key not small ``bytes``).

        The choice depends on the key and the partition count only, and murmur2 is pure Python.
        The internal topics' writers (offsets, configs, status) write the same few thousand keys
        over and over: thousands of source-partition offsets per flush spent more time hashing
        than encoding."""
        if type(key) is not bytes or len(key) > _CACHED_KEY_BYTES or type(self._partitioner) is not DefaultPartitioner:
            return None
        cache_key = (topic, key)
        cached = self._key_partitions.get(cache_key)
        if cached is not None and cached[0] == len(known):
            return cached[1]
        chosen = _default_choice(known, key)
        if len(self._key_partitions) >= _CACHED_KEYS:
            self._key_partitions.clear()
        self._key_partitions[cache_key] = (len(known), chosen)
        return chosen

    async def learn_topics(self, topics) -> None:
        """Have every topic of ``topics`` the metadata lacks described in one refresh.

        A send to an unknown topic waits for a metadata refresh, and aiokafka's refresh describes
        every topic the producer writes to. A task whose first poll writes to thousands of new
        topics would otherwise wait for one refresh per topic, each larger than the last
        (quadratic: 2,000 new remote topics took minutes). Returns at once when all are known."""
        unknown = [topic for topic in topics if not self._metadata.partitions_for_topic(topic)]
        if not unknown:
            return
        for topic in unknown:
            self.client.add_topic(topic)  # one refresh is scheduled for all of them
        try:
            async with asyncio.timeout(self.max_block_ms / 1000):
                await self.client.force_metadata_update()
        except asyncio.TimeoutError:
            pass  # each send then waits for its own topic, bounded by max.block.ms

    def _known(self, topic: str, partition: int | None) -> bool:
        known = self._metadata.partitions_for_topic(topic)
        return bool(known) and (partition is None or partition in known)

    async def _wait_for_partition(self, topic: str, partition: int | None, deadline: float) -> None:
        """Refresh the metadata until ``topic`` (and ``partition``) is known, or raise at ``deadline``."""
        if self._known(topic, partition):
            return
        loop = asyncio.get_running_loop()
        started = loop.time()
        backoff = max(self.client._retry_backoff, 0.01)
        self.client.add_topic(topic)
        while True:
            try:
                # force_metadata_update() is shielded: timing out here leaves the refresh running.
                async with asyncio.timeout(max(deadline - loop.time(), 0)):
                    await self.client.force_metadata_update()
            except asyncio.TimeoutError:
                pass
            if self._known(topic, partition):
                return
            if topic in self._metadata.unauthorized_topics:
                raise TopicAuthorizationFailedError(topic)
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise self._not_available(topic, partition, loop.time() - started)
            await asyncio.sleep(min(backoff, remaining))
            backoff = min(backoff * 2, _MAX_REFRESH_BACKOFF_S)

    def _not_available(self, topic: str, partition: int | None, waited_s: float) -> PartitionNotAvailableError:
        known = self._metadata.partitions_for_topic(topic)
        waited = f"after waiting {waited_s * 1000:.0f} ms (max.block.ms={self.max_block_ms})"
        if not known:
            if self.allow_auto_create_topics:
                why = ("or that the brokers may create it (auto.create.topics.enable, or topic.creation.* "
                       "settings on the connector)")
            else:
                why = "(this producer never has a broker auto-create a topic)"
            return PartitionNotAvailableError(
                topic, partition,
                f"Topic {topic} is not in the cluster metadata {waited}. Check that the topic exists on "
                f"the cluster this producer writes to {why}, and that its brokers are reachable.")
        return PartitionNotAvailableError(
            topic, partition,
            f"Partition {partition} of topic {topic} is not in the cluster metadata {waited}; the topic has "
            f"partitions 0-{max(known)}. Check that the topic has been grown to at least {partition + 1} "
            f"partitions (for a mirror: that the connector could create or grow the remote topic) and "
            f"that the partition has a leader.")


class KafkaProducer(Producer):
    """The contract's producer over :class:`RecordProducer`; build it with :meth:`from_settings`.

    Every error it raises, and every error its futures carry, is the contract's. Beyond the
    contract, for the runtime's tasks: :meth:`send_record_batch` and transactions.
    """

    #: whether start() was called and stop() not yet (the runtime closes a task's clients left open)
    is_open = False

    def __init__(self, kwargs: dict[str, Any], ignored: list[str] | None = None):
        self.ignored_settings = list(ignored or [])
        self.principal = kwargs.get("sasl_plain_username")
        self._producer = RecordProducer(**kwargs)

    @classmethod
    def from_settings(cls, props: Mapping[str, Any], *, allow_auto_create_topics: bool = False) -> KafkaProducer:
        """A producer from Java-style settings; ``allow_auto_create_topics`` lets the broker's
        ``auto.create.topics.enable`` decide for a topic this producer writes to (as for a Java producer)."""
        kwargs, ignored = client_kwargs(props, "producer")
        if allow_auto_create_topics:
            kwargs["allow_auto_create_topics"] = True
        return cls(kwargs, ignored)

    @property
    def allows_auto_create_topics(self) -> bool:
        """Whether a broker may auto-create a topic this producer writes to."""
        return self._producer.allow_auto_create_topics

    async def _call(self, coro):
        try:
            return await coro
        except AIO_ERRORS as exc:
            raise translate(exc) from exc

    async def start(self) -> None:
        self.is_open = True
        await self._call(self._producer.start())

    async def stop(self) -> None:
        self.is_open = False
        await self._call(self._producer.stop())

    async def stop_within(self, timeout: float) -> int:
        """Stop, waiting at most ``timeout`` seconds for the writes not yet acknowledged.

        :meth:`stop` waits for every write to be acknowledged or to fail, which with the cluster
        unreachable is ``delivery.timeout.ms`` (two minutes by default), longer than a shutdown
        may take. Writes still unacknowledged after ``timeout`` are failed here (their futures
        raise a timeout: whoever waits for them learns they may not have been written) and the
        connections are closed. Returns how many batches were given up on (0: everything ended
        in time).
        """
        self.is_open = False
        stopping = asyncio.ensure_future(self._producer.stop())
        given_up = 0
        try:
            if not (await asyncio.wait([stopping], timeout=max(timeout, 0)))[0]:
                accumulator = self._producer._message_accumulator
                batches = [batch for queued in accumulator._batches.values() for batch in queued]
                batches += accumulator._pending_batches
                given_up = len(batches)
                accumulator.fail_all(KafkaTimeoutError(
                    f"the producer was stopped with this write unacknowledged after {timeout:g}s"))
                for batch in batches:  # counted above: nobody else may look at these failures any more
                    futures = [batch.future, batch._drain_waiter, *(future for future, _ in batch._msg_futures)]
                    for future in futures:
                        if future.done() and not future.cancelled():
                            future.exception()
                if self._producer.batch_sender is not None:
                    given_up += self._producer.batch_sender.give_up(KafkaTimeoutError(
                        f"the producer was stopped with this write unacknowledged after {timeout:g}s"))
            await stopping  # every batch has ended now: the sender and the connections close at once
        except AIO_ERRORS as exc:
            raise translate(exc) from exc
        finally:
            if not stopping.done():  # this call was cancelled: so is the stop
                stopping.cancel()
        return given_up

    async def send(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                   partition: int | None = None, timestamp_ms: int | None = None,
                   headers: list[tuple[str, bytes]] | None = None) -> asyncio.Future:
        try:
            return await self._producer.send(topic, value, key, partition, timestamp_ms, headers)
        except AIO_ERRORS as exc:
            raise translate(exc) from exc

    async def flush(self) -> None:
        await self._call(self._producer.flush())

    async def partitions_for(self, topic: str) -> set[int]:
        return set(await self._call(self._producer.partitions_for(topic)))

    # -- beyond the contract: the runtime's -------------------------------------------------------
    @property
    def buffer_memory(self) -> int:
        """``buffer.memory``: bytes of records a source task may have handed over and not had acknowledged."""
        return self._producer.buffer_memory

    async def learn_topics(self, topics) -> None:
        """Describe every unknown topic of ``topics`` in one metadata refresh (before sending to them)."""
        await self._call(self._producer.learn_topics(topics))

    async def send_keyed(self, topic: str, records: list[tuple[bytes, bytes | None]],
                         partition: int | None = None) -> list[RecordMetadata]:
        """Write keyed records batched by partition and wait for them (:meth:`RecordProducer.send_keyed`)."""
        try:
            return await self._producer.send_keyed(topic, records, partition)
        except AIO_ERRORS as exc:
            raise translate(exc) from exc

    async def send_record_batch(self, topic: str, partition: int, data: bytes, record_count: int) -> asyncio.Future:
        """Write one encoded record batch whole (:meth:`RecordProducer.send_record_batch`)."""
        try:
            return await self._producer.send_record_batch(topic, partition, data, record_count)
        except AIO_ERRORS as exc:
            raise translate(exc) from exc

    async def begin_transaction(self) -> None:
        """Open a transaction (needs ``transactional.id``)."""
        await self._call(self._producer.begin_transaction())

    async def commit_transaction(self) -> None:
        """Commit the open transaction."""
        await self._call(self._producer.commit_transaction())

    async def abort_transaction(self) -> None:
        """Abort the open transaction."""
        await self._call(self._producer.abort_transaction())

    async def flush_for_commit(self) -> None:
        """Close the batches still lingering and wait until every one is acknowledged or failed
        (what a commit needs; failures stay on the records' futures)."""
        await self._call(self._producer._message_accumulator.flush_for_commit())

    def can_abort(self) -> bool:
        """Whether a transaction is open or failed, so that aborting it means something."""
        txn = self._producer._txn_manager
        return txn is not None and txn.state in (TransactionState.IN_TRANSACTION, TransactionState.ABORTABLE_ERROR)

    def fatal_error(self) -> BaseException | None:
        """The error that stopped the producer for good (fenced, denied...), or None while it can write."""
        sender = getattr(self._producer._sender, "sender_task", None)
        if sender is not None and sender.done() and not sender.cancelled() and sender.exception() is not None:
            return translate(sender.exception())
        txn = self._producer._txn_manager
        if txn is not None and txn.is_fatal_error():
            return ConnectError("the transactional producer is in a fatal state")
        return None

    def forget_transaction(self) -> None:
        """Consume the error aiokafka keeps for a failed transaction nobody commits or aborts again, so
        asyncio does not report it as never retrieved."""
        txn = self._producer._txn_manager
        waiter = getattr(txn, "_transaction_waiter", None)
        if waiter is not None and waiter.done() and not waiter.cancelled():
            waiter.exception()
