"""Bulk jobs in a cluster of ``mirrorline distributed`` workers: stored in Kafka, assigned, resumed elsewhere.

The example plugin's ``example-steps`` job (no Spark; each step stores its count in the cluster's
offsets topic) keeps this quick; ``tests/integration/spark/test_jobs_backfill.py`` does the
same with a real backfill. Checked with an independent client (confluent-kafka) too: the job's
records in the config and status topics.
"""

from __future__ import annotations

import json
import signal

import pytest
from confluent_kafka import Consumer, TopicPartition

from support.distributed import WorkerCluster
from support.worker import Rest

pytestmark = pytest.mark.integration


@pytest.fixture
def worker_cluster(cluster_a, unique_name, tmp_path):
    """A function making a WorkerCluster of N workers on cluster A (stopped at the end; logs shown on failure)."""
    clusters = []

    def make(size: int) -> WorkerCluster:
        cluster = WorkerCluster(cluster_a.bootstrap_servers, unique_name("jobs"), tmp_path)
        for _ in range(size):
            cluster.add_worker()
        clusters.append(cluster)
        return cluster

    yield make
    for cluster in clusters:
        cluster.close()
        print(cluster.logs()[-6000:])


def read_topic(bootstrap: str, topic: str) -> list[tuple[str, dict | None]]:
    """Every record of ``topic`` as (key, JSON value), read with librdkafka."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "jobs-test-reader", "enable.auto.commit": False})
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        out = []
        for partition in metadata.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, partition, low)])
            read = 0
            while read < high - low:
                message = consumer.poll(5)
                assert message is not None, f"{topic}-{partition}: timed out"
                read += 1
                value = message.value()
                out.append((message.key().decode(), None if value is None else json.loads(value)))
        return out
    finally:
        consumer.close()


async def test_job_runs_on_one_worker_and_resumes_elsewhere_when_it_dies(worker_cluster, cluster_a):
    cluster = worker_cluster(3)
    await cluster.wait_healthy()
    body = {"name": "steps", "config": {"job.class": "example-steps", "steps.count": "80", "steps.step.ms": "100"}}
    # creation is the leader's: the others forward the request, body and all (two of the three do)
    for worker in cluster.workers:
        async with Rest(worker.url) as rest:
            status, answer = await rest.call("POST", "/jobs", {"name": "bad", "config": {"job.class": "nope"}})
            assert status == 400 and answer["message"].startswith("job.class: unknown job class 'nope'"), answer
    # any worker takes the request; creation is the leader's, so two of the three forward it
    async with Rest(cluster.workers[1].url) as rest:
        status, info = await rest.call("POST", "/jobs", body)
        assert status == 201, info
        status, info = await rest.call("POST", "/jobs", body)
        assert status == 409 and "already exists" in info["message"]
        running = await rest.wait_for("/jobs/steps", lambda i: i["state"] == "RUNNING" and i["progress"]
                                      and i["progress"]["completed"] >= 20, timeout=90)
    owner = next(w for w in cluster.workers if w.worker_id == running["worker_id"])
    # every worker answers for the job, from the status topic
    for worker in cluster.workers:
        async with Rest(worker.url) as rest:
            status, seen = await rest.call("GET", "/jobs/steps")
            assert status == 200 and seen["worker_id"] == owner.worker_id
    cluster.stop(owner, signal.SIGKILL)
    survivor = next(w for w in cluster.running())
    async with Rest(survivor.url) as rest:
        done = await rest.wait_for("/jobs/steps", lambda i: i["state"] in ("SUCCEEDED", "FAILED"), timeout=120)
        assert done["state"] == "SUCCEEDED", done
        assert done["attempt"] == 2 and done["worker_id"] != owner.worker_id
        # the second attempt resumed where the first one's last stored step was, and finished the count
        assert done["result"]["steps"] == 80 and 20 <= done["result"]["resumed_from"] < 80
        status, removed = await rest.call("DELETE", "/jobs/steps")
        assert status == 200 and removed["result"]["steps"] == 80

    # what the topics hold, read with librdkafka: the job's config and state records, its statuses
    configs = read_topic(cluster_a.bootstrap_servers, f"{cluster.name}-configs")
    keys = [k for k, _ in configs]
    assert "mirrorline-job-state-steps" in keys and "mirrorline-job-config-steps" in keys
    record = next(v for k, v in configs if k == "mirrorline-job-config-steps" and v is not None)
    assert record["properties"]["job.class"] == "example-steps" and record["connector"] is None
    assert configs[-1] == ("mirrorline-job-config-steps", None)  # removed: a tombstone
    statuses = [v for k, v in read_topic(cluster_a.bootstrap_servers, cluster.status_topic)
                if k == "mirrorline-job-status-steps"]
    states = [(s["state"], s["attempt"], s["worker_id"]) for s in statuses if s is not None]
    assert ("RUNNING", 1, owner.worker_id) in states
    assert states[-1][:2] == ("SUCCEEDED", 2) and statuses[-1] is None
