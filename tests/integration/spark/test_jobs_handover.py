"""Partitions handed between a MirrorSource connector and a backfill submitted over REST, both ways.

On a standalone worker (Spark ``local[2]`` in the job's process), checked with librdkafka: B
holds every record exactly once, in order, at the source's offsets.

- **Cancelling**: a throttled backfill of a STOPPED connector's history; ``DELETE /jobs/{name}``
  while it copies: the job ends CANCELLED with, per partition, the prefix it provably copied (its
  partial output marked: the connector's offsets at that prefix, the plan done there), hands the
  partitions back, and the connector, resumed, streams the rest.
- **A paused connector** (one that streamed part of its topic): a backfill of its partitions waits
  until the connector's tasks let them go (restarted, still paused, without them), continues each
  after the connector's stored offset, and hands them back at its end offsets; resumed, the tasks
  stream on from there. (A running connector does the same; with a small backlog it would copy
  it before Spark starts, so the test pauses it.)
"""

from __future__ import annotations

import asyncio

import pytest

from support.kafka import KEEP_OLD_RECORDS, create_topic, produce
from support.worker import Rest, running_standalone
from test_backfill import records, target_total
from test_jobs_backfill import SPARK, librdkafka_read, mirror_connector

pytestmark = pytest.mark.integration


async def test_cancelled_backfill_hands_over_what_it_copied(cluster_a, cluster_b, unique_name, tmp_path):
    topic = unique_name("jcx")
    partitions, per_partition = 2, 12_000
    await create_topic(cluster_a.bootstrap_servers, topic, partitions, config=KEEP_OLD_RECORDS)
    await produce(cluster_a.bootstrap_servers, topic, records(partitions, per_partition, size=80))
    total = partitions * per_partition
    remote = f"A.{topic}"
    worker = {"bootstrap.servers": cluster_b.bootstrap_servers,
              "offset.storage.file.filename": str(tmp_path / "offsets.json")}
    async with running_standalone(worker) as url, Rest(url) as rest:
        assert (await rest.call("POST", "/connectors", mirror_connector("m", topic, cluster_a, cluster_b)))[0] == 201
        # 400 records/s per Spark task: the cancel (which takes Spark a few seconds on a loaded machine)
        # lands long before the 24,000 records are copied (1500/s once let a slow cancel arrive too late)
        job = {"job.class": "backfill", "connector": "m", **SPARK, "backfill.max.records.per.second": "400"}
        assert (await rest.call("POST", "/jobs", {"name": "bf", "config": job}))[0] == 201
        for _ in range(1500):
            copied = await target_total(cluster_b.bootstrap_servers, remote, partitions)
            if copied >= total * 0.1:
                break
            await asyncio.sleep(0.2)
        status, body = await rest.call("DELETE", "/jobs/bf")
        assert status == 202 and body["cancel_requested"], body
        cancelled = await rest.wait_for("/jobs/bf", lambda i: i["state"] in ("CANCELLED", "FAILED", "SUCCEEDED"),
                                        timeout=180, interval=1)
        assert cancelled["state"] == "CANCELLED", cancelled
        result = cancelled["result"]
        assert result["cancelled"] and result["handed_over"], result
        held = await target_total(cluster_b.bootstrap_servers, remote, partitions)
        assert 0 < held < total and result["records_written"] == held
        ends = {r["partition"]: r["end"] for r in result["ranges"]}
        assert sum(ends.values()) == held
        offsets = (await rest.call("GET", "/connectors/m/offsets"))[1]["offsets"]
        assert {o["partition"]["partition"]: o["offset"]["offset"] + 1 for o in offsets} == \
            {p: end for p, end in ends.items() if end > 0}
        assert "jobs" not in (await rest.call("GET", "/connectors/m/status"))[1]  # handed back
        # removed, its result returned; the connector streams on exactly from the job's partial ends
        status, removed = await rest.call("DELETE", "/jobs/bf")
        assert status == 200 and removed["result"]["cancelled"] and "warning" not in removed
        assert (await rest.call("PUT", "/connectors/m/resume"))[0] == 202
        for _ in range(600):
            if await target_total(cluster_b.bootstrap_servers, remote, partitions) >= total:
                break
            await asyncio.sleep(0.2)
    source = librdkafka_read(cluster_a.bootstrap_servers, topic, partitions)
    copy = librdkafka_read(cluster_b.bootstrap_servers, remote, partitions)
    for p in range(partitions):
        assert len(copy[p]) == per_partition and copy[p] == source[p], p


async def test_paused_connector_lets_a_backfill_continue_its_partitions_and_takes_them_back(
        cluster_a, cluster_b, unique_name, tmp_path):
    topic = unique_name("jrun")
    partitions = 2
    await create_topic(cluster_a.bootstrap_servers, topic, partitions, config=KEEP_OLD_RECORDS)
    await produce(cluster_a.bootstrap_servers, topic, records(partitions, 500, size=80))
    remote = f"A.{topic}"
    worker = {"bootstrap.servers": cluster_b.bootstrap_servers,
              "offset.storage.file.filename": str(tmp_path / "offsets.json"), "offset.flush.interval.ms": "500"}
    config = {**mirror_connector("m", topic, cluster_a, cluster_b), "initial_state": "RUNNING"}
    async with running_standalone(worker) as url, Rest(url) as rest:
        assert (await rest.call("POST", "/connectors", config))[0] == 201
        for _ in range(300):
            if await target_total(cluster_b.bootstrap_servers, remote, partitions) >= 1000:
                break
            await asyncio.sleep(0.2)
        assert (await rest.call("PUT", "/connectors/m/pause"))[0] == 202
        await rest.wait_for("/connectors/m/status", lambda s: all(t["state"] == "PAUSED" for t in s["tasks"]))
        # a backlog, and a backfill of the connector's partitions
        await produce(cluster_a.bootstrap_servers, topic, records(partitions, 6000, size=80, first=500))
        status, info = await rest.call("POST", "/jobs", {"name": "catch-up", "config": {
            "job.class": "backfill", "connector": "m", **SPARK}})
        assert status == 201, info
        done = await rest.wait_for("/jobs/catch-up", lambda i: i["state"] in ("SUCCEEDED", "FAILED"), timeout=300,
                                   interval=1)
        assert done["state"] == "SUCCEEDED", done
        assert done["result"]["continued"] == partitions, done["result"]
        for r in done["result"]["ranges"]:  # each continued the stream right after the connector's last copy
            assert r["start"] == r["target_start"] and 500 <= r["start"] < 6500 and r["end"] == 6500, r
        assert "jobs" not in (await rest.call("GET", "/connectors/m/status"))[1]
        assert (await rest.call("PUT", "/connectors/m/resume"))[0] == 202
        await rest.wait_for("/connectors/m/status", lambda s: len(s["tasks"]) == 2
                            and all(t["state"] == "RUNNING" for t in s["tasks"]), timeout=60)
        # the tasks took the partitions back at the job's end offsets: new records follow
        await produce(cluster_a.bootstrap_servers, topic, records(partitions, 100, size=80, first=6500))
        for _ in range(600):
            if await target_total(cluster_b.bootstrap_servers, remote, partitions) >= partitions * 6600:
                break
            await asyncio.sleep(0.2)
    source = librdkafka_read(cluster_a.bootstrap_servers, topic, partitions)
    copy = librdkafka_read(cluster_b.bootstrap_servers, remote, partitions)
    for p in range(partitions):
        assert len(copy[p]) == 6600 and copy[p] == source[p], p
