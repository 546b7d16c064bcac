"""MirrorCheckpointTask: translates its groups' committed offsets and writes checkpoints (MM2 §4.2-4.5).

Start-up: load this task's previous checkpoints from the target, read the offset-syncs topic
to its end (keeping full history only if the checkpoints loaded, KAFKA-15905) and keep
tailing it. Every ``emit.checkpoints.interval.seconds`` each group's committed offsets on the
source are translated; a checkpoint is written when it is new, moved forward downstream, or
the group was rewound upstream. With ``sync.group.offsets.enabled``, translated offsets are
also committed to the same group on the target, only while it has no active member there
and never backwards.
"""

from __future__ import annotations

import asyncio
import logging
import time


from mirrorline.api import RecordMetadata, SourceRecord, SourceTask, TopicPartition

from mirrorline.connectors.checkpoint import metrics
from mirrorline.connectors.checkpoint.checkpoint_store import CheckpointStore
from mirrorline.connectors.checkpoint.config import CHECKPOINT_CONFIG_DEF, TASK_ASSIGNED_GROUPS
from mirrorline.connectors.checkpoint.sync_reader import OffsetSyncReader
from mirrorline.connectors.mirror_client.clients import admin_client, connect_admin, consumer_for
from mirrorline.connectors.mirror_client.config import (
    CONSUMER_POLL_TIMEOUT_MS,
    OFFSET_SYNCS_TOPIC_LOCATION,
    REPLICATION_METRICS_LEVEL,
    SOURCE_CLUSTER_ALIAS,
    TARGET_CLUSTER_ALIAS,
    load_replication_policy,
)
from mirrorline.connectors.mirror_client.filters import TopicFilter
from mirrorline.connectors.mirror_client.formats import Checkpoint, checkpoint_partition
from mirrorline.connectors.mirror_client.offset_sync_store import OffsetSyncStore

log = logging.getLogger(__name__)

#: fetch.max.wait.ms of the offset-syncs reader unless the user sets one (see start())
TAIL_FETCH_WAIT_MS = "5000"


def next_cycle(monotonic_now: float, wall_now: float, interval_s: float) -> float:
    """When (on the monotonic clock) the next checkpoint cycle starts: at the next multiple of the
    interval in wall-clock time, so that every checkpoint task of a connector, on whichever worker,
    starts its cycle at the same moment and a cycle over all groups is one cycle, not several
    spread over the interval by when each task happened to start (the first cycle still runs as
    soon as a task starts).

    >>> next_cycle(1000.0, 120.5, 60)
    1059.5
    """
    return monotonic_now + interval_s - wall_now % interval_s


def reread_estimate(store: OffsetSyncStore, topic: str, partition: int, upstream: int, translated: int) -> int:
    """Records a consumer would read again after failing over at ``translated`` instead of its exact position."""
    if store.translate_exact(topic, partition, upstream) == translated:
        return 0
    for sync in store.syncs(topic, partition):
        if sync.upstream_offset <= upstream:
            return max(0, (upstream - sync.upstream_offset) - (translated - sync.downstream_offset))
    return 0


class MirrorCheckpointTask(SourceTask):
    """Emits checkpoints for its assigned consumer groups."""

    def version(self) -> str:
        return "0.1.0"

    async def start(self, config: dict[str, str]) -> None:
        parsed = CHECKPOINT_CONFIG_DEF.parse(config)
        self.source, self.target = parsed[SOURCE_CLUSTER_ALIAS], parsed[TARGET_CLUSTER_ALIAS]
        self.policy = load_replication_policy(config)
        self.topic_filter = TopicFilter(config)
        self.groups = [g for g in config.get(TASK_ASSIGNED_GROUPS, "").split(",") if g]
        self.interval_s = parsed["emit.checkpoints.interval.seconds"]
        #: at topic level checkpoint_latency_ms has one series per group and topic (partition label empty)
        self.latency_by_partition = parsed[REPLICATION_METRICS_LEVEL] == "partition"
        self.step_s = min(parsed[CONSUMER_POLL_TIMEOUT_MS] / 1000, self.interval_s)
        self.checkpoints_topic = self.policy.checkpoints_topic(self.source)
        flow = f"{self.source}->{self.target}|{self.context.task_id}"
        clients = self.context.clients
        self.source_admin = admin_client(clients, config, "source", f"{flow}|checkpoint-source-admin")
        self.target_admin = admin_client(clients, config, "target", f"{flow}|checkpoint-target-admin")
        await connect_admin(self.source_admin, config, "source")
        await connect_admin(self.target_admin, config, "target")

        self.store = CheckpointStore(set(self.groups))
        loader = consumer_for(clients, config, "target", f"{flow}|checkpoints-target-consumer")
        await loader.start()
        try:
            loaded = await self.store.load(loader, self.checkpoints_topic)
        finally:
            await loader.stop()
        on_source = parsed[OFFSET_SYNCS_TOPIC_LOCATION] == "source"
        side = "source" if on_source else "target"
        syncs_topic = self.policy.offset_syncs_topic(self.target if on_source else self.source)
        self.syncs = OffsetSyncStore(initialization_must_read_to_end=not loaded)
        self.reader = OffsetSyncReader(
            # it tails the topic: the broker answers as soon as a sync arrives, so a long hold only
            # spaces out the fetches of an idle reader (beyond MM2, whose consumer asks every 500 ms)
            consumer_for(clients, config, side, f"{flow}|offset-syncs-{side}-consumer",
                         defaults={"fetch.max.wait.ms": TAIL_FETCH_WAIT_MS}),
            syncs_topic, self.syncs, self.context.run_in_background)
        await self.reader.start()
        self._next_emit = time.monotonic()
        self._last_emit: dict[str, float] = {}
        #: each group's committed offsets at its last checkpointing (see _checkpoint_groups)
        self._checkpointed_at: dict[str, dict] = {}
        self._sync_loop = None
        if parsed["sync.group.offsets.enabled"]:
            self._sync_loop = self.context.run_in_background(self._sync_group_offsets_loop(
                parsed["sync.group.offsets.interval.seconds"]), "sync-group-offsets")
        log.info("Checkpoint task %s handles %d group(s) of %s->%s", self.context.task_id, len(self.groups),
                 self.source, self.target)

    # -- checkpoints ----------------------------------------------------------------------
    async def poll(self) -> list[SourceRecord]:
        wait = self._next_emit - time.monotonic()
        if wait > 0:
            await asyncio.sleep(min(wait, self.step_s))
            return []
        self._next_emit = next_cycle(time.monotonic(), time.time(), self.interval_s)
        records = []
        for found in await self._checkpoint_groups():
            records.extend(found)
        return records

    async def _checkpoint_groups(self) -> list[list[SourceRecord]]:
        """The checkpoints of every assigned group, their committed offsets read in as few requests
        as the client can (one per coordinator on Kafka 3.0+): one request per group was hundreds of
        requests a minute at hundreds of groups."""
        started = int(time.time() * 1000)
        try:
            committed = await self.source_admin.list_consumer_groups_offsets(self.groups)
        except Exception as exc:  # noqa: BLE001 - the next cycle tries again
            log.warning("Checkpoint task %s: could not read the committed offsets of its %d group(s) on %s: %s; "
                        "tried again in %.0f s", self.context.task_id, len(self.groups), self.source, exc,
                        self.interval_s)
            return []
        # A group whose committed offsets are those of its last cycle, on partitions no sync arrived
        # for since, translates exactly as it did then: its checkpoints were emitted (or found
        # unchanged) then, so it is passed over. Idle, that is every group: translating 8,000
        # unchanged positions a minute was a large part of an idle mirror's CPU.
        moved = self.syncs.take_changed()
        if moved is None:
            self._checkpointed_at.clear()
        out = []
        for group in self.groups:
            offsets = committed.get(group)
            if isinstance(offsets, Exception) or offsets is None:
                log.warning("Could not read committed offsets of group %s on %s: %s", group, self.source,
                            offsets or "no answer for it")
                self._checkpointed_at.pop(group, None)  # the syncs that moved meanwhile are not tracked
                continue
            if self._checkpointed_at.get(group) == offsets and moved.isdisjoint(offsets):
                continue
            self._checkpointed_at.pop(group, None)
            try:
                out.append(self._checkpoint_group(group, offsets, started))
            except Exception:  # noqa: BLE001 - raised, it would throw away the other groups' checkpoints
                log.exception("Checkpoint task %s: could not checkpoint group %s this cycle; the other "
                              "groups are checkpointed, this one is tried again in %.0f s",
                              self.context.task_id, group, self.interval_s)
            else:
                self._checkpointed_at[group] = offsets
        return out

    def downstream_topic(self, topic: str) -> str:
        """Where the upstream topic lives on the target (a topic that came from the target keeps its name)."""
        if self.policy.topic_source(topic) == self.target:
            return self.policy.original_topic(topic)
        return self.policy.format_remote_topic(self.source, topic)

    def _checkpoint_group(self, group: str, committed: dict, started: int) -> list[SourceRecord]:
        """The checkpoints of ``group`` whose translation changed, from its ``committed`` offsets."""
        records, reread = [], 0
        for tp, position in sorted(committed.items()):
            if position is None or position.offset < 0 or not self.topic_filter.should_replicate_topic(tp.topic):
                continue
            translated = self.syncs.translate_downstream(tp.topic, tp.partition, position.offset)
            if translated is None or translated < 0:
                continue
            reread += reread_estimate(self.syncs, tp.topic, tp.partition, position.offset, translated)
            checkpoint = Checkpoint(group, self.downstream_topic(tp.topic), tp.partition, position.offset,
                                    translated, position.metadata or "")
            if not self.store.should_emit(checkpoint):
                continue
            self.store.update(checkpoint)
            records.append(SourceRecord(
                checkpoint_partition(group, checkpoint.topic, checkpoint.partition), {"offset": 0},
                self.checkpoints_topic, 0, checkpoint.encode_key(), checkpoint.encode_value(), [], started))
        metrics.FAILOVER_REREAD_RECORDS.labels(self.source, self.target, group).set(reread)
        if records:
            if group not in self._last_emit:  # the age is computed when scraped: an idle task sets nothing
                emitted = self._last_emit
                metrics.CHECKPOINT_AGE_SECONDS.labels(self.source, self.target, group).set_function(
                    lambda: time.time() - emitted[group])
            self._last_emit[group] = time.time()
        return records

    async def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        if metadata is None:  # a transform dropped the checkpoint: it was not written
            return
        partition = record.source_partition
        label = str(partition["partition"]) if getattr(self, "latency_by_partition", True) else ""
        metrics.CHECKPOINT_LATENCY_MS.labels(self.source, self.target, partition["group"], partition["topic"],
                                             label).set(time.time() * 1000 - record.timestamp)

    # -- group offset sync (KIP-545) -------------------------------------------------------
    async def _sync_group_offsets_loop(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            for group in self.groups:
                try:
                    await self.sync_group_offsets(group)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.warning("Could not sync offsets of group %s to %s: %s", group, self.target, exc)

    async def sync_group_offsets(self, group: str) -> dict[TopicPartition, int]:
        """Commit translated offsets to ``group`` on the target; returns what was written."""
        checkpoints = self.store.of_group(group)
        if not checkpoints:
            return {}
        state = await self.target_admin.describe_consumer_group_state(group)
        if state not in ("Dead", "Empty"):
            log.debug("Group %s is %s on %s; its offsets are not touched while it has members",
                      group, state, self.target)
            return {}
        current = await self.target_admin.list_consumer_group_offsets(group) if state == "Empty" else {}
        wanted = {}
        for checkpoint in checkpoints:
            tp = TopicPartition(checkpoint.topic, checkpoint.partition)
            existing = current.get(tp)
            if existing is None or existing.offset < 0 or existing.offset < checkpoint.downstream_offset:
                wanted[tp] = (checkpoint.downstream_offset, checkpoint.metadata)
        if wanted:
            await self.target_admin.alter_consumer_group_offsets(group, wanted)
            log.info("Synced %d offset(s) of group %s to %s", len(wanted), group, self.target)
        return {tp: offset for tp, (offset, _) in wanted.items()}

    async def stop(self) -> None:
        for group in getattr(self, "_last_emit", ()):  # computed at scrape: would age on after the task stopped
            try:
                metrics.CHECKPOINT_AGE_SECONDS.remove(self.source, self.target, group)
            except KeyError:
                pass
        if self._sync_loop is not None:
            self._sync_loop.cancel()
            await asyncio.gather(self._sync_loop, return_exceptions=True)
        await self.reader.stop()
        for admin in (self.source_admin, self.target_admin):
            await admin.close()
