"""BackfillJob: copies a flow's history with Spark, then hands each partition over to MirrorSource exactly.

Steps (the driver; Spark does step 4):

1. The flow's topics, as MirrorSource selects them (filter, replication policy, cycles,
   internal topics), narrowed by ``backfill.topics``; log bounds of every partition.
2. The plan (:mod:`mirrorline.connectors.mm2.backfill_plan`): ranges, refusals, resumption. It is stored
   per partition in the flow's offset store (under ``mirrorline-backfill``) before any record
   is written, with the target offset where the copy starts (``base``).
3. Remote topics created as MirrorSource creates them (partitions, filtered configs,
   ``replication.factor``), and the offset-syncs topic.
4. Spark reads the ranges (one Spark task per partition, no shuffle) and writes them with
   :func:`~mirrorline.spark.writer.write_ranges`: partition, key, value, headers and timestamp
   kept, in order; a retried task or a rerun skips what the target already holds.
5. The hand-off: offset syncs for the copied ranges (MM2's bytes, MM2's emission rule:
   first record, every ``offset.lag.max``, gaps, last), then MirrorSource's source offset
   ``{"offset": end - 1}`` per partition (MM2's format), so ``mirrorline mm2`` resumes at
   ``end``; then the checkpoints are marked done.

The job reaches Spark only through its context (``read_kafka``/``write_kafka`` with the client
settings the command gave for ``source`` and ``target``), as any third-party job would.

In a worker cluster (``POST /jobs``) the job may name a MirrorSource connector
(:mod:`.job_binding`): it then copies that connector's flow, keeps its plan and hands over in
the worker cluster's offset store under the connector's name, and copies only the partitions
the cluster recorded for it (:meth:`BackfillJob.partitions`). Its connector has let those
partitions go before the job starts, so a partition the connector already streamed is
continued exactly after its stored offset, and the connector's tasks take it back at the
job's end offset. Cancelled, the job stops Spark and hands over what it provably copied, so
the connector continues exactly from there.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from mirrorline.api import (ConfigDef, ConfigError, ConfigKey, ConnectError, ConnectorRef, Importance, Job, JobContext,
                            JobSettings, KafkaClients, NewTopic, PartitionTarget, Range, TopicPartition, Type)

from mirrorline.connectors.mirror_client.clients import admin_client, connect_admin, consumer_for
from mirrorline.connectors.mirror_client.config import (OFFSET_SYNCS_TOPIC_LOCATION, SOURCE_CLUSTER_ALIAS, TARGET_CLUSTER_ALIAS,
                                             client_props, load_replication_policy)
from mirrorline.connectors.mirror_client.filters import GroupFilter
from mirrorline.connectors.mirror_client.formats import Checkpoint, OffsetSync, source_partition
from mirrorline.connectors.mm2.locate import bounds, record_at, same_record
from mirrorline.connectors.mm2.mm2_config import SOURCE_CONNECTOR
from mirrorline.connectors.source_mirror.config import SOURCE_CONFIG_DEF
from mirrorline.connectors.source_mirror.topics import (ConfigFilter, TopicSelection, create_remote_topics,
                                             offset_syncs_topic_config, source_topics, topic_filter_for,
                                             topic_partitions)

from .backfill_plan import (CHECKPOINT_CONNECTOR, Bounds, PartitionRange, Plan, exact_downstream, parse_position,
                            plan_partition, select_topics, topic_pattern)
from .job_binding import MIRROR_SOURCE_CLASSES, aliases, flow_client_settings, flow_topic_filter, mirror_originals

TOPICS = "backfill.topics"
FROM = "backfill.from"
TO = "backfill.to"
ALLOW_GAPS = "backfill.allow.gaps"
CONNECTOR_NAME = "backfill.connector.name"
MAX_RATE = "backfill.max.records.per.second"
#: Settings that are the job's own (the rest describe the flow, as a MirrorSource config does).
OWN_PREFIXES = ("backfill.", "spark.")
#: Flow worker settings (offset store location) are passed under this prefix.
WORKER_PREFIX = "worker."
#: Seconds a cluster gets to answer before the backfill gives up on it.
CONNECT_TIMEOUT_S = 30.0
#: Seconds between two looks at the target's end offsets for the progress display.
PROGRESS_EVERY_S = 1.0

BACKFILL_CONFIG_DEF = ConfigDef([
    ConfigKey(TOPICS, Type.STRING, default="", importance=Importance.MEDIUM,
              doc="Regular expression a whole source topic name must match, within the topics the flow mirrors "
                  "(empty: all of them)."),
    ConfigKey(FROM, Type.STRING, default="earliest", importance=Importance.HIGH,
              doc="First record to copy in each partition: earliest, offset:N or timestamp:MS (inclusive)."),
    ConfigKey(TO, Type.STRING, default="latest", importance=Importance.HIGH,
              doc="Where the copy ends in each partition: latest (the log end when the backfill starts), "
                  "offset:N or timestamp:MS (exclusive). MirrorSource continues from there."),
    ConfigKey(ALLOW_GAPS, Type.BOOLEAN, default="false", importance=Importance.MEDIUM,
              doc="Copy what is left of a range whose start was deleted by retention, and count the missing "
                  "records, instead of refusing."),
    ConfigKey(MAX_RATE, Type.DOUBLE, default=0.0, validator=Range(min=0), importance=Importance.LOW,
              doc="At most this many records per second per partition written (each Spark task writes one "
                  "partition), to spare the target cluster; 0: no limit."),
    ConfigKey(CONNECTOR_NAME, Type.STRING, default=SOURCE_CONNECTOR, importance=Importance.LOW,
              doc="The name of the MirrorSource connector whose source offsets the hand-off writes (MM2's "
                  "dedicated mode: MirrorSourceConnector). Set by the worker cluster when the job names a "
                  "connector (\"connector\": ...)."),
])


def checkpoint_namespace(connector: str) -> str:
    """Under which "connector" name the plan is kept in the offset store: MM2 mode's, or one per connector."""
    return CHECKPOINT_CONNECTOR if connector == SOURCE_CONNECTOR else f"{CHECKPOINT_CONNECTOR}:{connector}"


def flow_settings(settings: dict[str, str]) -> dict[str, str]:
    """The MirrorSource settings among a backfill's settings (neither the job's own nor the offset store's)."""
    return {k: v for k, v in settings.items() if not k.startswith((WORKER_PREFIX, *OWN_PREFIXES))}


class BackfillJob(Job):
    """Copies the history of an MM2 flow's topics with Spark and hands over to MirrorSource."""

    name = "backfill"
    description = "copy a MirrorMaker 2 flow's history with Spark, then hand over to MirrorSource exactly"
    config_def = BACKFILL_CONFIG_DEF
    connector_classes = MIRROR_SOURCE_CLASSES

    def prepare(self, settings, connector: ConnectorRef | None) -> JobSettings:
        """The flow from the named connector (or from the settings, given as a MirrorSource config)."""
        settings = {str(k): str(v) for k, v in settings.items()}
        own = {k: v for k, v in settings.items() if k.startswith(OWN_PREFIXES)}
        if connector is None:
            originals = flow_settings(settings)
            own.update({k: v for k, v in settings.items() if k.startswith(WORKER_PREFIX)})
        else:
            foreign = sorted(k for k in settings if not k.startswith(OWN_PREFIXES))
            if foreign:
                raise ConfigError(f"{foreign[0]}: a backfill of connector {connector.name} takes the flow's settings "
                                  f"from the connector; give only backfill.* and spark.* settings")
            originals = mirror_originals(connector.config)
            own[CONNECTOR_NAME] = connector.name
        aliases(originals)
        SOURCE_CONFIG_DEF.parse(originals)  # a bad flow setting is named now
        for key, position in ((FROM, own.get(FROM, "earliest")), (TO, own.get(TO, "latest"))):
            parse_position(key, position)
        return JobSettings({**originals, **own}, flow_client_settings(originals, "backfill-producer"))

    async def partitions(self, prepared: JobSettings, clients: KafkaClients) -> list[dict[str, Any]]:
        """Every partition of the flow's topics (narrowed by ``backfill.topics``) on the source, now."""
        originals = flow_settings(prepared.settings)
        source_alias, target_alias = aliases(originals)
        connector = prepared.settings.get(CONNECTOR_NAME, SOURCE_CONNECTOR)
        selection = TopicSelection(source_alias, target_alias, load_replication_policy(originals),
                                   await flow_topic_filter(clients, originals, connector, source_alias, target_alias),
                                   heartbeats_enabled=False)
        admin = admin_client(clients, originals, "source", f"{source_alias}->{target_alias}|backfill-plan")
        try:
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT_S):
                    await connect_admin(admin, originals, "source")
            except Exception as exc:  # one line naming the cluster
                raise ConnectError(f"cannot reach cluster {source_alias} (source of {source_alias}->{target_alias}): "
                                   f"{exc or exc.__class__.__name__}") from None
            text = prepared.settings.get(TOPICS) or None
            topics = select_topics(await source_topics(admin, selection), topic_pattern(text), text,
                                   f"{source_alias}->{target_alias}")
        finally:
            await admin.close()
        return [source_partition(source_alias, topic, p) for topic, count in sorted(topics.items())
                for p in range(count)]

    async def run(self, context: JobContext) -> dict[str, Any]:
        settings = {k: str(v) for k, v in context.settings.items()}
        originals = flow_settings(settings)
        worker = {k[len(WORKER_PREFIX):]: v for k, v in settings.items() if k.startswith(WORKER_PREFIX)}
        start_at = parse_position("--from", context.config[FROM])
        end_at = parse_position("--to", context.config[TO])
        if start_at.kind == "latest":
            raise ConnectError("--from latest copies nothing: the backfill copies history up to --to")
        await asyncio.to_thread(context.check_spark)  # before anything is written
        backfill = _Backfill(context, originals, worker, context.config[CONNECTOR_NAME])
        backfill.max_rate = context.config[MAX_RATE]
        return await backfill.run(
            start_at, end_at, context.config[TOPICS] or None, context.config[ALLOW_GAPS])


class _Backfill:
    """One run of the job, with its clients."""

    def __init__(self, context: JobContext, originals: dict[str, str], worker: dict[str, str],
                 connector: str = SOURCE_CONNECTOR):
        self.context = context
        self.log = context.logger
        self.originals = originals
        self.worker = worker
        #: the MirrorSource connector whose offsets the hand-off writes, and where the plan is kept
        self.connector = connector
        self.checkpoints = checkpoint_namespace(connector)
        self.max_rate = 0.0
        #: a worker cluster's job copies the partitions it holds, and continues what the connector streamed
        self.held = None if context.partitions is None else {
            (str(p.get("topic")), int(p.get("partition", -1))) for p in context.partitions}
        self.mirror = SOURCE_CONFIG_DEF.parse(originals)
        self.source_alias = self.mirror[SOURCE_CLUSTER_ALIAS]
        self.target_alias = self.mirror[TARGET_CLUSTER_ALIAS]
        self.flow = f"{self.source_alias}->{self.target_alias}"
        self.policy = load_replication_policy(originals)

    @contextlib.asynccontextmanager
    async def _clients(self) -> AsyncIterator[None]:
        clients = self.context.clients
        client_id = f"{self.flow}|backfill"
        self.source_admin = admin_client(clients, self.originals, "source", f"{client_id}-source-admin")
        self.target_admin = admin_client(clients, self.originals, "target", f"{client_id}-target-admin")
        fast = {"auto.offset.reset": "earliest", "fetch.max.wait.ms": 10}
        self.source = consumer_for(clients, self.originals, "source", f"{client_id}-source", fast)
        self.target = consumer_for(clients, self.originals, "target", f"{client_id}-target", fast)
        try:
            for side, alias, admin, consumer in (("source", self.source_alias, self.source_admin, self.source),
                                                 ("target", self.target_alias, self.target_admin, self.target)):
                try:
                    async with asyncio.timeout(CONNECT_TIMEOUT_S):
                        await connect_admin(admin, self.originals, side)
                    async with asyncio.timeout(CONNECT_TIMEOUT_S):
                        await consumer.start()
                except ConnectError:
                    raise
                except Exception as exc:  # unreachable, refused login, timeout: one line naming the cluster
                    raise ConnectError(f"cannot reach cluster {alias} ({side} of {self.flow}): "
                                       f"{exc or exc.__class__.__name__}") from None
            yield
        finally:
            for consumer in (self.source, self.target):
                await consumer.stop()
            for admin in (self.source_admin, self.target_admin):
                await admin.close()

    async def run(self, start_at, end_at, topics_text: str | None, allow_gaps: bool) -> dict[str, Any]:
        began = time.monotonic()
        async with self._clients():
            # a flow that never ran has no offset store yet: plan (and refuse bad input) before creating it
            fresh = bool(self.worker) and self.worker.get("offset.storage.topic") not in \
                await self.target_admin.list_topics()
            plan = await self._plan(None, start_at, end_at, topics_text, allow_gaps) if fresh else None
            async with self.context.source_offsets(self.worker) as offsets:
                plan = plan or await self._plan(offsets, start_at, end_at, topics_text, allow_gaps)
                return await self._execute(offsets, plan, began)

    async def _execute(self, offsets, plan: Plan, began: float) -> dict[str, Any]:
        """Store the plan, create topics, copy, then hand over (syncs, checkpoints, offsets)."""
        await offsets.put(self.checkpoints, [(self._key(r), r.checkpoint()) for r in plan.ranges])
        await self._create_topics(plan)
        await self._trim_finished(plan)
        to_copy = [r for r in plan.ranges if r.size > 0]
        written, byte_count, syncs, ends = 0, 0, {}, {}
        if to_copy:
            try:
                written, byte_count, syncs, ends = await self._copy(to_copy, plan)
            except asyncio.CancelledError:
                return await self._hand_off_partial(offsets, plan, began)
        for r in plan.ranges:
            syncs.setdefault((r.topic, r.partition), [])
            syncs[(r.topic, r.partition)] = _merge(self._synthetic_syncs(r), syncs[(r.topic, r.partition)])
        await self._emit_syncs(plan, syncs)
        checkpoints = await self._emit_checkpoints(plan, syncs, ends)
        await self._hand_off(offsets, plan)
        seconds = time.monotonic() - began
        summary = {
            "flow": self.flow, "connector": self.connector, "partitions": len(plan.ranges),
            "records_written": written, "bytes_written": byte_count, "continued": len(plan.continued),
            "already_done": len(plan.already_done), "resumed": len(plan.resumed), "gap_records": plan.gaps,
            "checkpoints": checkpoints,
            "seconds": round(seconds, 2),
            "ranges": [{"topic": r.topic, "partition": r.partition, "remote": r.remote, "start": r.planned_start,
                        "end": r.end, "target_start": r.planned_base,
                        "target_end": ends.get((r.topic, r.partition), r.base + r.size)}
                       for r in plan.ranges],
        }
        return summary

    # ------------------------------------------------------------------ planning

    def _key(self, r: PartitionRange) -> dict[str, Any]:
        return source_partition(self.source_alias, r.topic, r.partition)

    async def _plan(self, offsets, start_at, end_at, topics_text, allow_gaps) -> Plan:
        topic_filter = await flow_topic_filter(self.context.clients, self.originals, self.connector, self.source_alias,
                                               self.target_alias)
        selection = TopicSelection(self.source_alias, self.target_alias, self.policy, topic_filter,
                                   heartbeats_enabled=False)
        flow_topics = await source_topics(self.source_admin, selection)
        topics = select_topics(flow_topics, topic_pattern(topics_text), topics_text, self.flow)
        tps = [TopicPartition(t, p) for t, n in sorted(topics.items()) for p in range(n)]
        starts = await self.source.beginning_offsets(tps)
        ends = await self.source.end_offsets(tps)
        times = {pos.value for pos in (start_at, end_at) if pos.kind == "timestamp"}
        for_times: dict[TopicPartition, dict[int, int | None]] = {tp: {} for tp in tps}
        for ms in times:
            found = await self.source.offsets_for_times({tp: ms for tp in tps})
            for tp in tps:
                for_times[tp][ms] = found[tp].offset if found.get(tp) is not None else None
        if self.held is not None:  # the partitions the worker cluster recorded for this job, and no other
            tps = [tp for tp in tps if (tp.topic, tp.partition) in self.held]
        keys = [source_partition(self.source_alias, tp.topic, tp.partition) for tp in tps]
        stored = await offsets.get(self.connector, keys) if offsets else [None] * len(keys)
        checkpoints = await offsets.get(self.checkpoints, keys) if offsets else [None] * len(keys)
        remotes = {tp: TopicPartition(self.policy.format_remote_topic(self.source_alias, tp.topic), tp.partition)
                   for tp in tps}
        existing = set(await self.target_admin.list_topics())
        present = [remotes[tp] for tp in tps if remotes[tp].topic in existing]
        target_starts = await self.target.beginning_offsets(present) if present else {}
        target_ends = await self.target.end_offsets(present) if present else {}
        plan = Plan()
        for tp, stored_offset, checkpoint in zip(tps, stored, checkpoints):
            remote = remotes[tp]
            r, state = plan_partition(
                tp.topic, tp.partition, remote.topic, Bounds(starts[tp], ends[tp], for_times[tp]), start_at, end_at,
                allow_gaps, None if stored_offset is None else stored_offset.get("offset"), checkpoint,
                target_starts.get(remote, 0), target_ends.get(remote, 0), continue_streamed=self.held is not None)
            if state == "done":
                plan.already_done.append((tp.topic, tp.partition))
            elif r is not None:
                if state == "continue":
                    await self._check_continues(r, target_starts.get(remote, 0), target_ends.get(remote, 0))
                    plan.continued.append((tp.topic, tp.partition))
                plan.ranges.append(r)
                plan.gaps += r.gap
                if state == "resume":
                    plan.resumed.append((tp.topic, tp.partition))
        if not plan.ranges and not plan.already_done and self.held is None:
            raise ConnectError(f"empty range: no records from --from {start_at} to --to {end_at} in "
                               f"{', '.join(sorted(topics))} on {self.source_alias}")
        for r in plan.ranges:
            if r.gap:
                self.log.warning("%s-%d: %d record(s) before offset %d were deleted by retention and are not copied",
                                 r.topic, r.partition, r.gap, r.start)
        return plan

    async def _check_continues(self, r: PartitionRange, target_start: int, target_end: int) -> None:
        """The remote partition must end with the copy of the record MirrorSource stored last: then the
        range continues the stream with no record missing and none twice."""
        name = f"{r.topic}-{r.partition}"
        if target_end <= target_start:
            raise ConnectError(f"{name}: MirrorSource stored offset {r.streamed} but {r.remote}-{r.partition} holds no "
                               f"record; the copy cannot continue exactly")
        source_record = await record_at(self.source, TopicPartition(r.topic, r.partition), r.streamed, r.streamed + 1)
        target_record = await record_at(self.target, TopicPartition(r.remote, r.partition), target_end - 1, target_end)
        if source_record is None or target_record is None or source_record.offset != r.streamed \
                or not same_record(source_record, target_record):
            raise ConnectError(f"{name}: {r.remote}-{r.partition} does not end with the copy of source offset "
                               f"{r.streamed} (MirrorSource's stored offset): records after it were written twice or "
                               f"by something else, so the copy cannot continue exactly")
        self.log.info("%s: continuing the stream after offset %d (MirrorSource's last copied record) at target "
                      "offset %d", name, r.streamed, target_end)

    async def _create_topics(self, plan: Plan) -> None:
        wanted: dict[str, int] = {}
        for r in plan.ranges:
            wanted[r.topic] = max(wanted.get(r.topic, 0), r.partition + 1)
        counts = await topic_partitions(self.source_admin, sorted(wanted))
        created = await create_remote_topics(
            self.source_admin, self.target_admin, self.source_alias, self.policy, counts,
            self.mirror["replication.factor"],
            ConfigFilter(self.mirror["config.properties.exclude"], self.mirror["use.defaults.from"]))
        missing = sorted({r.remote for r in plan.ranges} - set(created))
        if missing:
            raise ConnectError(f"could not create remote topic(s) {', '.join(missing)} on {self.target_alias}")
        if self.mirror["emit.offset-syncs.enabled"]:
            on_source = self.mirror[OFFSET_SYNCS_TOPIC_LOCATION] == "source"
            admin = self.source_admin if on_source else self.target_admin
            name = self.policy.offset_syncs_topic(self.target_alias if on_source else self.source_alias)
            await admin.create_topics([NewTopic(name, 1, self.mirror["offset-syncs.topic.replication.factor"],
                                                offset_syncs_topic_config())])

    async def _trim_finished(self, plan: Plan) -> None:
        """Resumed partitions: skip, without reading them again, the part the target provably holds.

        The target holds ``k = end - base`` records of the copy. When the k-th record of the range
        (at offset ``start + k - 1``: the range has no gaps there) is the one the target holds last,
        the range restarts at ``start + k``; otherwise the Spark task skips k records by count.
        """
        for r in plan.ranges:
            remote = TopicPartition(r.remote, r.partition)
            _, target_end = await bounds(self.target, remote)
            held = target_end - r.base
            if held <= 0:
                continue
            candidate = r.start + held - 1
            if candidate >= r.end:
                continue
            source_record = await record_at(self.source, TopicPartition(r.topic, r.partition), candidate, r.end)
            target_record = await record_at(self.target, remote, target_end - 1, target_end)
            if (source_record is not None and target_record is not None and source_record.offset == candidate
                    and same_record(source_record, target_record)):
                r.trimmed = (r.start, r.base, held)
                r.start, r.base = r.start + held, target_end
                self.log.info("%s-%d: %d record(s) already copied, resuming at offset %d", r.topic, r.partition,
                              held, r.start)

    # ------------------------------------------------------------------ copying

    async def _copy(self, ranges: list[PartitionRange], plan: Plan):
        context = self.context
        await asyncio.to_thread(lambda: context.spark)  # the JVM starts here, off the event loop
        frame = context.read_kafka("source", {(r.topic, r.partition): (r.start, r.end) for r in ranges})
        targets = {(r.topic, r.partition): PartitionTarget(r.remote, r.base) for r in ranges}
        total = sum(r.size for r in ranges)
        progress = context.progress(total, "records", f"backfill {self.flow}")
        remote_tps = {TopicPartition(r.remote, r.partition): r.base for r in ranges}
        stop = asyncio.Event()

        async def watch() -> None:
            while not stop.is_set():
                try:
                    ends = await self.target.end_offsets(list(remote_tps))
                    progress.update(sum(max(0, ends[tp] - base) for tp, base in remote_tps.items()))
                except Exception as exc:  # the display only; the copy reports its own errors
                    self.log.debug("progress: %s", exc)
                with contextlib.suppress(asyncio.TimeoutError):
                    async with asyncio.timeout(PROGRESS_EVERY_S):
                        await stop.wait()

        watcher = asyncio.create_task(watch(), name="backfill-progress")
        writing = asyncio.ensure_future(asyncio.to_thread(context.write_kafka, frame, "target", targets,
                                                          self.mirror["offset.lag.max"], self.max_rate))
        try:
            try:
                result = await asyncio.shield(writing)
            except asyncio.CancelledError:
                # cancelled (the job's Spark jobs too): nothing may still write when the caller hands over
                await asyncio.gather(writing, return_exceptions=True)
                await self._settle_targets(list(remote_tps))
                raise
            progress.update(sum(end - targets[key].base for key, (_, end, _) in result.done.items()))
        finally:
            stop.set()
            await watcher
            progress.close()
        written = sum(count for _, _, count in result.done.values())
        byte_count = sum(result.bytes.values())
        ends = {key: end for key, (_, end, _) in result.done.items()}
        return written, byte_count, dict(result.syncs), ends

    async def _settle_targets(self, tps: list[TopicPartition], quiet_s: float = 2.0, limit_s: float = 60.0) -> None:
        """Wait until the targets' end offsets stop moving (writers of cancelled Spark tasks have ended)."""
        deadline = time.monotonic() + limit_s
        previous = await self.target.end_offsets(tps)
        while time.monotonic() < deadline:
            await asyncio.sleep(quiet_s)
            now = await self.target.end_offsets(tps)
            if now == previous:
                return
            previous = now
        raise ConnectError("cancelled, but the target partitions kept growing for a minute after Spark's jobs were "
                           "cancelled; nothing was handed over (a later backfill resumes exactly)")

    def _synthetic_syncs(self, r: PartitionRange) -> list[tuple[int, int]]:
        """Sync candidates for the part of a resumed range skipped by :meth:`_trim_finished` (no gaps there)."""
        if not r.trimmed:
            return []
        start, base, held = r.trimmed
        every = max(1, int(self.mirror["offset.lag.max"]))
        points = list(range(0, held, every)) + [held - 1]
        return [(start + i, base + i) for i in sorted(set(points))]

    # ------------------------------------------------------------------ hand-off

    async def _emit_syncs(self, plan: Plan, syncs: dict[tuple[str, int], list[tuple[int, int]]]) -> None:
        if not self.mirror["emit.offset-syncs.enabled"]:
            return
        on_source = self.mirror[OFFSET_SYNCS_TOPIC_LOCATION] == "source"
        side = "source" if on_source else "target"
        topic = self.policy.offset_syncs_topic(self.target_alias if on_source else self.source_alias)
        props = {**client_props(self.originals, side, "producer"), "client.id": f"{self.flow}|backfill-offset-syncs",
                 "acks": "all"}
        producer = self.context.clients.producer(props)
        await producer.start()
        try:
            for (source_topic, partition), points in sorted(syncs.items()):
                for upstream, downstream in points:
                    sync = OffsetSync(source_topic, partition, upstream, downstream)
                    await producer.send(topic, sync.encode_value(), key=sync.encode_key(), partition=0)
            await producer.flush()
        finally:
            await producer.stop()

    async def _emit_checkpoints(self, plan: Plan, syncs: dict[tuple[str, int], list[tuple[int, int]]],
                                ends: dict[tuple[str, int], int]) -> int:
        """Exact checkpoints for the flow's groups whose position on the source lies in a copied range.

        MirrorCheckpoint keeps only the newest offset sync of each partition from its start-up
        read (MM2's rule), so it cannot translate positions deep inside a backfill: the backfill,
        which knows every copied offset, writes those checkpoints itself (MM2's bytes, to
        ``<source>.checkpoints.internal`` on the target). MirrorCheckpoint loads them at start and
        never emits one that moves a group backwards, so they stand until the group moves on.
        """
        if not self.originals.get("emit.checkpoints.enabled", "true").lower() == "true":
            return 0
        group_filter = GroupFilter(self.originals)
        listed = await self.source_admin.list_consumer_groups()
        groups = sorted({entry[0] for entry in listed if group_filter.should_replicate_group(entry[0])})
        ranges = {(r.topic, r.partition): r for r in plan.ranges}
        out: list[Checkpoint] = []
        for group in groups:
            committed = await self.source_admin.list_consumer_group_offsets(group)
            for tp, meta in committed.items():
                r = ranges.get((tp.topic, tp.partition))
                if r is None or meta.offset < 0:
                    continue
                target_end = ends.get((r.topic, r.partition), r.base + r.size)
                downstream = exact_downstream(meta.offset, r.planned_start, r.end, target_end,
                                              syncs.get((r.topic, r.partition), []))
                if downstream is not None:
                    out.append(Checkpoint(group, r.remote, r.partition, meta.offset, downstream, meta.metadata or ""))
        if not out:
            return 0
        topic = self.policy.checkpoints_topic(self.source_alias)
        replication = int(self.originals.get("checkpoints.topic.replication.factor", "3"))
        await self.target_admin.create_topics([NewTopic(topic, 1, replication, {"cleanup.policy": "compact"})])
        props = {**client_props(self.originals, "target", "producer"), "client.id": f"{self.flow}|backfill-checkpoints",
                 "acks": "all"}
        producer = self.context.clients.producer(props)
        await producer.start()
        try:
            for checkpoint in out:
                await producer.send(topic, checkpoint.encode_value(), key=checkpoint.encode_key(), partition=0)
            await producer.flush()
        finally:
            await producer.stop()
        self.log.info("Wrote %d exact checkpoint(s) for group positions inside the backfilled ranges", len(out))
        return len(out)

    async def _hand_off(self, offsets, plan: Plan) -> None:
        keys = [self._key(r) for r in plan.ranges]
        stored = await offsets.get(self.connector, keys)
        moved = [f"{r.topic}-{r.partition} (offset {s['offset']})" for r, s in zip(plan.ranges, stored)
                 if s is not None and s.get("offset") not in (r.end - 1, r.streamed)]
        if moved:
            raise ConnectError(f"MirrorSource started streaming during the backfill: {', '.join(moved)}; the copy "
                               f"and the stream now overlap in those partitions (stop the flow while backfilling)")
        await offsets.put(self.connector, [(k, {"offset": r.end - 1}) for k, r in zip(keys, plan.ranges)])
        await offsets.put(self.checkpoints, [(k, {**r.checkpoint(done=True), "start": r.planned_start,
                                                  "base": r.planned_base})
                                             for k, r in zip(keys, plan.ranges)])

    async def _hand_off_partial(self, offsets, plan: Plan, began: float) -> dict[str, Any]:
        """Cancelled mid-copy: hand over, per partition, the prefix of its range the target provably holds.

        Spark's jobs were cancelled before this runs and ``_copy`` waited for its writes to end. A
        partition whose copied prefix cannot be proven (gaps in its source offsets) keeps its plan
        unfinished, so a later backfill resumes it; the summary says which.
        """
        handed, kept = [], []
        for r in plan.ranges:
            _, target_end = await bounds(self.target, TopicPartition(r.remote, r.partition))
            held = target_end - r.planned_base
            if held <= 0:
                partial = PartitionRange(r.topic, r.partition, r.remote, r.planned_start, r.planned_start,
                                         r.planned_base, streamed=r.streamed)
            else:
                last = r.planned_start + held - 1
                source_record = await record_at(self.source, TopicPartition(r.topic, r.partition), last, r.end)
                target_record = await record_at(self.target, TopicPartition(r.remote, r.partition), target_end - 1,
                                                target_end)
                if source_record is None or target_record is None or source_record.offset != last \
                        or not same_record(source_record, target_record):
                    kept.append(r)
                    continue
                partial = PartitionRange(r.topic, r.partition, r.remote, r.planned_start, last + 1, r.planned_base,
                                         trimmed=(r.planned_start, r.planned_base, held), streamed=r.streamed)
            handed.append(partial)
        partial_plan = Plan(ranges=handed)
        syncs = {(r.topic, r.partition): self._synthetic_syncs(r) for r in handed}
        await self._emit_syncs(partial_plan, syncs)
        ready = [r for r in handed if r.end > r.start]
        # a partition with nothing copied keeps MirrorSource's own offset (or none): nothing to hand over
        if ready:
            await self._hand_off(offsets, Plan(ranges=ready))
        untouched = [r for r in handed if r.end <= r.start]
        if untouched:
            await offsets.put(self.checkpoints, [(self._key(r), None) for r in untouched])
        self.log.warning("cancelled: %d partition(s) handed over at what they copied, %d kept for a later backfill",
                         len(handed), len(kept))
        return {"flow": self.flow, "connector": self.connector, "cancelled": True, "handed_over": not kept,
                "records_written": sum(r.end - r.start for r in ready),
                "seconds": round(time.monotonic() - began, 2),
                "ranges": [{"topic": r.topic, "partition": r.partition, "remote": r.remote, "start": r.start,
                            "end": r.end, "target_start": r.planned_base, "handed_over": True} for r in handed]
                + [{"topic": r.topic, "partition": r.partition, "remote": r.remote, "start": r.planned_start,
                    "end": r.end, "target_start": r.planned_base, "handed_over": False} for r in kept]}


def _merge(first: list[tuple[int, int]], second: list[tuple[int, int]]) -> list[tuple[int, int]]:
    return sorted(set(first) | set(second))
