"""A backfill submitted over REST runs on a real Spark standalone cluster (a master and two workers on
loopback, started from the pyspark package), bound to a STOPPED MirrorSource connector; the connector
then streams on exactly where the job ended (checked with librdkafka). Marked ``spark_slow``: run by
``scripts/spark-jobs`` (the CLI's backfill and reconcile on the same cluster stay in the default suite)."""

from __future__ import annotations

import asyncio

import pytest

from support.kafka import KEEP_OLD_RECORDS, create_topic, produce
from support.worker import Rest, running_standalone
from test_backfill import records, target_total
from test_jobs_backfill import librdkafka_read, mirror_connector

pytestmark = [pytest.mark.integration, pytest.mark.spark_slow]


async def test_rest_backfill_on_a_standalone_master(cluster_a, cluster_b, spark_standalone, unique_name, tmp_path):
    topic = unique_name("jsm")
    partitions, per_partition = 2, 3000
    await create_topic(cluster_a.bootstrap_servers, topic, partitions, config=KEEP_OLD_RECORDS)
    await produce(cluster_a.bootstrap_servers, topic, records(partitions, per_partition, size=80))
    worker = {"bootstrap.servers": cluster_b.bootstrap_servers,
              "offset.storage.file.filename": str(tmp_path / "offsets.json"),
              # the worker's spark.* settings are every job's defaults (what the Helm chart's spark values set)
              "spark.master": spark_standalone.master_url, "spark.ui.enabled": "false",
              "spark.executor.memory": "512m", "spark.driver.memory": "512m"}
    async with running_standalone(worker) as url, Rest(url) as rest:
        assert (await rest.call("POST", "/connectors", mirror_connector("m", topic, cluster_a, cluster_b)))[0] == 201
        status, info = await rest.call("POST", "/jobs", {"name": "bf", "config": {"job.class": "backfill",
                                                                                 "connector": "m"}})
        assert status == 201, info
        done = await rest.wait_for("/jobs/bf", lambda i: i["state"] in ("SUCCEEDED", "FAILED"), timeout=300,
                                   interval=1)
        assert done["state"] == "SUCCEEDED", done
        assert done["result"]["records_written"] == partitions * per_partition
        await produce(cluster_a.bootstrap_servers, topic, records(partitions, 100, size=80, first=per_partition))
        assert (await rest.call("PUT", "/connectors/m/resume"))[0] == 202
        total = partitions * (per_partition + 100)
        for _ in range(300):
            if await target_total(cluster_b.bootstrap_servers, f"A.{topic}", partitions) >= total:
                break
            await asyncio.sleep(0.2)
    source = librdkafka_read(cluster_a.bootstrap_servers, topic, partitions)
    copy = librdkafka_read(cluster_b.bootstrap_servers, f"A.{topic}", partitions)
    for p in range(partitions):
        assert len(copy[p]) == per_partition + 100 and copy[p] == source[p], p
