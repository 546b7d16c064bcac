"""``ReconcileJob``: reads a flow's source topics and their remote copies with Spark and proves the copy.

For every mirrored partition (:mod:`.reconcile_plan` picks them and their offset ranges) the job
matches records by content (:mod:`.reconcile_match`), counts what is missing, duplicated,
unexpected and out of order, builds the exact offset map source offset -> target offset, and
stores the map on the target (:mod:`mirrorline.connectors.mm2.offset_map_store`) where
``mirrorline offsets translate --exact`` and ``mirrorline failover --exact`` find it.

Settings: the flow's ``mm2.properties`` keys (clusters, client settings, ``topics``,
replication policy ...; ``spark.*`` keys configure Spark) plus the job's own keys below; the
client settings of clusters ``source`` and ``target`` (for Spark's reads) come with the run. The
summary it returns is what ``mirrorline reconcile`` prints (table or ``--json``).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

from mirrorline.api import ConfigDef, ConfigError, ConfigKey, ConnectorRef, Importance, Job, JobContext, JobSettings, \
    NonEmptyString, Type

from mirrorline.connectors.mirror_client.config import client_props
from mirrorline.connectors.mm2.mm2_config import CHECKPOINT_CONNECTOR, SOURCE_CONNECTOR, MirrorMakerConfig
from mirrorline.connectors.mm2.offset_map import PartitionMap, offset_map_topic
from mirrorline.connectors.mm2.offset_map_store import read_maps, write_maps

from .flow_clients import FlowEnds, parse_flow
from .job_binding import MIRROR_SOURCE_CLASSES, aliases, flow_topic_filter, mm2_properties
from .reconcile_incremental import merge, next_window
from .reconcile_plan import PartitionRange, plan_ranges, topics_pattern
from .reconcile_result import PartitionResult

FLOW = "reconcile.flow"
TOPICS = "reconcile.topics"
STORE_MAP = "reconcile.store.map"
INCREMENTAL = "reconcile.incremental"
CONNECTOR_NAME = "reconcile.connector.name"

#: Settings that are the job's own; the others are the flow's (an mm2.properties).
OWN_PREFIXES = ("reconcile.", "spark.")

#: Figures summed over partitions into the totals.
FIGURES = ("source", "target", "matched", "missing", "missing_tail", "duplicated", "unexpected", "out_of_order")


def match_on_spark(read: Callable[[str, dict], Any], ranges: list[PartitionRange]) -> dict:
    """Read both sides of ``ranges`` with ``read(cluster, ranges)`` (``context.read_kafka``) and match them.

    Blocking: run it in a thread.
    """
    from pyspark.sql import functions as F

    from .reconcile_match import reconcile_frames  # pyspark: imported only when a job runs

    source = read("source", {r.key: (r.source_start, r.source_end) for r in ranges if r.source_end > r.source_start})
    wanted = {(r.target_topic, r.partition): (r.target_start, r.target_end) for r in ranges
              if r.target_end > r.target_start}
    if wanted:
        names = sorted({(r.target_topic, r.source_topic) for r in ranges})
        source_name = F.create_map(*[F.lit(name) for pair in names for name in pair])
        target = read("target", wanted).withColumn("topic", source_name[F.col("topic")])
    else:
        target = source.limit(0)
    return reconcile_frames(source, target)


def partition_maps(ranges: list[PartitionRange], results: dict, reconcile_id: str
                   ) -> tuple[list[PartitionMap], list[dict[str, Any]]]:
    """Each range's offset map, and its row of the summary (a range absent from ``results``: both sides empty)."""
    now_ms = int(time.time() * 1000)
    maps, rows = [], []
    for r in ranges:
        result = results.get(r.key) or PartitionResult(r.source_topic, r.partition)
        counts = result.counts()
        maps.append(PartitionMap(r.source_topic, r.partition, r.target_topic, r.source_start, r.source_end,
                                 r.target_start, r.target_end, tuple(result.runs), reconcile_id, now_ms, counts))
        rows.append({"topic": r.source_topic, "partition": r.partition, "target_topic": r.target_topic,
                     "source_range": [r.source_start, r.source_end], "target_range": [r.target_start, r.target_end],
                     **counts, "first_missing": result.first_missing, "last_missing": result.last_missing,
                     "runs": len(result.runs)})
    return maps, rows


class ReconcileJob(Job):
    """Matches a flow's source partitions with their copies by content and stores the exact offset map."""

    name = "mm2-reconcile"
    description = ("prove a MirrorMaker 2 flow's copy: missing, duplicated and out-of-order records per "
                   "partition, and the exact source->target offset map for failover --exact")
    config_def = ConfigDef([
        ConfigKey(FLOW, Type.STRING, validator=NonEmptyString(), importance=Importance.HIGH,
                  doc="The replication flow to reconcile, SOURCE->TARGET (e.g. A->B), whose clusters and "
                      "settings the other keys (an mm2.properties) give."),
        ConfigKey(TOPICS, Type.STRING, default=None, importance=Importance.MEDIUM,
                  doc="Regular expression a source topic's whole name must match to be reconciled (default: "
                      "every topic the flow mirrors)."),
        ConfigKey(STORE_MAP, Type.BOOLEAN, default="true", importance=Importance.MEDIUM,
                  doc="Store the offset map on the target in mirrorline-offset-map.<source>.internal "
                      "(compacted), for offsets translate --exact and failover --exact."),
        ConfigKey(CONNECTOR_NAME, Type.STRING, default=SOURCE_CONNECTOR, importance=Importance.LOW,
                  doc="The MirrorSource connector whose stored topic selection (mirroring controls) decides the "
                      "flow's topics, with its topics setting. Set by the worker cluster when the job names a "
                      "connector."),
        ConfigKey(INCREMENTAL, Type.BOOLEAN, default="false", importance=Importance.MEDIUM,
                  doc="Read only what was copied since the stored map's reconciliation and extend that map "
                      "(scheduled runs); partitions for which that is not sound are read whole (see "
                      "docs/reconcile.md)."),
    ])

    connector_classes = MIRROR_SOURCE_CLASSES

    def prepare(self, settings, connector: ConnectorRef | None) -> JobSettings:
        """The flow from the named MirrorSource connector (as its mm2.properties), or from the settings."""
        settings = {str(k): str(v) for k, v in settings.items()}
        if connector is not None:
            foreign = sorted(k for k in settings if not k.startswith(OWN_PREFIXES))
            if foreign:
                raise ConfigError(f"{foreign[0]}: a reconciliation of connector {connector.name} takes the flow's "
                                  f"settings from the connector; give only reconcile.* and spark.* settings")
            props = mm2_properties(connector.config)
            source, target = aliases(connector.config)
            if f"{source}->{target}.checkpoints.topic.replication.factor" not in props:
                # the map topic is internal like the offset-syncs topic: same replication factor
                props[f"{source}->{target}.checkpoints.topic.replication.factor"] = str(
                    connector.config.get("offset-syncs.topic.replication.factor", "3"))
            settings = {**props, **settings, FLOW: f"{source}->{target}", CONNECTOR_NAME: connector.name}
        if not settings.get(FLOW):
            raise ConfigError(f"{FLOW}: required (SOURCE->TARGET), or name a MirrorSource connector")
        config = MirrorMakerConfig(settings)
        source, target = parse_flow(config, settings[FLOW])
        originals = config.connector_config(source, target, SOURCE_CONNECTOR)
        return JobSettings(settings, {side: client_props(originals, side, "consumer") for side in ("source", "target")})

    async def run(self, context: JobContext) -> dict[str, Any]:
        started = time.monotonic()
        config = MirrorMakerConfig(dict(context.settings))
        source, target = parse_flow(config, context.config[FLOW])
        pattern = topics_pattern(context.config[TOPICS])
        async with FlowEnds(config, source, target, required=("source", "target"), clients=context.clients) as ends:
            topic_filter = await flow_topic_filter(context.clients, ends.originals, context.config[CONNECTOR_NAME],
                                                   source, target)
            ranges = await plan_ranges(ends, pattern, topic_filter)
            originals = ends.originals
            context.logger.info("reconciling %d partition(s) of %d topic(s) of flow %s->%s", len(ranges),
                                len({r.source_topic for r in ranges}), source, target)
            previous = {}
            if context.config[INCREMENTAL]:
                assert ends.target is not None
                previous = await read_maps(ends.target.admin, ends.target.consumer, source)
            windows, full = [], {}
            for r in ranges:
                window, reason = next_window(r, previous.get(r.key)) if context.config[INCREMENTAL] else (r, "")
                windows.append(window)
                if reason:
                    full[f"{r.source_topic}-{r.partition}"] = reason
            timings = {"plan": time.monotonic() - started}
            to_read = [w for w in windows if w.source_end > w.source_start or w.target_end > w.target_start]
            results: dict = {}
            if to_read:
                await asyncio.to_thread(lambda: context.spark)  # the JVM starts here, off the event loop
                timings["spark_start"] = time.monotonic() - started - sum(timings.values())
                results = await context.run_spark(lambda: match_on_spark(context.read_kafka, to_read),
                                                  f"reconcile {source}->{target}")
                timings["match"] = time.monotonic() - started - sum(timings.values())
            reconcile_id = uuid.uuid4().hex[:12]
            whole = []
            for r, window in zip(ranges, windows):
                result = results.get(r.key) or PartitionResult(r.source_topic, r.partition)
                prior = previous.get(r.key)
                if context.config[INCREMENTAL] and prior is not None and f"{r.source_topic}-{r.partition}" not in full:
                    r, result = merge(prior, window, result)
                whole.append((r, result, window))
            maps, partitions = partition_maps([r for r, _, _ in whole], {r.key: res for r, res, _ in whole},
                                              reconcile_id)
            for row, (_, _, window) in zip(partitions, whole):
                row["read"] = {"source": [window.source_start, window.source_end],
                               "target": [window.target_start, window.target_end]}
            stored = None
            if context.config[STORE_MAP]:
                assert ends.target is not None
                producer = client_props(originals, "target", "producer")
                factor = int(config.connector_config(source, target, CHECKPOINT_CONNECTOR)
                             .get("checkpoints.topic.replication.factor", 3))
                stored = await write_maps(ends.target.admin, ends.target.consumer, context.clients, producer, source,
                                          maps, factor)
            timings["store"] = time.monotonic() - started - sum(timings.values())
        totals = {k: sum(p.get(k, 0) for p in partitions) for k in FIGURES}
        return {"flow": f"{source}->{target}", "reconcile_id": reconcile_id, "partitions": partitions,
                "totals": totals, "map": {"topic": offset_map_topic(source), "stored": stored is not None,
                                          "runs": sum(len(m.runs) for m in maps)},
                "incremental": {"enabled": context.config[INCREMENTAL],
                                "partitions_read_whole": len(full) if context.config[INCREMENTAL] else len(ranges),
                                "full_reason": full if context.config[INCREMENTAL] else {}},
                "seconds": round(time.monotonic() - started, 1),
                "timings": {k: round(v, 1) for k, v in timings.items()}}
