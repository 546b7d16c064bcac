"""A compacted Kafka topic read as a log of state changes: the base of the distributed stores.

:class:`KafkaBasedLog` is what Kafka Connect's ``KafkaBasedLog`` is to its offset, config and
status stores. ``start()`` creates the topic if it is missing (always ``cleanup.policy=compact``,
the given partition count and replication factor; an existing topic is used as it is), reads
every partition from its beginning to its current end, feeding each record to ``on_record``,
and then keeps tailing the topic in a background task it owns, so every record written later,
by this process or any other, reaches ``on_record`` too. Stores rebuild their state from these
callbacks and never read the topic themselves.

Transactions: with ``read_committed`` the tail reads only committed records (aborted ones never
reach ``on_record``) and ``read_to_end()`` waits for the last stable offset, so a transaction
still open is neither read nor waited for.

Ordering: records of one partition reach ``on_record`` in offset order; there is no order
across partitions. ``on_record`` runs on the event loop, in the tail task, one record at a
time, and must not block. ``send()`` returns once the broker acknowledged the record
(``acks=all``, idempotent producer, so records of one partition keep their send order); the
record reaches ``on_record`` later, when the tail reads it. ``read_to_end()`` waits for that:
it returns once the tail has consumed everything written before the call (the end offsets at
call time), which is how a store makes its own writes (and everyone else's) visible to its
readers. Records go to the partition the default partitioner picks (murmur2 of the key bytes,
as the Java producer does), unless a partition is given.

Compaction: the broker eventually keeps only the latest record of each key; a record with a
null value (tombstone) removes the key, after ``delete.retention.ms``. Readers must therefore
treat the topic as "the latest value per key" and never rely on seeing intermediate values.
Offsets may have gaps (compacted records, transaction markers); the position still advances.

Failure cases: a missing topic the client may not create, or a broker that stays unreachable,
makes ``start()`` raise (the topic-creation and read timeouts apply). An existing topic whose
``cleanup.policy`` is not ``compact`` is refused, as Connect refuses it: a delete policy would
silently lose state. An exception raised by ``on_record`` is logged and the record skipped
(one bad record must not stop the log). If the tail itself fails (e.g. authorization revoked),
``read_to_end()`` raises that error from then on. ``send()`` raises the producer's error if the
record could not be written; a batch may then be partly written.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from mirrorline.api.errors import KafkaError, TopicAlreadyExistsError
from mirrorline.api.kafka import ConsumerRecord, NewTopic, TopicPartition
from mirrorline.api.records import RecordMetadata
from mirrorline.clients.admin import KafkaAdmin
from mirrorline.clients.consumer import KafkaConsumer
from mirrorline.clients.producer import KafkaProducer

log = logging.getLogger(__name__)

_TOPIC_READY_TIMEOUT_S = 30.0
_READ_TIMEOUT_S = 60.0
#: fetch.max.wait.ms of the tail's consumer unless the client settings give one
TAIL_FETCH_WAIT_MS = 5000
#: How long stopping a log waits for its writes not yet acknowledged (a status or offsets record
#: written as the worker shuts down) before giving them up: with the cluster unreachable the
#: producer would otherwise wait out ``delivery.timeout.ms`` (two minutes) per log.
STOP_WRITES_WAIT_S = 5.0
#: How long the tail's getmany waits for records. It returns as soon as there are some; waiting
#: longer only wakes an idle log less often (it was 1 s: one wake-up a second per internal log).
TAIL_POLL_TIMEOUT_MS = 10_000
#: While read_to_end waits, how often it looks at the consumer's positions itself: they also move
#: without records being returned (transaction markers, compacted gaps) while the tail waits.
_POSITION_CHECK_S = 0.05


class KafkaBasedLog:
    """A compacted topic, read from the beginning and tailed; see the module docstring."""

    def __init__(self, topic: str, client_props: Mapping[str, Any], on_record: Callable[[ConsumerRecord], None],
                 *, partitions: int, replication_factor: int, topic_config: Mapping[str, Any] | None = None,
                 read_committed: bool = False):
        self.topic = topic
        #: read only committed records (isolation.level=read_committed): for a topic transactions write to
        self.read_committed = read_committed
        self.client_props = dict(client_props)
        self.on_record = on_record
        self.partitions = partitions
        self.replication_factor = replication_factor
        self.topic_config = {**{k: str(v) for k, v in (topic_config or {}).items()}, "cleanup.policy": "compact"}
        self._producer: KafkaProducer | None = None
        self._consumer: KafkaConsumer | None = None
        self._tps: list[TopicPartition] = []
        self._positions: dict[TopicPartition, int] = {}
        self._progress = asyncio.Condition()
        self._tail: asyncio.Task | None = None
        self._error: BaseException | None = None

    @property
    def topic_partitions(self) -> list[TopicPartition]:
        """The topic's partitions (known after ``start()``)."""
        return list(self._tps)

    async def start(self) -> None:
        """Create the topic if missing, read it to its end, then tail it in the background."""
        partitions = await self._ensure_topic()
        self._tps = [TopicPartition(self.topic, p) for p in partitions]
        props = {k: v for k, v in self.client_props.items() if k != "transactional.id"}
        # the client layer's producer waits for partitions it does not know yet, and takes max.block.ms
        self._producer = KafkaProducer.from_settings({**props, "acks": "all", "enable.idempotence": "true"})
        if self._producer.ignored_settings:
            log.debug("log %s: client settings without an equivalent in the client ignored: %s", self.topic,
                      self._producer.ignored_settings)
        # the broker answers the tail's fetch as soon as a record arrives; holding an empty one 5 s
        # (not the client's 500 ms) only spaces out an idle log's fetches. Its ListOffsets go on a
        # connection of their own (side_connections), so read_to_end() does not wait behind it.
        consumer_props = {"fetch.max.wait.ms": str(TAIL_FETCH_WAIT_MS), **props, "auto.offset.reset": "earliest"}
        if self.read_committed:  # end offsets are then the last stable offsets: open transactions are not waited for
            consumer_props["isolation.level"] = "read_committed"
        self._consumer = KafkaConsumer.from_settings(consumer_props)
        try:
            await self._producer.start()
            await self._consumer.start()
            # One ListOffsets for every partition, then assign and seek in one step: the consumer's own
            # reset of a just-created partition whose leader is not ready yet retries only a second later.
            beginnings = await self._consumer.beginning_offsets(self._tps)
            self._consumer.assign(self._tps)
            for tp in self._tps:
                self._consumer.seek(tp, beginnings[tp])
                self._positions[tp] = beginnings[tp]
            self._tail = asyncio.get_running_loop().create_task(self._run_tail(), name=f"kafka-log-{self.topic}")
            await self.read_to_end()
        except BaseException:
            await self.stop()
            raise

    async def stop(self, writes_wait_s: float = STOP_WRITES_WAIT_S) -> None:
        """Stop tailing and close the clients, waiting at most ``writes_wait_s`` for writes not yet
        acknowledged. Safe to call more than once."""
        tail, self._tail = self._tail, None
        if tail is not None:
            tail.cancel()
            try:
                await tail
            except BaseException:  # noqa: BLE001 - cancelled, or the failure read_to_end reported
                pass
        consumer, self._consumer = self._consumer, None
        producer, self._producer = self._producer, None
        if consumer is not None:
            await consumer.stop()
        if producer is not None:
            given_up = await producer.stop_within(writes_wait_s)
            if given_up:
                log.warning("log %s: %d batch(es) of writes were not acknowledged within %gs of stopping and were "
                            "given up on (is the cluster reachable?); what they held may not be in the topic",
                            self.topic, given_up, writes_wait_s)

    async def send(self, key: bytes, value: bytes | None, partition: int | None = None) -> RecordMetadata:
        """Write one record and wait for the broker's acknowledgement; returns where it landed."""
        [metadata] = await self.send_batch([(key, value)], partition)
        return metadata

    async def send_batch(self, records: Iterable[tuple[bytes, bytes | None]],
                         partition: int | None = None) -> list[RecordMetadata]:
        """Write records (in order) and wait until every one is acknowledged.

        Keyed records (every internal topic's) are written in one batch per partition, or a few
        (:meth:`KafkaProducer.send_keyed`), not queued one by one. With the faster key hashing and
        value encoding that came with it, an offsets flush of 8,000 source partitions costs a quarter
        to a third less CPU (first flush, which hashes every key: 0.67-0.69x;
        tests/benchmarks/bench_offsets_flush.py)."""
        if self._producer is None:
            raise RuntimeError(f"log {self.topic} is not started")
        records = list(records)
        if records and all(key is not None for key, _value in records):
            return await self._producer.send_keyed(self.topic, records, partition)
        futures = [await self._producer.send(self.topic, value=value, key=key, partition=partition)
                   for key, value in records]
        return list(await asyncio.gather(*futures))

    async def read_to_end(self, timeout: float = _READ_TIMEOUT_S) -> None:
        """Wait until the tail consumed every record written before this call."""
        if self._consumer is None:
            raise RuntimeError(f"log {self.topic} is not started")
        self._raise_if_failed()
        ends = await self._consumer.end_offsets(self._tps)
        try:
            async with asyncio.timeout(timeout):
                while not self._caught_up(ends):
                    async with self._progress:
                        try:
                            async with asyncio.timeout(_POSITION_CHECK_S):
                                await self._progress.wait()  # notified after each batch the tail applies
                        except TimeoutError:
                            pass
        except TimeoutError:
            behind = {tp.partition: (self._positions.get(tp), end) for tp, end in ends.items()
                      if self._positions.get(tp, 0) < end}
            raise TimeoutError(f"log {self.topic} not read to its end within {timeout:.0f}s "
                               f"(partition: (position, end) = {behind})") from None
        self._raise_if_failed()

    def _caught_up(self, ends: Mapping[TopicPartition, int]) -> bool:
        """Whether the tail failed or has consumed up to ``ends``.

        The consumer's own position counts too: records before it were returned by a getmany, and
        the tail applies what a getmany returns before anything else runs; it moves past markers and
        gaps while the tail is still waiting for records."""
        if self._error is not None:
            return True
        consumer = self._consumer
        for tp, end in ends.items():
            if self._positions.get(tp, 0) >= end:
                continue
            position = consumer.fetch_position(tp) if consumer is not None else None
            if position is None or position < end:
                return False
        return True

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise RuntimeError(f"log {self.topic} stopped reading: {self._error!r}") from self._error

    async def _run_tail(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        try:
            while True:
                batch = await consumer.getmany(timeout_ms=TAIL_POLL_TIMEOUT_MS)
                for records in batch.values():
                    for record in records:
                        try:
                            self.on_record(record)
                        except Exception:  # noqa: BLE001 - one bad record must not stop the log
                            log.exception("log %s: skipping record at %s-%d offset %d that could not be applied",
                                          self.topic, record.topic, record.partition, record.offset)
                positions = {tp: await consumer.position(tp) for tp in self._tps}
                async with self._progress:
                    self._positions.update(positions)
                    self._progress.notify_all()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - reported through read_to_end
            log.error("log %s: tail failed: %r", self.topic, exc)
            async with self._progress:
                self._error = exc
                self._progress.notify_all()

    async def _ensure_topic(self) -> list[int]:
        """Create the topic if missing; wait until its partitions have leaders; return their ids."""
        admin = KafkaAdmin.from_settings(self.client_props)
        await admin.start()
        try:
            response = await admin.create_topics([NewTopic(self.topic, self.partitions, self.replication_factor,
                                                           self.topic_config)])
            for error in response.values():
                if isinstance(error, TopicAlreadyExistsError):
                    log.debug("log %s: topic exists", self.topic)
                elif error is not None:
                    raise KafkaError(f"creating topic {self.topic!r} failed: {error}", code=error.code,
                                     retriable=error.retriable) from error
                else:
                    log.info("log %s: created topic (%d partitions, replication factor %d, compacted)",
                             self.topic, self.partitions, self.replication_factor)
            partitions = await self._wait_for_partitions(admin)
            await self._check_compacted(admin)
            return partitions
        finally:
            await admin.close()

    async def _wait_for_partitions(self, admin: KafkaAdmin) -> list[int]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _TOPIC_READY_TIMEOUT_S
        while True:
            for entry in await admin.describe_topics([self.topic]):
                if entry.name == self.topic and entry.error is None and entry.partitions \
                        and all(p.leader >= 0 for p in entry.partitions):
                    return sorted(p.partition for p in entry.partitions)
            if loop.time() > deadline:
                raise TimeoutError(f"topic {self.topic!r} has no leader for every partition "
                                   f"after {_TOPIC_READY_TIMEOUT_S:.0f}s")
            await asyncio.sleep(0.2)

    async def _check_compacted(self, admin: KafkaAdmin) -> None:
        """Refuse a topic whose cleanup.policy is not exactly ``compact`` (as Connect does)."""
        try:
            described = await admin.describe_topic_configs([self.topic])
        except Exception as exc:  # noqa: BLE001 - e.g. not authorised to describe configs: Connect warns too
            log.warning("log %s: could not verify cleanup.policy (%r)", self.topic, exc)
            return
        if self.topic not in described:  # the broker answered an error code for the topic
            log.warning("log %s: could not verify cleanup.policy (the broker described no configs)", self.topic)
            return
        policy = next((entry.value for entry in described[self.topic] if entry.name == "cleanup.policy"), None)
        if policy is not None and {p.strip() for p in policy.split(",")} != {"compact"}:
            raise ValueError(f"topic {self.topic!r} must have cleanup.policy=compact to keep state safely, "
                             f"but has cleanup.policy={policy}")


def storage_settings(worker_config: Mapping[str, Any], prefix: str, default_partitions: int,
                     default_replication_factor: int = 3) -> tuple[str, int, int]:
    """``(topic, partitions, replication factor)`` from Connect's ``<prefix>.topic`` / ``.partitions`` /
    ``.replication.factor`` worker settings (e.g. prefix ``offset.storage``)."""
    return (str(worker_config[f"{prefix}.topic"]),
            int(worker_config.get(f"{prefix}.partitions", default_partitions)),
            int(worker_config.get(f"{prefix}.replication.factor", default_replication_factor)))


class LogBackedStore:
    """What every Kafka-backed store shares: its log, the log's topic, and starting and stopping it."""

    log: KafkaBasedLog

    @property
    def topic(self) -> str:
        """The store's topic."""
        return self.log.topic

    async def start(self) -> None:
        """Create the topic if needed and read it to its end."""
        await self.log.start()

    async def stop(self, writes_wait_s: float | None = None) -> None:
        """Stop tailing and close the clients; ``writes_wait_s`` bounds the wait for unacknowledged
        writes (None: :data:`STOP_WRITES_WAIT_S`)."""
        await self.log.stop(STOP_WRITES_WAIT_S if writes_wait_s is None else writes_wait_s)
