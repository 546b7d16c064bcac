"""MirrorSourceConnector settings: MM2's names and defaults (reference mm2.md §3 and §6.7)."""

from __future__ import annotations

from mirrorline.api import ConfigDef, ConfigKey, Importance, OneOf, Range, RegexList, Type

from mirrorline.connectors.mirror_client.config import (COMMON_CONFIG_DEF, REPLICATION_METRICS_LEVEL,  # noqa: F401
                                                       REPLICATION_METRICS_LEVEL_KEY)

GROUP = "MirrorSource"

CONFIG_PROPERTIES_EXCLUDE_DEFAULT = (
    r"follower\.replication\.throttled\.replicas, leader\.replication\.throttled\.replicas, "
    r"message\.timestamp\.difference\.max\.ms, message\.timestamp\.type, unclean\.leader\.election\.enable, "
    r"min\.insync\.replicas")

#: Task-only settings the connector adds to each task config.
TASK_ASSIGNED_PARTITIONS = "task.assigned.partitions"
TASK_INDEX = "task.index"
#: Beyond MM2: forward fetched record batches whole when nothing needs decoded records.
BATCH_FORWARDING_ENABLED = "batch.forwarding.enabled"
BATCH_FORWARDING_COALESCE_BYTES = "batch.forwarding.coalesce.bytes"
#: Beyond MM2: how long a source fetch may wait for records to gather while they flow.
REPLICATION_FETCH_GATHER_MS = "replication.fetch.gather.ms"
#: Beyond MM2: the same wait while the records come in slower than 2 MiB/s per source consumer.
REPLICATION_FETCH_GATHER_TRICKLE_MS = "replication.fetch.gather.trickle.ms"
#: Beyond MM2: long histories handed to a Spark backfill job, and scheduled reconciliation.
BACKFILL_SPARK_ENABLED = "backfill.spark.enabled"
BACKFILL_SPARK_MIN_RECORDS = "backfill.spark.min.records"
#: Prefix of the Spark settings of the jobs the connector submits (``backfill.spark.conf.spark.master``).
BACKFILL_SPARK_CONF_PREFIX = "backfill.spark.conf."
RECONCILE_INTERVAL_MS = "reconcile.interval.ms"
RECONCILE_SPARK_CONF_PREFIX = "reconcile.spark.conf."
#: Beyond MM2: per-partition or per-topic replication metrics (source_mirror.partition_metrics).

SOURCE_CONFIG_DEF = COMMON_CONFIG_DEF.merged(ConfigDef([
    ConfigKey("refresh.topics.enabled", Type.BOOLEAN, default="true", importance=Importance.LOW, group=GROUP,
              doc="Periodically look for new topics and partitions on the source."),
    ConfigKey("refresh.topics.interval.seconds", Type.LONG, default=600, validator=Range(min=1),
              importance=Importance.LOW, group=GROUP,
              doc="How often to look for new topics and partitions (first check after one interval)."),
    ConfigKey("sync.topic.configs.enabled", Type.BOOLEAN, default="true", importance=Importance.LOW, group=GROUP,
              doc="Periodically copy topic configs from source topics to their remote topics."),
    ConfigKey("sync.topic.configs.interval.seconds", Type.LONG, default=600, validator=Range(min=1),
              importance=Importance.LOW, group=GROUP, doc="How often to sync topic configs (first sync at start)."),
    ConfigKey("sync.topic.acls.enabled", Type.BOOLEAN, default="true", importance=Importance.LOW, group=GROUP,
              doc="Copy the source's topic ACLs to the remote topics, as MM2 does (literal patterns, ALLOW "
                  "WRITE dropped, ALLOW ALL downgraded to READ; beyond MM2, prefixed patterns that cover only "
                  "mirrored topics). The target's own ACLs are never deleted."),
    ConfigKey("sync.topic.acls.interval.seconds", Type.LONG, default=600, validator=Range(min=1),
              importance=Importance.LOW, group=GROUP, doc="How often topic ACLs are synced."),
    ConfigKey("config.properties.exclude", Type.LIST, default=CONFIG_PROPERTIES_EXCLUDE_DEFAULT,
              validator=RegexList(), importance=Importance.HIGH, group=GROUP,
              doc="Topic config properties never copied to remote topics (full-match regexes)."),
    ConfigKey("use.defaults.from", Type.STRING, default="target", importance=Importance.LOW, group=GROUP,
              doc="'target' (default): a config at its default on the source is reset to the target's "
                  "default; 'source': copy the source's default value."),
    ConfigKey("replication.factor", Type.INT, default=2, validator=Range(min=-1), importance=Importance.HIGH,
              group=GROUP, doc="Replication factor of remote topics created on the target (-1: broker default)."),
    ConfigKey("offset-syncs.topic.replication.factor", Type.INT, default=3, validator=Range(min=-1),
              importance=Importance.LOW, group=GROUP, doc="Replication factor of the offset-syncs topic."),
    ConfigKey("emit.offset-syncs.enabled", Type.BOOLEAN, default="true", importance=Importance.LOW, group=GROUP,
              doc="Write offset syncs (needed to translate consumer offsets for failover)."),
    ConfigKey("offset.lag.max", Type.LONG, default=100, validator=Range(min=0), importance=Importance.LOW,
              group=GROUP, doc="How far the remote topic may run ahead of the last offset sync before a new "
                               "sync is written."),
    ConfigKey(BATCH_FORWARDING_ENABLED, Type.BOOLEAN, default="true", importance=Importance.MEDIUM, group=GROUP,
              doc="Beyond MM2: when the connector has no transform and only ByteArray converters, write the "
                  "record batches fetched from the source to the target whole (compression kept, no record "
                  "decoded in Python; only producer id, epoch, sequence and CRC are rewritten), and emit offset "
                  "syncs from each batch's exact offsets. 'false' copies record by record as MM2 does. Each "
                  "task logs which path it uses."),
    ConfigKey(BATCH_FORWARDING_COALESCE_BYTES, Type.INT, default=262144, validator=Range(min=0, max=8388608),
              importance=Importance.LOW, group=GROUP,
              doc="Beyond MM2, with batch forwarding: consecutive fetched batches of a partition smaller than "
                  "this are merged (re-encoded by aiokafka's native codec, records and compression codec "
                  "kept) into batches of up to this many bytes, because the target takes one batch per "
                  "partition per request and producers with linger.ms=0 write one record per batch. Larger "
                  "batches are forwarded as they are. 0 forwards every batch as fetched. Keep it below the "
                  "target's message.max.bytes."),
    ConfigKey(REPLICATION_FETCH_GATHER_MS, Type.INT, default=25, validator=Range(min=0, max=5000),
              importance=Importance.LOW, group=GROUP,
              doc="Beyond MM2: while records flow fast from a source broker (2 MiB/s or more into a task's "
                  "source consumer), each fetch asks it to wait until 1 MiB has gathered or this many "
                  "milliseconds have passed, whichever comes first (never longer than the source consumer's "
                  "fetch.max.wait.ms); slower flows wait replication.fetch.gather.trickle.ms instead. A "
                  "shorter wait makes more fetch-and-produce round trips, each carrying a batch per partition, "
                  "which cost CPU; at 10 and 30 MB/s over 2 tasks 25 had a lower p99 than 5 for half the CPU "
                  "(docs/performance.md). 0 turns gathering off at every rate: the broker answers as soon as "
                  "any record is there, as MM2's consumer does (fetch.min.bytes=1). Idle tasks, and flows "
                  "that bring 1 MiB sooner than the wait, are unaffected."),
    ConfigKey(REPLICATION_FETCH_GATHER_TRICKLE_MS, Type.INT, default=10, validator=Range(min=0, max=5000),
              importance=Importance.LOW, group=GROUP,
              doc="Beyond MM2: the gather wait of replication.fetch.gather.ms while a task's source consumer "
                  "takes in records slower than 2 MiB/s (back to it once faster, to this once under 1 MiB/s, "
                  "judged every half second). A record of a trickle can wait this long on the source, so it "
                  "bounds latency at low rates, where the round trips it adds cost little in total. Never "
                  "longer than replication.fetch.gather.ms; 0 answers a trickle's records at once. At 1 MB/s "
                  "of 1 KB records over 2 tasks, 10 had a p50 of 17 ms (25: 26; MM2: 14) and a p99 under "
                  "MM2's in 8 rounds of 14 (1.04-1.27x where MM2 kept up), for 0.67-1.00x MM2's CPU; 5 a "
                  "p50 of 14.5 ms for 1.1x (docs/performance.md)."),
    REPLICATION_METRICS_LEVEL_KEY,
    ConfigKey("heartbeats.replication.enabled", Type.BOOLEAN, default="true", importance=Importance.LOW,
              group=GROUP, doc="Replicate heartbeats topics whatever the topic filter says."),
    ConfigKey(BACKFILL_SPARK_ENABLED, Type.BOOLEAN, default="false", importance=Importance.MEDIUM, group=GROUP,
              doc="Beyond MM2, in a worker cluster: when a newly selected topic (or, at the connector's first "
                  "start, any topic) has at least backfill.spark.min.records records of history in its "
                  "partitions that have no stored offset, the connector submits a backfill job (Spark) for that "
                  "topic and streams each of those partitions only once the job has copied it and handed it "
                  "over (exactly: no record missing, none twice, never interleaved). Other partitions stream "
                  "meanwhile. Spark settings of the job: backfill.spark.conf.<spark setting> (e.g. "
                  "backfill.spark.conf.spark.master=spark://host:7077). Needs consumer.auto.offset.reset=earliest "
                  "(the default) and the spark extra on the workers."),
    ConfigKey(BACKFILL_SPARK_MIN_RECORDS, Type.LONG, default=1_000_000, validator=Range(min=1),
              importance=Importance.MEDIUM, group=GROUP,
              doc="With backfill.spark.enabled: the smallest history (records over a topic's partitions without "
                  "a stored offset) handed to a Spark backfill; smaller ones are streamed."),
    ConfigKey(RECONCILE_INTERVAL_MS, Type.LONG, default=0, validator=Range(min=0), importance=Importance.MEDIUM,
              group=GROUP,
              doc="Beyond MM2, in a worker cluster: every this many milliseconds the connector submits a "
                  "reconcile job (Spark) for its flow, exports its per-topic missing, duplicated and "
                  "out-of-order counts as the mirrorline_reconcile_* metrics, and refreshes the offset map "
                  "failover --exact uses. Each run reads only what was copied since the previous one where it "
                  "can (docs/reconcile.md). Spark settings: reconcile.spark.conf.<spark setting>. 0: off."),
]))
