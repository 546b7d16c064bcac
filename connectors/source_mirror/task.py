"""MirrorSourceTask: copies its assigned source partitions, record for record (MM2 §3.7).

Each source record becomes a record for the remote topic with the same partition number,
key, value, headers (in order, bytes unchanged) and timestamp. The source offset stored
for a partition is that of the last replicated record, so a restarted task seeks to it + 1;
a partition with no stored offset starts where ``auto.offset.reset`` (default earliest)
says. After the target acknowledges a record, the offset-sync writer decides whether to
record the upstream->downstream mapping.
"""

from __future__ import annotations

import logging
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from framework.api import RecordMetadata, SourceRecord, SourceTask
from framework.api.kafka_clients import client_kwargs

from connectors.mirror_client.config import (
    CONSUMER_POLL_TIMEOUT_MS,
    OFFSET_SYNCS_TOPIC_LOCATION,
    SOURCE_CLUSTER_ALIAS,
    TARGET_CLUSTER_ALIAS,
    client_props,
    load_replication_policy,
)
from connectors.mirror_client.formats import source_partition
from connectors.source_mirror import metrics
from connectors.source_mirror.config import SOURCE_CONFIG_DEF, TASK_ASSIGNED_PARTITIONS, TASK_INDEX
from connectors.source_mirror.offset_syncs import OffsetSyncWriter
from connectors.source_mirror.topics import parse_partition

log = logging.getLogger(__name__)


class _PartitionMetrics:
    """The metric series of one mirrored partition."""

    def __init__(self, labels: tuple[str, ...]):
        self.record_count = metrics.RECORD_COUNT.labels(*labels)
        self.byte_count = metrics.BYTE_COUNT.labels(*labels)
        self.record_age_ms = metrics.RECORD_AGE_MS.labels(*labels)
        self.replication_latency_ms = metrics.REPLICATION_LATENCY_MS.labels(*labels)
        self.lag_records = metrics.REPLICATION_LAG_RECORDS.labels(*labels)


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
        assigned = [parse_partition(p) for p in config.get(TASK_ASSIGNED_PARTITIONS, "").split(",") if p]
        self.partitions = [TopicPartition(t, p) for t, p in assigned]
        self.remote = {tp: self.policy.format_remote_topic(self.source_alias, tp.topic) for tp in self.partitions}
        labels = {tp: (self.source_alias, self.target_alias, self.remote[tp], str(tp.partition))
                  for tp in self.partitions}
        # metric children per partition, looked up once (labels() per record costs ~10% of a core)
        self._metrics = {tp: _PartitionMetrics(l) for tp, l in labels.items()}

        consumer_props = {"auto.offset.reset": "earliest", "client.id": f"{flow}|replication-consumer",
                          **client_props(config, "source", "consumer"), "enable.auto.commit": "false"}
        kwargs, ignored = client_kwargs(consumer_props, "consumer")
        if ignored:
            log.info("Task %s: source consumer settings with no aiokafka equivalent are ignored: %s",
                     config.get(TASK_INDEX), ignored)
        self.consumer = AIOKafkaConsumer(**kwargs)
        await self.consumer.start()
        self.consumer.assign(self.partitions)
        stored = await self.context.offsets.offsets(
            [source_partition(self.source_alias, tp.topic, tp.partition) for tp in self.partitions])
        for tp, offset in zip(self.partitions, stored):
            if offset is not None and offset.get("offset", -1) >= 0:
                self.consumer.seek(tp, offset["offset"] + 1)

        self.sync_writer = None
        self.sync_producer = None
        if parsed["emit.offset-syncs.enabled"]:
            on_source = parsed[OFFSET_SYNCS_TOPIC_LOCATION] == "source"
            side = "source" if on_source else "target"
            kwargs, _ = client_kwargs({"client.id": f"{flow}|offset-syncs-{side}-producer",
                                       **client_props(config, side, "producer")}, "producer")
            self.sync_producer = AIOKafkaProducer(**{**kwargs, "acks": "all"})
            await self.sync_producer.start()
            topic = self.policy.offset_syncs_topic(self.target_alias if on_source else self.source_alias)
            # Fetch the topic's metadata now: otherwise the first syncs wait for it, the 10-send cap
            # fills, and MM2's coalescing drops the intermediate syncs of the other partitions,
            # leaving consumers that lag behind the newest sync without a translation.
            await self.sync_producer.partitions_for(topic)
            self.sync_writer = OffsetSyncWriter(self.sync_producer, topic, parsed["offset.lag.max"])
        log.info("Task %s mirrors %d partitions from %s to %s", self.context.task_id, len(self.partitions),
                 self.source_alias, self.target_alias)

    async def poll(self) -> list[SourceRecord]:
        if not self.partitions:
            return []
        batch = await self.consumer.getmany(timeout_ms=self.poll_timeout_ms)
        now = time.time() * 1000
        records = []
        for tp, messages in batch.items():
            metric = self._metrics[tp]
            partition = source_partition(self.source_alias, tp.topic, tp.partition)
            remote = self.remote[tp]
            size = 0
            for message in messages:
                records.append(SourceRecord(partition, {"offset": message.offset}, remote, tp.partition,
                                            message.key, message.value, list(message.headers),
                                            message.timestamp if message.timestamp >= 0 else None))
                size += len(message.value) if message.value is not None else 0
            if messages:
                metric.byte_count.inc(size)
                metric.record_age_ms.set(now - messages[-1].timestamp)
                end = self.consumer.highwater(tp)
                if end is not None:
                    metric.lag_records.set(max(0, end - messages[-1].offset - 1))
        return records

    async def commit_record(self, record: SourceRecord, metadata: RecordMetadata) -> None:
        upstream_topic = record.source_partition["topic"]
        metric = self._metrics.get(TopicPartition(upstream_topic, metadata.partition))
        if metric is not None:
            metric.record_count.inc()
            if record.timestamp is not None:
                metric.replication_latency_ms.set(time.time() * 1000 - record.timestamp)
        if self.sync_writer is not None:
            self.sync_writer.record(upstream_topic, metadata.partition, record.source_offset["offset"],
                                    metadata.offset)
            await self.sync_writer.fire_pending()

    async def commit(self) -> None:
        if self.sync_writer is not None:
            await self.sync_writer.promote_delayed()

    async def stop(self) -> None:
        if self.sync_writer is not None:
            await self.sync_writer.promote_delayed()
        if self.sync_producer is not None:
            await self.sync_producer.stop()
        await self.consumer.stop()
