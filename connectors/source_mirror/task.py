"""MirrorSourceTask: copies its assigned source partitions, record for record (MM2 §3.7).

Each source record becomes a record for the remote topic with the same partition number,
key, value, headers (in order, bytes unchanged) and timestamp. The source offset stored
for a partition is that of the last replicated record, so a restarted task seeks to it + 1;
a partition with no stored offset starts where ``auto.offset.reset`` (default earliest)
says. After the target acknowledges a record, the offset-sync writer decides whether to
record the upstream->downstream mapping.

Beyond MM2, a position that falls outside its partition's log is never reset silently (see
:mod:`mirrorline.connectors.source_mirror.positions`): records deleted before they were copied, and a
source topic deleted and re-created, are logged as warnings, counted in metrics and shown in
the task's status, and mirroring resumes from the log start. The consumer therefore runs with
``auto.offset.reset=none``; the user's setting only decides where partitions without a stored
offset start, and a user-set ``none`` still fails the task on any out-of-range position.

Beyond MM2 too, a re-created source topic is recognised by its topic ID (KIP-516,
:mod:`mirrorline.connectors.source_mirror.topic_identity`), not only by an out-of-range position:
once the new topic holds more records than the old position, that position is valid in it and
fetching there would silently skip the new topic's head (MM2's consumer does, and resets only on
OFFSET_OUT_OF_RANGE). The task learns each topic's ID at start; when the consumer reports a sign
that a topic may have changed (a fetch error for its partitions, a partition fetched again after
a pause) it asks the broker that reported it before handing out that topic's next records (on
OFFSET_OUT_OF_RANGE at once, before the log bounds), and every :data:`TOPIC_ID_CHECK_INTERVAL_S` it asks about all its topics. A new ID is
reported as "offsets went backwards" and mirroring restarts from the new log's start; a topic
gone from the cluster is held (its partitions paused, positions kept) until it is back.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time

from mirrorline.api import (BatchFetch, FetchedBatch, KafkaError, OffsetOutOfRangeError, RecordMetadata, SourceBatch,
                            SourceRecord, SourceTask, TopicPartition)

from mirrorline.connectors.mirror_client.config import (
    CONSUMER_POLL_TIMEOUT_MS,
    OFFSET_SYNCS_TOPIC_LOCATION,
    SOURCE_CLUSTER_ALIAS,
    TARGET_CLUSTER_ALIAS,
    client_props,
    load_replication_policy,
)
from mirrorline.connectors.mirror_client.formats import source_partition
from mirrorline.connectors.source_mirror import metrics
from mirrorline.connectors.source_mirror.catch_up import CatchUpWatch
from mirrorline.connectors.source_mirror.config import (
    BATCH_FORWARDING_COALESCE_BYTES,
    BATCH_FORWARDING_ENABLED,
    REPLICATION_FETCH_GATHER_MS,
    REPLICATION_FETCH_GATHER_TRICKLE_MS,
    REPLICATION_METRICS_LEVEL,
    SOURCE_CONFIG_DEF,
    TASK_ASSIGNED_PARTITIONS,
    TASK_INDEX,
)
from mirrorline.connectors.source_mirror.errors import SourceReadError, read_error_message
from mirrorline.connectors.source_mirror.offset_syncs import OffsetSyncWriter
from mirrorline.connectors.source_mirror.partition_metrics import partition_metrics
from mirrorline.connectors.source_mirror.pending import PendingRecords
from mirrorline.connectors.source_mirror.positions import PositionCheck, PositionState, check_position
from mirrorline.connectors.source_mirror.topic_identity import TopicIdentities, TopicVerdict
from mirrorline.connectors.source_mirror.topics import parse_assigned

log = logging.getLogger(__name__)

#: How long to wait for a partition's log start/end offsets (ListOffsets) before giving up until the next
#: fetch: while a source topic is deleted the request is retried until this runs out.
LOG_BOUNDS_TIMEOUT_S = 10.0
#: How long start() waits for the positions of partitions without a stored offset to be resolved. They
#: are marked for reset at once; waiting only avoids a first empty poll, so a short bound is enough.
RESET_WAIT_S = 5.0
#: The source consumer's default fetch.max.wait.ms: how long the broker holds a fetch that finds no record.
IDLE_FETCH_WAIT_MS = 5000
#: The source consumer's default fetch.max.bytes (Kafka's: 50 MiB). It bounds one fetch answer and, in
#: mirrorline's fetch plan, the bytes fetched ahead of poll; a task holds about twice it (fetched ahead,
#: and the poll being written) besides its producer's buffer.memory. At 8,000 partitions 50 MiB made
#: most of a worker's peak RSS, and 16 MiB still a fifth of it (docs/performance.md); 8 MiB is
#: eight partitions' worth of max.partition.fetch.bytes (1 MiB each) per answer, and as the next
#: answer is fetched while the last poll is written, a task with few busy partitions copies as fast.
FETCH_MAX_BYTES = 8 * 1024 * 1024
#: How long a failing poll() waits for the consumer's position of each affected partition (normally
#: known at once) to name it in the error.
POSITION_WAIT_S = 2.0
#: How long stop() waits for the last offset syncs to be acknowledged (the runtime bounds stop() too).
SYNC_FLUSH_TIMEOUT_S = 3.0
#: How long a poll waits for the topic IDs it asks about before holding the topics concerned, plus
#: TOPIC_ID_TIMEOUT_PER_1000_S for each thousand topics asked about (a check of every topic of a task
#: with thousands of them is several Metadata requests).
TOPIC_ID_TIMEOUT_S = 5.0
TOPIC_ID_TIMEOUT_PER_1000_S = 2.0
#: How often every assigned topic's ID is checked without any sign of change (one Metadata request):
#: the last resort for a re-creation no fetch noticed; found that late, the new records already
#: handed out from the old position are copied again (duplicates, never a loss).
TOPIC_ID_CHECK_INTERVAL_S = 30.0
#: How often the ID of a held topic (missing from the cluster, or not answered) is asked again.
HELD_RETRY_S = 0.5
#: How often the lag gauge of every assigned partition is set (partitions with records: every poll).
#: Not longer: a partition whose records were all acknowledged, or whose position moved past a
#: transaction marker, shows its lag of 0 only at the next sweep.
LAG_SWEEP_S = 5.0
#: every how many seconds the sweep reads every partition, not only those a fetch answer or an
#: acknowledgement may have moved (a position moved by a seek or reset is seen no later)
FULL_LAG_SWEEP_S = 60.0


def topic_id_timeout(topics: int) -> float:
    """How long to wait for the IDs of ``topics`` topics.

    >>> topic_id_timeout(10), topic_id_timeout(2000)
    (5.02, 9.0)
    """
    return TOPIC_ID_TIMEOUT_S + TOPIC_ID_TIMEOUT_PER_1000_S * topics / 1000


def interleave(per_partition: list[list]) -> list:
    """Round-robin over the partitions' lists, each list's order kept: [p0[0], p1[0], ..., p0[1], p1[1], ...].

    The producer queues one batch per partition until the sender takes it, and sends at most one
    batch per partition in a request. Handed over partition after partition, a partition's second
    batch would wait for a request holding only its first; interleaved, each request carries one
    batch of every partition.
    """
    if len(per_partition) == 1:
        return per_partition[0]
    out = []
    for row in itertools.zip_longest(*per_partition):
        out.extend(item for item in row if item is not None)
    return out


class MirrorBatch(SourceBatch):
    """A fetched record batch on its way to the remote partition, with the source offset of each record."""

    __slots__ = ("source_offsets",)

    def __init__(self, source_partition: dict, topic: str, partition: int, batch: FetchedBatch):
        super().__init__(source_partition, {"offset": batch.source_offsets[-1]}, topic, partition, batch.data,
                         batch.record_count, batch.max_timestamp)
        self.source_offsets = batch.source_offsets


class MirrorSourceTask(SourceTask):
    """Consumes assigned source partitions and returns their records for the remote topics."""

    def version(self) -> str:
        return "0.1.0"

    async def start(self, config: dict[str, str]) -> None:
        parsed = SOURCE_CONFIG_DEF.parse(config)
        self.source_alias = parsed[SOURCE_CLUSTER_ALIAS]
        self.target_alias = parsed[TARGET_CLUSTER_ALIAS]
        self.policy = load_replication_policy(config)
        self.poll_timeout_ms = parsed[CONSUMER_POLL_TIMEOUT_MS]
        flow = f"{self.source_alias}->{self.target_alias}|{self.context.task_id}"
        assigned = parse_assigned(config.get(TASK_ASSIGNED_PARTITIONS, ""))
        self.partitions = [TopicPartition(t, p) for t, p in assigned]
        self.remote = {tp: self.policy.format_remote_topic(self.source_alias, tp.topic) for tp in self.partitions}
        labels = {tp: (self.source_alias, self.target_alias, self.remote[tp], str(tp.partition))
                  for tp in self.partitions}
        # metric children per partition, looked up once (labels() per record costs ~10% of a core)
        level = parsed[REPLICATION_METRICS_LEVEL]
        self._metrics = {tp: partition_metrics(level, l) for tp, l in labels.items()}
        self._copied = {path: metrics.COPIED_RECORDS.labels(self.source_alias, self.target_alias, path)
                        for path in ("batch", "rebuilt", "record")}

        self._lost: dict[TopicPartition, int] = {}
        self._resume_after: dict[tuple[str, int], int] = {}
        user_props = client_props(config, "source", "consumer")
        self.user_offset_reset = str(user_props.get("auto.offset.reset", "earliest")).strip().lower()
        # "none" so that the consumer raises OffsetOutOfRangeError instead of resetting silently
        # read_committed unless the user says otherwise (beyond MM2, whose consumer reads uncommitted):
        # aborted records are never mirrored, and written non-transactionally they would look committed
        # fetch.max.wait.ms 5000 unless the user says otherwise (beyond MM2, whose consumer waits 500 ms):
        # the broker answers a fetch as soon as any partition of the task's fetch session has records,
        # so the wait only bounds how often an idle task asks again, at no cost in latency
        # fetch.max.bytes 8 MiB unless the user says otherwise (MM2's consumer: Kafka's 50 MiB): what a
        # task holds in memory scales with it (FETCH_MAX_BYTES)
        consumer_props = {"client.id": f"{flow}|replication-consumer", "isolation.level": "read_committed",
                          "fetch.max.wait.ms": str(IDLE_FETCH_WAIT_MS), "fetch.max.bytes": str(FETCH_MAX_BYTES),
                          **user_props, "auto.offset.reset": "none", "enable.auto.commit": "false"}
        if getattr(self.context, "exactly_once", False) and \
                str(consumer_props["isolation.level"]).strip().lower() != "read_committed":
            # under exactly-once, records of aborted (or still open) source transactions must never be copied
            log.warning("Task %s: isolation.level=%s is ignored: the runtime writes exactly-once, so the source "
                        "consumer reads committed records only (isolation.level=read_committed)",
                        self.context.task_id, consumer_props["isolation.level"])
            consumer_props["isolation.level"] = "read_committed"
        self._path_reason = self._record_path_reason(parsed)
        # forwarding whole batches: the consumer hands fetched record batches, small ones merged
        fetch_batches = BatchFetch(parsed[BATCH_FORWARDING_COALESCE_BYTES]) if self._path_reason is None else None
        # incremental fetch sessions (KIP-227): an idle fetch no longer lists and answers every partition of the task
        # ... and, while records flow, fetches that gather them for up to replication.fetch.gather.ms
        # (replication.fetch.gather.trickle.ms while they come in slowly)
        # ... and, in a worker that lets its tasks share clients, one consumer (one fetch per broker) for
        # this connector's tasks in the process: half the round trips at two tasks
        share = getattr(self.context, "client_share", None)
        self.consumer = self.context.clients.consumer(consumer_props, fetch_batches=fetch_batches, fetch_sessions=True,
                                                      gather_max_wait_ms=parsed[REPLICATION_FETCH_GATHER_MS],
                                                      gather_trickle_wait_ms=parsed[REPLICATION_FETCH_GATHER_TRICKLE_MS],
                                                      **({} if share is None else {"share": share}))
        if self.consumer.ignored_settings:
            log.info("Task %s: source consumer settings with no meaning to the consumer are ignored: %s",
                     config.get(TASK_INDEX), self.consumer.ignored_settings)
        self._principal = self.consumer.principal  # named in read errors
        await self.consumer.start()
        self._pending = PendingRecords(self.consumer, read_committed=self.consumer.read_committed)
        self._by_topic: dict[str, list[TopicPartition]] = {}
        for tp in self.partitions:
            self._by_topic.setdefault(tp.topic, []).append(tp)
        self._topics = sorted(self._by_topic)
        self._identities = TopicIdentities()
        #: topics held until their ID can be read: topic -> {partition: position to resume at}
        self._held: dict[str, dict[TopicPartition, int | None]] = {}
        self._held_retry_at = 0.0
        #: topics with a change sign whose ID is checked before their next records are handed out
        self._suspects: set[str] = set()
        self._next_id_check = time.monotonic() + TOPIC_ID_CHECK_INTERVAL_S
        self._next_lag_sweep = 0.0
        self._next_full_lag_sweep = 0.0
        self._lags_shown: dict[TopicPartition, int] = {}  # the value each lag gauge holds
        self._lag_total = 0  # their sum
        self._catch_up = CatchUpWatch()
        try:
            await self._learn_topic_ids()
            await self._seek_start_positions()
        except BaseException:
            await self.consumer.stop()  # the runtime does not call stop() after a failed start()
            raise

        self.sync_writer = None
        self.sync_producer = None
        self._sync_sender = None
        if parsed["emit.offset-syncs.enabled"]:
            on_source = parsed[OFFSET_SYNCS_TOPIC_LOCATION] == "source"
            side = "source" if on_source else "target"
            self.sync_producer = self.context.clients.producer({
                "client.id": f"{flow}|offset-syncs-{side}-producer", **client_props(config, side, "producer"),
                "acks": "all"})
            await self.sync_producer.start()
            topic = self.policy.offset_syncs_topic(self.target_alias if on_source else self.source_alias)
            # Fetch the topic's metadata now: otherwise the first syncs wait for it, the 10-send cap
            # fills, and MM2's coalescing drops the intermediate syncs of the other partitions,
            # leaving consumers that lag behind the newest sync without a translation.
            await self.sync_producer.partitions_for(topic)
            self.sync_writer = OffsetSyncWriter(self.sync_producer, topic, parsed["offset.lag.max"],
                                                resume_after=self._resume_after)
            self._sync_sender = self.context.run_in_background(self.sync_writer.run(), "offset-syncs")
        log.info("Task %s mirrors %d partitions from %s to %s, %s", self.context.task_id, len(self.partitions),
                 self.source_alias, self.target_alias,
                 "forwarding record batches whole (batch.forwarding.enabled)" if self._path_reason is None
                 else f"record by record ({self._path_reason})")

    def _record_path_reason(self, parsed: dict) -> str | None:
        """Why this task copies record by record, or None when it forwards whole batches."""
        if not parsed[BATCH_FORWARDING_ENABLED]:
            return "batch.forwarding.enabled=false"
        if not getattr(self.context, "accepts_batches", False):
            return "the connector has transforms or converters, which need decoded records"
        return None

    async def _learn_topic_ids(self) -> None:
        """The IDs the assigned topics have now: what later checks compare with (a topic missing now is
        learnt when it appears)."""
        if not self._topics:
            return
        try:
            async with asyncio.timeout(topic_id_timeout(len(self._topics))):
                ids = await self.consumer.topic_ids(self._topics)
        except (KafkaError, asyncio.TimeoutError) as exc:
            log.info("Task %s: could not read the topic IDs of its topics (%r); they are learnt at the next check",
                     self.context.task_id, exc)
            return
        if ids is None:
            log.info("Task %s: the source cluster gives no topic IDs (brokers before Kafka 3.1): a re-created "
                     "source topic is noticed only when a position falls beyond its log end", self.context.task_id)
        self._identities.judge(self._topics, ids)

    async def _seek_start_positions(self) -> None:
        """Seek to the stored offsets (+1), check them against the logs, position the other partitions."""
        self.consumer.assign(self.partitions)
        stored = await self.context.offsets.offsets(
            [source_partition(self.source_alias, tp.topic, tp.partition) for tp in self.partitions])
        positions: dict[TopicPartition, int] = {}
        for tp, offset in zip(self.partitions, stored):
            if offset is not None and offset.get("offset", -1) >= 0:
                positions[tp] = offset["offset"] + 1
                self.consumer.seek(tp, positions[tp])
        # where the offset-sync chain of the previous task may be continued (offset_sync_runs, "Restarted tasks")
        self._resume_after = {(tp.topic, tp.partition): position - 1 for tp, position in positions.items()}
        await self._check_positions(positions, at_start=True)
        await self._position_new_partitions([tp for tp in self.partitions if tp not in positions])

    async def _position_new_partitions(self, partitions: list[TopicPartition]) -> None:
        """Start partitions without a stored offset where the user's ``auto.offset.reset`` says."""
        if not partitions or self.user_offset_reset == "none":
            return  # with "none", the consumer raises NoOffsetForPartitionError at the first poll, as Kafka's does
        seek = self.consumer.seek_to_end if self.user_offset_reset == "latest" else self.consumer.seek_to_beginning
        try:
            async with asyncio.timeout(RESET_WAIT_S):
                await seek(*partitions)
        except asyncio.TimeoutError:
            log.info("Task %s: start positions of %s not known yet (topic missing?); they are resolved "
                     "in the background", self.context.task_id, partitions)

    async def _check_positions(self, positions: dict[TopicPartition, int], at_start: bool) -> None:
        """Compare positions with their partitions' logs; report and move those that are outside.

        At start a failure to read the log bounds is not fatal: a position outside the log is then
        found at the first fetch, which raises OffsetOutOfRangeError and brings us back here.
        """
        if not positions:
            return
        tps = list(positions)
        try:
            async with asyncio.timeout(LOG_BOUNDS_TIMEOUT_S):
                starts, ends = await asyncio.gather(
                    self.consumer.beginning_offsets(tps), self.consumer.end_offsets(tps))
        except (KafkaError, asyncio.TimeoutError) as exc:
            log.info("Task %s: could not read the log start/end offsets of %s (%r); checking again at the "
                     "next fetch", self.context.task_id, tps, exc)
            return
        for tp in tps:
            if tp in starts and tp in ends:
                self._apply(tp, check_position(positions[tp], starts[tp], ends[tp]), at_start)

    def _apply(self, tp: TopicPartition, check: PositionCheck, at_start: bool) -> None:
        """Report a position outside its log (log, metrics, status) and resume at the log start."""
        if check.state is PositionState.OK:
            if not at_start:
                log.debug("Task %s: %s out of range at %d but within [%d, %d] now; fetching again",
                          self.context.task_id, tp, check.position, check.log_start, check.log_end)
            return
        metric = self._metrics[tp]
        remote = self.remote[tp]
        metric.resets[check.state].inc()
        if check.state is PositionState.LOST_TO_RETENTION:
            metric.lost_to_retention.inc(check.lost_records)
            self._lost[tp] = self._lost.get(tp, 0) + check.lost_records
            log.warning("Records lost to retention: source topic %s partition %d, offsets [%d, %d) (%d records) "
                        "were deleted on cluster %s (retention or DeleteRecords) before they were mirrored, so "
                        "%s partition %d on %s will never have them. Mirroring continues from offset %d. "
                        "Raise the source topic's retention or catch up faster to avoid this.",
                        tp.topic, tp.partition, check.position, check.log_start, check.lost_records,
                        self.source_alias, remote, tp.partition, self.target_alias, check.log_start)
            self.context.report_warning(
                f"Source topic {tp.topic} partition {tp.partition}: {self._lost[tp]} records deleted by retention "
                f"before they were mirrored (last gap: offsets [{check.position}, {check.log_start})); "
                f"mirroring continues from offset {check.log_start}",
                key=f"{check.state.value}:{tp.topic}-{tp.partition}")
        elif check.recreated is not None:
            old_id, new_id = check.recreated
            log.warning("Source offsets went backwards: source topic %s partition %d was deleted and re-created "
                        "(topic ID %s, was %s); the task's position %d was in the old topic. Mirroring restarts "
                        "from offset %d of the new log (which ends at %d now); %s partition %d on %s keeps the "
                        "old records, followed by the new ones.",
                        tp.topic, tp.partition, new_id, old_id, check.position, check.log_start, check.log_end,
                        remote, tp.partition, self.target_alias)
            self.context.report_warning(
                f"Source topic {tp.topic} partition {tp.partition}: offsets went backwards (topic deleted and "
                f"re-created: topic ID {new_id}, was {old_id}; position {check.position}). Mirroring restarted "
                f"from offset {check.log_start}",
                key=f"{check.state.value}:{tp.topic}-{tp.partition}")
        else:
            log.warning("Source offsets went backwards: source topic %s partition %d ends at offset %d but the "
                        "task's position is %d; the topic was deleted and re-created (or its log truncated). "
                        "Mirroring restarts from offset %d of the new log; %s partition %d on %s keeps the old "
                        "records, followed by the new ones.",
                        tp.topic, tp.partition, check.log_end, check.position, check.log_start,
                        remote, tp.partition, self.target_alias)
            self.context.report_warning(
                f"Source topic {tp.topic} partition {tp.partition}: offsets went backwards (position "
                f"{check.position}, log end {check.log_end}): topic deleted and re-created? Mirroring restarted "
                f"from offset {check.log_start}",
                key=f"{check.state.value}:{tp.topic}-{tp.partition}")
        if self.user_offset_reset == "none":
            # the user asked for out-of-range positions to fail, as Kafka's consumer does with "none"
            raise OffsetOutOfRangeError(f"source topic {tp.topic} partition {tp.partition}: offset {check.position} is "
                                        f"out of range and auto.offset.reset is none", partitions={tp: check.position})
        self._resume_after.pop((tp.topic, tp.partition), None)
        if getattr(self, "sync_writer", None) is not None:
            self.sync_writer.forget_resume(tp.topic, tp.partition)
        self.consumer.seek(tp, check.resume_at)

    def pending_records(self) -> int | None:
        """Records on the source still to copy over the assigned partitions, counting only records a
        consumer can be given (transaction markers and aborted records are not), records polled and not
        yet acknowledged included; None while no partition is known (:mod:`.pending`)."""
        pending = getattr(self, "_pending", None)
        return None if pending is None else pending.total(self.partitions)

    async def poll(self) -> list[SourceRecord]:
        if not self.partitions:
            return []
        try:
            batch = await self.consumer.getmany(timeout_ms=self.poll_timeout_ms)
        except OffsetOutOfRangeError as error:
            # records of other partitions are not lost: getmany returns them first and raises on the next call
            positions = dict(error.partitions)
            # the topic ID first: once the re-created topic has grown, its log bounds alone would say "OK"
            self._suspects.update(self.consumer.topic_change_signs())
            topics = {tp.topic for tp in positions}
            settled = await self._verify_topics(topics, {}, hold=topics, known=positions)
            await self._check_positions({tp: offset for tp, offset in positions.items() if tp.topic not in settled},
                                        at_start=False)
            return []
        except KafkaError as error:
            if error.retriable:
                raise
            positions = await self._positions_of(error)
            if not positions:
                raise
            # the client's error names at most the partitions; the task's status shows this message, so it
            # says where the task stood and what to do
            raise SourceReadError(read_error_message(error, positions, source_alias=self.source_alias,
                                                     principal=self._principal), positions) from error
        signs = self.consumer.topic_change_signs()
        if signs:
            self._suspects.update(signs)
        if self._suspects or self._held or time.monotonic() >= self._next_id_check:
            batch = await self._check_topics(batch)
        now = time.time() * 1000
        records: list = []
        batches_by_partition: list[list[MirrorBatch]] = []
        for tp, messages in batch.items():
            metric = self._metrics[tp]
            if messages and type(messages[0]) is FetchedBatch:
                batches_by_partition.append(self._add_batches(tp, messages, metric, now))
                continue
            partition = source_partition(self.source_alias, tp.topic, tp.partition)
            remote = self.remote[tp]
            size = 0
            for message in messages:
                records.append(SourceRecord(partition, {"offset": message.offset}, remote, tp.partition,
                                            message.key, message.value, list(message.headers),
                                            message.timestamp if message.timestamp >= 0 else None))
                size += len(message.value) if message.value is not None else 0
            if messages:
                self._pending.handed_over(tp, len(messages))
                self._copied["record"].inc(len(messages))
                metric.byte_count.inc(size)
                metric.record_age_ms.set(now - messages[-1].timestamp)
        if batches_by_partition:
            records.extend(interleave(batches_by_partition))
        self._update_lags(batch)
        return records

    def _update_lags(self, batch: dict) -> None:
        """Set the lag gauge of the partitions ``batch`` has records of; every LAG_SWEEP_S, of the
        partitions without records too (acknowledgements, markers and new records on the source move
        it): those a fetch answer or an acknowledgement may have moved, and every FULL_LAG_SWEEP_S
        (or when the consumer cannot tell which moved) all. A sweep of all on every poll cost an idle
        task at thousands of partitions more CPU than anything else it did; a sweep of all every
        LAG_SWEEP_S was still a quarter of an idle worker's CPU at 8,000 partitions."""
        now = time.monotonic()
        handles, shown = self._metrics, self._lags_shown
        moved = 0
        if now >= self._next_lag_sweep:
            self._next_lag_sweep = now + LAG_SWEEP_S
            changed = self._pending.changed()
            if changed is None or now >= self._next_full_lag_sweep:
                self._next_full_lag_sweep = now + FULL_LAG_SWEEP_S
                swept = self.partitions
            else:
                swept = [tp for tp in changed if tp in handles]  # assigned ones only
            # one pass over the consumer's states; a gauge is set only when its value moved
            for tp, lag in self._pending.all_of(swept):
                before = shown.get(tp)
                if before != lag:
                    shown[tp] = lag
                    moved += lag - (before or 0)
                    handles[tp].lag_records.set(lag)
        else:
            pending = self._pending
            for tp in batch:
                lag = pending.of(tp)
                if lag is not None:
                    before = shown.get(tp)
                    if before != lag:
                        shown[tp] = lag
                        moved += lag - (before or 0)
                        handles[tp].lag_records.set(lag)
        if moved:
            self._lag_total += moved
            self._watch_catch_up()

    def _watch_catch_up(self) -> None:
        """Ask for this task's offsets (and so its offset syncs) to be stored now when its lag just
        ended a backlog (:mod:`.catch_up`), instead of at the next offset flush."""
        peak = self._catch_up.peak
        if self._catch_up.lag_is(self._lag_total):
            log.info("Task %s caught up after a backlog of up to %d records; storing its offsets and offset syncs "
                     "now rather than at the next offset flush", self.context.task_id, peak)
            self.context.request_commit()

    async def _check_topics(self, batch: dict) -> dict:
        """Check the IDs of the suspect topics ``batch`` has records of (and the held ones, and on the
        timer all): ``batch`` without the records of topics re-created or held.

        A suspect topic (one with a change sign) is checked only once records of it are about to be
        handed out: records are the only thing a wrong position can skip, and a topic without any
        costs no request (a pause of the whole task makes every topic suspect at once)."""
        suspects = self._suspects
        topics = {tp.topic for tp in batch if tp.topic in suspects} if suspects else set()
        signed = set(topics)
        clock = time.monotonic()
        if self._held and clock >= self._held_retry_at:
            topics.update(self._held)
        if clock >= self._next_id_check:
            self._next_id_check = clock + TOPIC_ID_CHECK_INTERVAL_S
            topics.update(self._topics)
        if not topics:
            return batch
        settled = await self._verify_topics(topics, batch, hold=signed | self._held.keys())
        if self._held:
            self._held_retry_at = time.monotonic() + HELD_RETRY_S
        if settled:
            batch = {tp: items for tp, items in batch.items() if tp.topic not in settled}
        return batch

    async def _verify_topics(self, topics: set[str], batch: dict, hold: set[str],
                             known: dict[TopicPartition, int | None] | None = None) -> set[str]:
        """Compare the IDs of ``topics`` with those learnt; act on each verdict (module docstring).

        Returns the topics whose records in ``batch`` must not be handed out: re-created ones (their
        partitions now restart from the new log's start) and held ones (partitions paused, positions
        kept at the first record not handed out). A topic whose ID cannot be read is held if it is in
        ``hold`` (it showed a sign); ``known``: positions to use instead of the consumer's.
        """
        topics = {topic for topic in topics if topic in self._by_topic}
        if not topics:
            return set()
        try:
            async with asyncio.timeout(topic_id_timeout(len(topics))):
                ids = await self.consumer.topic_ids(topics)
        except (KafkaError, asyncio.TimeoutError) as exc:
            log.info("Task %s: could not read the topic IDs of %s (%r); checking again", self.context.task_id,
                     sorted(topics), exc)
            verdicts = {topic: TopicVerdict.MISSING for topic in topics & hold}
        else:
            verdicts = self._identities.judge(topics, ids)
            self._suspects.difference_update(topics)
        settled: set[str] = set()
        for topic, verdict in verdicts.items():
            if verdict is TopicVerdict.RECREATED:
                settled.add(topic)
                positions = self._held.get(topic) or self._positions_in(topic, batch, known)
                if await self._restart_topic(topic, positions, ids[topic]):
                    self._release(topic, seek=False)
                else:
                    self._hold(topic, positions)
            elif verdict is TopicVerdict.MISSING:
                if topic in hold or topic in self._held:
                    settled.add(topic)
                    self._hold(topic, self._held.get(topic) or self._positions_in(topic, batch, known))
            elif topic in self._held:  # back, unchanged (or IDs unknown): carry on where it stood
                self._release(topic, seek=True)
        return settled

    def _positions_in(self, topic: str, batch: dict, known: dict | None) -> dict[TopicPartition, int | None]:
        """Where each assigned partition of ``topic`` stands, counting records in ``batch`` as not handed out."""
        positions: dict[TopicPartition, int | None] = {}
        for tp in self._by_topic.get(topic, ()):
            items = batch.get(tp)
            if known and tp in known and known[tp] is not None:
                positions[tp] = known[tp]
            elif items:
                first = items[0]
                positions[tp] = first.source_offsets[0] if type(first) is FetchedBatch else first.offset
            else:
                positions[tp] = self.consumer.fetch_position(tp)
        return positions

    def _hold(self, topic: str, positions: dict[TopicPartition, int | None]) -> None:
        """Pause ``topic``'s partitions at ``positions`` until its ID can be read."""
        if topic not in self._held:
            log.info("Task %s: source topic %s may have changed (deleted, or its ID not readable); its %d "
                     "partition(s) wait at %s until its topic ID is known", self.context.task_id, topic,
                     len(positions), {tp.partition: p for tp, p in positions.items()})
            self.consumer.pause(*positions)
        for tp, position in positions.items():
            if position is not None:
                self.consumer.seek(tp, position)  # drops what was fetched beyond it
        self._held[topic] = positions

    def _release(self, topic: str, seek: bool) -> None:
        """Resume a held topic's partitions (at their held positions when ``seek``)."""
        positions = self._held.pop(topic, None)
        if positions is None:
            return
        if seek:
            for tp, position in positions.items():
                if position is not None:
                    self.consumer.seek(tp, position)
        self.consumer.resume(*positions)
        log.info("Task %s: source topic %s resumed", self.context.task_id, topic)

    async def _restart_topic(self, topic: str, positions: dict[TopicPartition, int | None], new_id: str) -> bool:
        """``topic`` was re-created: report each partition and move it to the new log's start. False when
        the log bounds could not be read (the topic stays held; the next check tries again)."""
        moved = [tp for tp, position in positions.items() if position is not None]
        old_id = self._identities.known.get(topic)
        if moved:
            try:
                async with asyncio.timeout(LOG_BOUNDS_TIMEOUT_S):
                    starts, ends = await asyncio.gather(
                        self.consumer.beginning_offsets(moved), self.consumer.end_offsets(moved))
            except (KafkaError, asyncio.TimeoutError) as exc:
                log.info("Task %s: source topic %s was re-created but the log bounds of %s could not be read (%r); "
                         "trying again", self.context.task_id, topic, moved, exc)
                return False
            for tp in moved:
                if tp in starts and tp in ends:
                    self._apply(tp, check_position(positions[tp], starts[tp], ends[tp], recreated=(old_id, new_id)),
                                at_start=False)
        self._identities.accept(topic, new_id)
        return True

    def _add_batches(self, tp: TopicPartition, batches: list[FetchedBatch], metric,
                     now: float) -> list[MirrorBatch]:
        """One partition's fetched (and merged) batches as MirrorBatches for the runtime; updates its metrics."""
        out = []
        partition = source_partition(self.source_alias, tp.topic, tp.partition)
        remote = self.remote[tp]
        size = forwarded = rebuilt = 0
        for fetched in batches:
            out.append(MirrorBatch(partition, remote, tp.partition, fetched))
            size += len(fetched.data)
            if fetched.reencoded:
                rebuilt += fetched.record_count
            else:
                forwarded += fetched.record_count
        metric.byte_count.inc(size)
        if forwarded:
            self._copied["batch"].inc(forwarded)
        if rebuilt:
            self._copied["rebuilt"].inc(rebuilt)
        self._pending.handed_over(tp, forwarded + rebuilt)
        last = batches[-1]
        if last.max_timestamp >= 0:
            metric.record_age_ms.set(now - last.max_timestamp)
        return out

    async def _positions_of(self, error: KafkaError) -> dict[TopicPartition, int | None]:
        """The assigned partitions a consumer error is about, with the offsets the task was reading at.

        The error names them (``error.partitions``), with the offset concerned where it knows it
        (a record too large: the position has already moved past it); the others are asked of the
        consumer. Empty when the error names none.
        """
        found: dict[TopicPartition, int | None] = dict(error.partitions)
        assigned = self.consumer.assignment()
        for tp, offset in found.items():
            if offset is None and tp in assigned:
                try:
                    async with asyncio.timeout(POSITION_WAIT_S):
                        found[tp] = await self.consumer.position(tp)
                except (KafkaError, asyncio.TimeoutError):
                    pass
        return found

    async def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        upstream_topic = record.source_partition["topic"]
        if metadata is None:  # a transform dropped it: nothing was written, so no metrics and no offset sync
            self._pending.acknowledged(TopicPartition(upstream_topic, record.source_partition["partition"]), 1)
            return
        tp = TopicPartition(upstream_topic, metadata.partition)
        self._pending.acknowledged(tp, 1)
        metric = self._metrics.get(tp)
        if metric is not None:
            metric.record_count.inc()
            if record.timestamp is not None:
                metric.replication_latency_ms.set(time.time() * 1000 - record.timestamp)
        if self.sync_writer is not None:
            self.sync_writer.record(upstream_topic, metadata.partition, record.source_offset["offset"],
                                    metadata.offset)

    async def commit_batch(self, batch: SourceBatch, metadata: RecordMetadata) -> None:
        upstream_topic = batch.source_partition["topic"]
        tp = TopicPartition(upstream_topic, metadata.partition)
        offsets = batch.source_offsets
        self._pending.acknowledged(tp, batch.record_count)
        metric = self._metrics.get(tp)
        if metric is not None:
            metric.record_count.inc(batch.record_count)
            if batch.max_timestamp >= 0:
                metric.replication_latency_ms.set(time.time() * 1000 - batch.max_timestamp)
        if self.sync_writer is not None:
            self.sync_writer.record_batch(upstream_topic, metadata.partition, offsets, metadata.offset)

    async def commit(self) -> None:
        if self.sync_writer is not None:
            self.sync_writer.promote_delayed()

    async def stop(self) -> None:
        for handle in getattr(self, "_metrics", {}).values():
            handle.forget_gauges()
        try:
            if self.sync_writer is not None:
                await self._flush_syncs()
        finally:
            if self.sync_producer is not None:
                await self.sync_producer.stop()
            await self.consumer.stop()

    async def _flush_syncs(self) -> None:
        """Write every sync due, the latest position of each partition included, before the task is gone.

        The runtime stored this task's source offsets and handed it its last acknowledgements
        before calling stop(), so each partition's last sync is at its stored offset: the next task
        continues the exact chain from there (offset_sync_runs, "Restarted tasks").
        """
        writer = self.sync_writer
        try:
            async with asyncio.timeout(SYNC_FLUSH_TIMEOUT_S):
                await writer.close()
        except Exception as exc:  # a timeout or a broker error: say what is lost, stop anyway
            log.warning("Task %s: %d offset sync(s) not written on stop (%r): groups on those partitions are "
                        "translated with MM2's rule until the next task's syncs", self.context.task_id,
                        writer.queued + writer.in_flight, exc)
        if writer.failed_sends:
            log.warning("Task %s: %d offset sync(s) could not be written during its lifetime",
                        self.context.task_id, writer.failed_sends)
        if self._sync_sender is not None:
            self._sync_sender.cancel()
            await asyncio.gather(self._sync_sender, return_exceptions=True)
