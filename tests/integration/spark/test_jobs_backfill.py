"""A backfill submitted over REST to a cluster of three workers, bound to a MirrorSource connector.

Real clusters A and B (broker defaults), three ``mirrorline distributed`` worker processes, the
job's Spark embedded (``local[2]``) in its own process. The connector is created over REST
STOPPED; the backfill copies its history; the worker running the job is SIGKILLed halfway; the
job finishes on another worker; the connector is resumed and continues exactly where the job
ended. A librdkafka consumer then finds every source record on B exactly once, in order, at the
source's offsets. The job's records in the cluster's config and status topics are read back
with librdkafka too (the mechanics without Spark are in ``tests/integration/jobs/``).
"""

from __future__ import annotations

import asyncio
import json
import signal

import pytest
from confluent_kafka import Consumer, TopicPartition

from support.distributed import WorkerCluster
from support.kafka import KEEP_OLD_RECORDS, create_topic, librdkafka_read, produce  # noqa: F401 - others import it from here
from support.worker import Rest
from test_backfill import records, target_total

pytestmark = pytest.mark.integration

SPARK = {"spark.master": "local[2]", "spark.ui.enabled": "false", "spark.driver.memory": "512m"}




def read_records(bootstrap: str, topic: str) -> list[tuple[str, dict | None]]:
    """Every record of a worker cluster's internal topic as (key, JSON value), with confluent-kafka."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "jobs-records-check", "enable.auto.commit": False})
    out = []
    try:
        for p in consumer.list_topics(topic, timeout=10).topics[topic].partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            consumer.assign([TopicPartition(topic, p, low)])
            for _ in range(high - low):
                message = consumer.poll(10)
                assert message is not None and message.error() is None
                value = message.value()
                out.append((message.key().decode(), None if value is None else json.loads(value)))
    finally:
        consumer.close()
    return out


def mirror_connector(name: str, topic: str, cluster_a, cluster_b) -> dict:
    return {"name": name, "initial_state": "STOPPED", "config": {
        "connector.class": "MirrorSourceConnector", "source.cluster.alias": "A", "target.cluster.alias": "B",
        "source.cluster.bootstrap.servers": cluster_a.bootstrap_servers,
        "target.cluster.bootstrap.servers": cluster_b.bootstrap_servers, "topics": topic, "tasks.max": "2",
        "replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
        "refresh.topics.interval.seconds": "2", "sync.topic.acls.enabled": "false"}}


async def test_rest_backfill_survives_its_worker_and_the_connector_continues_exactly(
        cluster_a, cluster_b, unique_name, tmp_path):
    topic = unique_name("jbf")
    # a name of its own: a topic selection stored for a connector named "mirror" by another test
    # (on the same clusters, keyed by connector name and aliases) would narrow this one's topics
    name = unique_name("mirror")
    partitions, per_partition = 3, 15_000
    await create_topic(cluster_a.bootstrap_servers, topic, partitions, config=KEEP_OLD_RECORDS)
    await produce(cluster_a.bootstrap_servers, topic, records(partitions, per_partition, size=120))
    total = partitions * per_partition
    cluster = WorkerCluster(cluster_b.bootstrap_servers, unique_name("jw"), tmp_path)
    try:
        for _ in range(3):
            cluster.add_worker()
        await cluster.wait_healthy()
        # creating a job is the leader's: the others forward the request, body and all (two of the three do)
        for worker in cluster.workers:
            async with Rest(worker.url) as rest:
                status, body = await rest.call("POST", "/jobs", {"name": "x", "config": {"job.class": "nope"}})
                assert status == 400 and body["message"].startswith("job.class: unknown job class 'nope'"), body
        async with Rest(cluster.workers[0].url) as rest:
            status, body = await rest.call("POST", "/connectors", mirror_connector(name, topic, cluster_a,
                                                                                     cluster_b))
            assert status == 201, body
            seq = {"name": "seq", "initial_state": "STOPPED", "config": {
                "connector.class": "SequenceSource", "topic": topic, "streams": "1", "tasks.max": "1"}}
            assert (await rest.call("POST", "/connectors", seq))[0] == 201

            # bad input, each a 4xx naming the field
            job = {"job.class": "backfill", "connector": name, **SPARK,
                   "backfill.max.records.per.second": "2500"}
            status, body = await rest.call("POST", "/jobs", {"name": "x", "config": {**job, "connector": "seq"}})
            assert status == 400 and body["message"].startswith("connector: connector 'seq' is a SequenceSource"), body
            status, body = await rest.call("POST", "/jobs", {"name": "x", "config": {**job, "topics": "other"}})
            assert status == 400 and body["message"].startswith(f"topics: a backfill of connector {name}"), body
            status, body = await rest.call("POST", "/jobs", {"name": "x", "config": {**job,
                                                                                    "backfill.topics": "nope.*"}})
            assert status == 400 and "unknown topic" in body["message"], body

            status, info = await rest.call("POST", "/jobs", {"name": "bf", "config": job})
            assert status == 201, info
            assert info["connector"] == name and len(info["partitions"]) == partitions
            # a second job writing the same partitions is refused, naming the one that holds them
            status, body = await rest.call("POST", "/jobs", {"name": "bf2", "config": job})
            assert status == 409 and body["message"].startswith("partitions: job 'bf'"), body
            status, connector = await rest.call("GET", f"/connectors/{name}/status")
            assert connector["jobs"] == [{"name": "bf", "state": connector["jobs"][0]["state"],
                                          "partitions": sorted(f"{topic}-{p}" for p in range(partitions))}]

            running = await rest.wait_for("/jobs/bf", lambda i: i["state"] in ("RUNNING", "FAILED"), timeout=120)
            assert running["state"] == "RUNNING", running
        # kill the job's worker halfway through the copy
        remote = f"A.{topic}"
        held = 0
        for _ in range(900):
            held = await target_total(cluster_b.bootstrap_servers, remote, partitions)
            if held >= total * 0.3:
                break
            await asyncio.sleep(0.2)
        async with Rest(cluster.workers[0].url) as rest:
            owner_id = (await rest.call("GET", "/jobs/bf"))[1]["worker_id"]
        owner = next(w for w in cluster.workers if w.worker_id == owner_id)
        for worker in cluster.workers:  # every worker answers for the job, from the status topic
            async with Rest(worker.url) as rest:
                assert (await rest.call("GET", "/jobs/bf"))[1]["worker_id"] == owner_id
        cluster.stop(owner, signal.SIGKILL)
        at_kill = await target_total(cluster_b.bootstrap_servers, remote, partitions)
        assert 0 < at_kill < total, (at_kill, total)

        survivor = cluster.running()[0]
        async with Rest(survivor.url) as rest:
            done = await rest.wait_for("/jobs/bf", lambda i: i["state"] in ("SUCCEEDED", "FAILED"), timeout=240,
                                       interval=1)
            assert done["state"] == "SUCCEEDED", done
            assert done["attempt"] >= 2 and done["worker_id"] != owner_id
            assert done["result"]["resumed"] == partitions
            assert done["result"]["records_written"] <= total - at_kill  # nothing already on B written again
            assert "records_per_second" in done and done["progress"]["total"] > 0
            # the connector's offsets are the job's end offsets; resumed, it continues from the next record
            offsets = (await rest.call("GET", f"/connectors/{name}/offsets"))[1]["offsets"]
            assert sorted((o["partition"]["partition"], o["offset"]["offset"]) for o in offsets) == \
                [(p, per_partition - 1) for p in range(partitions)]
            await produce(cluster_a.bootstrap_servers, topic, records(partitions, 300, size=120,
                                                                      first=per_partition))
            assert (await rest.call("PUT", f"/connectors/{name}/resume"))[0] == 202
            status, connector = await rest.call("GET", f"/connectors/{name}/status")
            assert "jobs" not in connector  # the job handed its partitions back
            final = total + partitions * 300
            for _ in range(600):
                if await target_total(cluster_b.bootstrap_servers, remote, partitions) >= final:
                    break
                await asyncio.sleep(0.2)

        # the job's records as the cluster's topics hold them
        configs = read_records(cluster_b.bootstrap_servers, f"{cluster.name}-configs")
        record = next(v for k, v in configs if k == "mirrorline-job-config-bf")
        assert record["connector"] == name and record["properties"]["job.class"] == "backfill"
        assert sorted((p["topic"], p["partition"]) for p in record["partitions"]) == \
            [(topic, p) for p in range(partitions)]
        assert ("mirrorline-job-state-bf", {"state": "STARTED"}) in configs
        statuses = [v for k, v in read_records(cluster_b.bootstrap_servers, cluster.status_topic)
                    if k == "mirrorline-job-status-bf"]
        states = [(s["state"], s["attempt"], s["worker_id"]) for s in statuses]
        assert ("RUNNING", 1, owner_id) in states and states[-1][:2] == ("SUCCEEDED", done["attempt"])
        assert statuses[-1]["released"] is True

        source = librdkafka_read(cluster_a.bootstrap_servers, topic, partitions)
        copy = librdkafka_read(cluster_b.bootstrap_servers, remote, partitions)
        for p in range(partitions):
            assert len(copy[p]) == len(source[p]) == per_partition + 300, (p, len(copy[p]), len(source[p]))
            assert copy[p] == source[p], f"partition {p}: the copy differs from the source"
    finally:
        cluster.close()
        print(cluster.logs()[-8000:])
