"""MirrorSource and the worker cluster's Spark jobs (beyond MM2): long histories, scheduled reconciliation.

**Long histories** (``backfill.spark.enabled``): :class:`HistoryHandoff` looks at each topic the
connector starts mirroring (every topic at the connector's start, then each new one a refresh
finds). When the partitions of the topic that have no stored offset hold at least
``backfill.spark.min.records`` records and their remote partitions are empty, it submits a
``backfill`` job bound to this connector for the topic. The job holds those partitions from the
moment it is recorded, so ``task_configs`` leaves them out: no task streams them while Spark
copies them. When the job has copied a partition it stores the connector's offset (the last
copied record) and hands the partition back; the tasks then stream it from the next record.
Records produced during the backfill are after its end offset, so they arrive after the
history, none lost, none twice. A worker (or the job's driver) killed mid-job changes nothing:
the job's record and its holds are in the config topic, another worker resumes the job, and the
backfill resumes exactly.

**Scheduled reconciliation** (``reconcile.interval.ms``): :class:`ScheduledReconcile` submits a
``mm2-reconcile`` job for the flow every interval (incremental where it can: it reads only what
was copied since the previous run, see docs/reconcile.md), and when one finishes exports its
per-topic figures as metrics: ``mirrorline_reconcile_missing_records`` (source records with no
copy although later records were copied: lost), ``..._duplicated_records``,
``..._out_of_order_records``, ``..._unexpected_records``, ``..._not_yet_copied_records`` (the
tail the mirror had not copied when the run read the target) and
``mirrorline_reconcile_last_run_timestamp_seconds``. The run also refreshes the exact offset map
``failover --exact`` uses.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import time
from collections.abc import Mapping
from typing import Any

from prometheus_client import Counter, Gauge

from mirrorline.api import ConnectorContext, KafkaClients, TopicPartition

from mirrorline.connectors.mirror_client.clients import consumer_for
from mirrorline.connectors.mirror_client.config import client_props
from mirrorline.connectors.mirror_client.formats import source_partition
from mirrorline.connectors.mirror_client.policies import ReplicationPolicy

log = logging.getLogger(__name__)

BACKFILL_JOB_CLASS = "backfill"
RECONCILE_JOB_CLASS = "mm2-reconcile"
#: Longest job name the connector makes (names must stay usable in URLs and record keys).
MAX_JOB_NAME = 200
#: Seconds the history of a topic may take to measure.
MEASURE_TIMEOUT_S = 30.0
#: Seconds between two looks at a scheduled reconciliation.
RECONCILE_CHECK_S = 5.0

_TAGS = ("source", "target", "topic")
RECONCILE_MISSING = Gauge("mirrorline_reconcile_missing_records",
                          "Source records with no copy on the target although later records were copied (lost), "
                          "per source topic, as the latest scheduled reconciliation found.", _TAGS)
RECONCILE_DUPLICATED = Gauge("mirrorline_reconcile_duplicated_records",
                             "Target records repeating an earlier copy, per source topic (latest reconciliation).",
                             _TAGS)
RECONCILE_OUT_OF_ORDER = Gauge("mirrorline_reconcile_out_of_order_records",
                               "Copies whose order differs from the source's, per source topic (latest "
                               "reconciliation).", _TAGS)
RECONCILE_UNEXPECTED = Gauge("mirrorline_reconcile_unexpected_records",
                             "Target records whose content the source partition does not hold, per source topic "
                             "(latest reconciliation).", _TAGS)
RECONCILE_NOT_YET_COPIED = Gauge("mirrorline_reconcile_not_yet_copied_records",
                                 "Source records after the last copied one when the reconciliation read the target "
                                 "(mirror lag, not loss), per source topic.", _TAGS)
RECONCILE_LAST_RUN = Gauge("mirrorline_reconcile_last_run_timestamp_seconds",
                           "When the latest scheduled reconciliation of the flow finished (Unix time).",
                           ("source", "target"))
RECONCILE_RUNS = Counter("mirrorline_reconcile_runs", "Scheduled reconciliations finished, by outcome.",
                         ("source", "target", "outcome"))


def job_name(connector: str, kind: str, topic: str | None = None) -> str:
    """The name of a job the connector submits: ``<connector>.<kind>[.<topic>]`` (hashed when too long)."""
    name = f"{connector}.{kind}" + (f".{topic}" if topic else "")
    if len(name) > MAX_JOB_NAME:
        name = name[:MAX_JOB_NAME - 13] + "." + hashlib.sha1(name.encode("utf-8")).hexdigest()[:12]
    return name


def prefixed(config: Mapping[str, Any], prefix: str) -> dict[str, str]:
    """Settings under ``prefix`` with the prefix removed (``backfill.spark.conf.spark.master`` -> ``spark.master``)."""
    return {k[len(prefix):]: str(v) for k, v in config.items() if k.startswith(prefix) and len(k) > len(prefix)}


def finished(info: Mapping[str, Any] | None) -> bool:
    """Whether a job's info says it has ended."""
    return info is not None and info.get("state") in ("SUCCEEDED", "FAILED", "CANCELLED")


class HistoryHandoff:
    """Submits a Spark backfill for each new topic with a long history; see the module docstring."""

    def __init__(self, context: ConnectorContext, originals: Mapping[str, Any], clients: KafkaClients,
                 source_alias: str, target_alias: str, policy: ReplicationPolicy, min_records: int,
                 spark_settings: Mapping[str, str]):
        self.context = context
        self.originals = dict(originals)
        self.clients = clients
        self.source_alias, self.target_alias = source_alias, target_alias
        self.policy = policy
        self.min_records = min_records
        self.spark_settings = dict(spark_settings)
        self._seen: set[str] = set()
        self.enabled = str(client_props(originals, "source", "consumer").get("auto.offset.reset", "earliest")
                           ).strip().lower() == "earliest"
        if not self.enabled:
            log.warning("Connector %s: backfill.spark.enabled does nothing with consumer.auto.offset.reset other "
                        "than earliest (new partitions start at their end: there is no history to copy)",
                        context.name)

    async def consider(self, topics: Mapping[str, int]) -> list[str]:
        """Look at the topics not looked at yet; submit backfills for long histories. The jobs submitted."""
        new = {t: n for t, n in topics.items() if t not in self._seen}
        if not new or not self.enabled:
            self._seen.update(new)
            return []
        held = {(p.get("topic"), p.get("partition")) for p, _ in self.context.partitions_held_by_jobs()
                if p.get("cluster") == self.source_alias}
        candidates = {t: n for t, n in new.items() if not any((t, p) in held for p in range(n))}
        submitted: list[str] = []
        if candidates:
            async with asyncio.timeout(MEASURE_TIMEOUT_S):
                histories = await self._histories(candidates)
            for topic, (records, partitions) in sorted(histories.items()):
                if records < self.min_records:
                    continue
                name = job_name(self.context.name, "backfill", topic)
                previous = self.context.job_status(name)
                if previous is not None and not finished(previous):
                    continue
                if previous is not None:
                    await self.context.remove_job(name)
                config = {"job.class": BACKFILL_JOB_CLASS, "backfill.topics": re.escape(topic),
                          **self.spark_settings}
                await self.context.submit_job(name, config)
                log.info("Connector %s: topic %s has %d records of history in %d partition(s) without a stored "
                         "offset: handed to Spark backfill job %s; they stream once it has copied them",
                         self.context.name, topic, records, partitions, name)
                submitted.append(name)
        self._seen.update(new)
        return submitted

    async def _histories(self, topics: Mapping[str, int]) -> dict[str, tuple[int, int]]:
        """Per topic: records in its partitions without a stored offset whose remote partition is empty."""
        tps = [TopicPartition(t, p) for t, n in sorted(topics.items()) for p in range(n)]
        stored = await self.context.offsets.offsets([source_partition(self.source_alias, tp.topic, tp.partition)
                                                     for tp in tps])
        fresh = [tp for tp, offset in zip(tps, stored) if offset is None]
        if not fresh:
            return {}
        source = consumer_for(self.clients, self.originals, "source",
                              f"{self.source_alias}->{self.target_alias}|history-probe")
        target = consumer_for(self.clients, self.originals, "target",
                              f"{self.source_alias}->{self.target_alias}|history-probe")
        await source.start()
        try:
            await target.start()
            try:
                starts = await source.beginning_offsets(fresh)
                ends = await source.end_offsets(fresh)
                remotes = {tp: TopicPartition(self.policy.format_remote_topic(self.source_alias, tp.topic),
                                              tp.partition) for tp in fresh}
                existing = set(await target.topics())
                present = [r for r in remotes.values() if r.topic in existing]
                remote_starts = await target.beginning_offsets(present) if present else {}
                remote_ends = await target.end_offsets(present) if present else {}
            finally:
                await target.stop()
        finally:
            await source.stop()
        out: dict[str, tuple[int, int]] = {}
        for tp in fresh:
            if remote_ends.get(remotes[tp], 0) > remote_starts.get(remotes[tp], 0):  # it holds records: stream it
                continue
            records, partitions = out.get(tp.topic, (0, 0))
            out[tp.topic] = (records + max(0, ends[tp] - starts[tp]), partitions + 1)
        return out


class ScheduledReconcile:
    """Submits a reconciliation of the flow every interval and exports each result; see the module docstring."""

    def __init__(self, context: ConnectorContext, source_alias: str, target_alias: str, interval_s: float,
                 spark_settings: Mapping[str, str]):
        self.context = context
        self.source_alias, self.target_alias = source_alias, target_alias
        self.interval_s = interval_s
        self.spark_settings = dict(spark_settings)
        self.name = job_name(context.name, "reconcile")
        self._exported: tuple[Any, ...] | None = None
        self._next_due = 0.0

    async def loop(self) -> None:
        """Run until cancelled (the connector's background loop)."""
        while True:
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - retried at the next look; the status says why
                log.warning("Connector %s: scheduled reconciliation: %s", self.context.name, exc)
                self.context.report_warning(f"scheduled reconciliation: {exc}")
            await asyncio.sleep(min(RECONCILE_CHECK_S, self.interval_s))

    async def tick(self) -> None:
        """Export a finished run once; submit the next one when it is due and none runs."""
        info = self.context.job_status(self.name)
        if info is not None and not finished(info):
            return
        if info is not None:
            key = (info.get("state"), info.get("updated"), info.get("attempt"))
            if key != self._exported:
                self._exported = key
                self.export(info)
        if time.monotonic() < self._next_due:
            return
        if info is not None:
            await self.context.remove_job(self.name)
        await self.context.submit_job(self.name, {"job.class": RECONCILE_JOB_CLASS, "reconcile.incremental": "true",
                                                  **self.spark_settings})
        self._next_due = time.monotonic() + self.interval_s
        log.info("Connector %s: scheduled reconciliation %s submitted", self.context.name, self.name)

    def export(self, info: Mapping[str, Any]) -> None:
        """Set the metrics from a finished run (its per-partition figures summed per source topic)."""
        flow = (self.source_alias, self.target_alias)
        RECONCILE_RUNS.labels(*flow, info.get("state", "").lower()).inc()
        result = info.get("result")
        if info.get("state") != "SUCCEEDED" or not isinstance(result, dict):
            log.warning("Connector %s: scheduled reconciliation %s ended %s: %s", self.context.name, self.name,
                        info.get("state"), (info.get("trace") or "").splitlines()[:1])
            return
        per_topic: dict[str, dict[str, int]] = {}
        for row in result.get("partitions", []):
            figures = per_topic.setdefault(row["topic"], {"missing": 0, "tail": 0, "duplicated": 0,
                                                          "out_of_order": 0, "unexpected": 0})
            figures["missing"] += int(row.get("missing", 0)) - int(row.get("missing_tail", 0))
            figures["tail"] += int(row.get("missing_tail", 0))
            for key in ("duplicated", "out_of_order", "unexpected"):
                figures[key] += int(row.get(key, 0))
        for topic, figures in per_topic.items():
            labels = (*flow, topic)
            RECONCILE_MISSING.labels(*labels).set(figures["missing"])
            RECONCILE_NOT_YET_COPIED.labels(*labels).set(figures["tail"])
            RECONCILE_DUPLICATED.labels(*labels).set(figures["duplicated"])
            RECONCILE_OUT_OF_ORDER.labels(*labels).set(figures["out_of_order"])
            RECONCILE_UNEXPECTED.labels(*labels).set(figures["unexpected"])
        RECONCILE_LAST_RUN.labels(*flow).set(time.time())
        lost = sum(f["missing"] for f in per_topic.values())
        log.log(logging.WARNING if lost else logging.INFO,
                "Connector %s: reconciliation %s: %d record(s) missing, %d duplicated, %d out of order over %d "
                "topic(s)", self.context.name, self.name, lost, sum(f["duplicated"] for f in per_topic.values()),
                sum(f["out_of_order"] for f in per_topic.values()), len(per_topic))
