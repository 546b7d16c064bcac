"""MirrorSource and Spark jobs on a worker (standalone), against real clusters A and B (broker defaults).

1. **Scheduled reconciliation** (``reconcile.interval.ms``): with records deleted from B's copy
   by the test, the first run finds them missing, exports ``mirrorline_reconcile_missing_records``
   and the alert rule of ``deploy/prometheus`` selects that series (its expression evaluated
   here against the scraped metrics); the next run is incremental (reads nothing again: no Spark).
2. **Long histories go to Spark by themselves** (``backfill.spark.enabled``): the running connector
   gets a newly selected topic with 100,000 records of history; it submits a backfill job for it,
   its status shows the partitions waiting on the job, records produced during the backfill
   arrive after it, and every partition of the copy is exact and in order (read with
   librdkafka). ``test_a_million_records_of_history_go_to_spark`` (``spark_slow``, run by
   ``scripts/spark-jobs``) runs the same with a million records.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
import yaml
from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete

from support.kafka import KEEP_OLD_RECORDS, create_topic, produce
from support.worker import Rest, running_standalone
from test_backfill import records, target_total
from test_jobs_backfill import librdkafka_read

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
ALERTS = ROOT / "deploy" / "prometheus" / "mirrorline-alerts.yaml"
SPARK = {"spark.master": "local[2]", "spark.ui.enabled": "false", "spark.driver.memory": "512m"}


def parse_metrics(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Prometheus text as (name, labels, value)."""
    import re

    out = []
    for line in text.splitlines():
        match = re.match(r"^(\w+)(?:\{(.*)\})? (\S+)$", line)
        if match and not line.startswith("#"):
            out.append((match.group(1), dict(re.findall(r'(\w+)="([^"]*)"', match.group(2) or "")),
                        float(match.group(3))))
    return out


def evaluate_alert(expr: str, samples: list[tuple[str, dict[str, str], float]]) -> dict[tuple, float]:
    """Evaluate ``max by (<labels>) (<metric>) > <threshold>``, the shape of the reconcile alert, on samples."""
    import re

    match = re.fullmatch(r"\s*max by \(([\w, ]+)\) \((\w+)\) > ([\d.]+)\s*", expr)
    assert match, f"the alert's expression changed shape: {expr!r}; update this evaluator"
    labels = [label.strip() for label in match.group(1).split(",")]
    groups: dict[tuple, float] = {}
    for name, series, value in samples:
        if name == match.group(2):
            key = tuple(series.get(label, "") for label in labels)
            groups[key] = max(groups.get(key, value), value)
    return {key: value for key, value in groups.items() if value > float(match.group(3))}


def produce_fast(bootstrap: str, topic: str, rows) -> None:
    """``(partition, key, value, headers, timestamp)`` rows written with librdkafka (fast enough for millions)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20,
                         "batch.size": 1_000_000, "queue.buffering.max.messages": 500_000})
    failed = []
    for partition, key, value, headers, timestamp in rows:
        while True:
            try:
                producer.produce(topic, value=value, key=key, partition=partition, headers=headers or None,
                                 timestamp=timestamp, on_delivery=lambda err, _m: err and failed.append(err))
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(120) == 0 and not failed, failed[:3]


async def metric(rest: Rest, name: str, **labels: str) -> float | None:
    text = await rest._session.get(rest.base_url + "/metrics")
    for sample, series, value in parse_metrics(await text.text()):
        if sample == name and all(series.get(k) == v for k, v in labels.items()):
            return value
    return None


async def test_scheduled_reconcile_finds_a_gap_and_a_long_history_goes_to_spark(cluster_a, cluster_b, unique_name,
                                                                              tmp_path):
    await scheduled_reconcile_and_automatic_backfill(cluster_a, cluster_b, unique_name, tmp_path, 100_000)


@pytest.mark.spark_slow
@pytest.mark.timeout(1800)
async def test_a_million_records_of_history_go_to_spark(cluster_a, cluster_b, unique_name, tmp_path):
    records_ = int(os.environ.get("MIRRORLINE_AUTO_BACKFILL_RECORDS", "1000000"))
    await scheduled_reconcile_and_automatic_backfill(cluster_a, cluster_b, unique_name, tmp_path, records_)


async def scheduled_reconcile_and_automatic_backfill(cluster_a, cluster_b, unique_name, tmp_path,
                                                     history: int) -> None:
    """The scenario of the module docstring, with ``history`` records in the big topic."""
    prefix = unique_name("auto")
    small, big = f"{prefix}-small", f"{prefix}-big"
    partitions = 4
    per_partition = history // partitions
    await create_topic(cluster_a.bootstrap_servers, small, 2, config=KEEP_OLD_RECORDS)
    await create_topic(cluster_a.bootstrap_servers, big, partitions, config=KEEP_OLD_RECORDS)
    await produce(cluster_a.bootstrap_servers, small, records(2, 150, size=60))
    await asyncio.to_thread(produce_fast, cluster_a.bootstrap_servers, big, records(partitions, per_partition, size=100))
    worker = {"bootstrap.servers": cluster_b.bootstrap_servers,
              "offset.storage.file.filename": str(tmp_path / "offsets.json"), "offset.flush.interval.ms": "500"}
    mirror = {"connector.class": "MirrorSourceConnector", "source.cluster.alias": "A", "target.cluster.alias": "B",
              "source.cluster.bootstrap.servers": cluster_a.bootstrap_servers,
              "target.cluster.bootstrap.servers": cluster_b.bootstrap_servers, "topics": small, "tasks.max": "2",
              "replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
              "refresh.topics.interval.seconds": "1", "sync.topic.acls.enabled": "false",
              "backfill.spark.enabled": "true", "backfill.spark.min.records": "20000",
              **{f"backfill.spark.conf.{k}": v for k, v in SPARK.items()}}
    async with running_standalone(worker) as url, Rest(url) as rest:
        assert (await rest.call("PUT", "/connectors/mirror/config", mirror))[0] == 201
        for _ in range(300):  # the small topic is streamed (below the threshold)
            if await target_total(cluster_b.bootstrap_servers, f"A.{small}", 2) >= 300:
                break
            await asyncio.sleep(0.2)
        assert (await rest.call("GET", "/jobs"))[1] == []

        # scheduled reconciliation: a gap on B (the first 20 copies of partition 0 deleted) is found,
        # exported as a metric, and selected by the alert rule's expression
        admin = AIOKafkaAdminClient(bootstrap_servers=cluster_b.bootstrap_servers)
        await admin.start()
        try:
            await admin.delete_records({TopicPartition(f"A.{small}", 0): RecordsToDelete(before_offset=20)})
        finally:
            await admin.close()
        scheduled = {"reconcile.interval.ms": "600000", **{f"reconcile.spark.conf.{k}": v for k, v in SPARK.items()}}
        assert (await rest.call("PATCH", "/connectors/mirror/config", scheduled))[0] == 200
        first = await rest.wait_for("/jobs/mirror.reconcile", lambda i: i["state"] in ("SUCCEEDED", "FAILED"),
                                    timeout=240, interval=1)
        assert first["state"] == "SUCCEEDED", first
        assert first["result"]["incremental"]["partitions_read_whole"] == 2  # no map yet: read whole
        for _ in range(60):
            missing = await metric(rest, "mirrorline_reconcile_missing_records", topic=small)
            if missing is not None:
                break
            await asyncio.sleep(0.5)
        assert missing == 20
        assert await metric(rest, "mirrorline_reconcile_duplicated_records", topic=small) == 0
        rule = next(r for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]
                    if r.get("alert") == "MirrorlineRecordsMissing")
        text = await (await rest._session.get(rest.base_url + "/metrics")).text()
        assert evaluate_alert(rule["expr"], parse_metrics(text)) == {("A", "B", small): 20.0}
        # the next run reads only what is new (nothing: no Spark at all), keeps the figures, refreshes the map
        again = {**scheduled, "reconcile.interval.ms": "600001"}  # a changed config restarts the schedule
        assert (await rest.call("PATCH", "/connectors/mirror/config", again))[0] == 200
        later = await rest.wait_for("/jobs/mirror.reconcile", lambda i: i["state"] == "SUCCEEDED"
                                    and i["result"]["reconcile_id"] != first["result"]["reconcile_id"], timeout=120)
        assert later["result"]["incremental"]["partitions_read_whole"] == 0
        assert later["result"]["totals"]["missing"] == 20 and later["result"]["map"]["stored"]
        assert all(p["read"]["source"][0] == p["read"]["source"][1] for p in later["result"]["partitions"])
        assert "spark_start" not in later["result"]["timings"]
        assert await metric(rest, "mirrorline_reconcile_missing_records", topic=small) == 20

        # long histories go to Spark by themselves: the big topic is selected while the connector runs
        status, body = await rest.call("POST", "/admin/mirroring/topic-selection?connector=mirror",
                                       {"includes": [small, big]})
        assert status == 200, body
        connector = await rest.wait_for("/connectors/mirror/status", lambda s: s.get("jobs"), timeout=60)
        job = f"mirror.backfill.{big}"
        assert connector["jobs"] == [{"name": job, "state": connector["jobs"][0]["state"],
                                      "partitions": sorted(f"{big}-{p}" for p in range(partitions))}]
        # records produced while Spark copies the history arrive after it
        await produce(cluster_a.bootstrap_servers, big, records(partitions, 200, size=100, first=per_partition))
        info = (await rest.call("GET", f"/jobs/{job}"))[1]
        assert info["origin"] == "connector" and info["connector"] == "mirror"
        done = await rest.wait_for(f"/jobs/{job}", lambda i: i["state"] in ("SUCCEEDED", "FAILED"), timeout=600,
                                   interval=1)
        assert done["state"] == "SUCCEEDED", done
        assert done["result"]["records_written"] >= history
        final = partitions * (per_partition + 200)
        for _ in range(1200):
            if await target_total(cluster_b.bootstrap_servers, f"A.{big}", partitions) >= final:
                break
            await asyncio.sleep(0.2)
        connector = (await rest.call("GET", "/connectors/mirror/status"))[1]
        assert "jobs" not in connector
    source = librdkafka_read(cluster_a.bootstrap_servers, big, partitions)
    copy = librdkafka_read(cluster_b.bootstrap_servers, f"A.{big}", partitions)
    for p in range(partitions):
        assert len(copy[p]) == len(source[p]) == per_partition + 200, (p, len(copy[p]))
        assert copy[p] == source[p], f"partition {p}: the copy differs from the source"
